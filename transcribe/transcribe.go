// Package transcribe turns the voice messages users send into text, with
// OpenAI's transcription API (go-openai's CreateTranscription). The bot
// downloads the audio and decides what to do with the words; this package
// only asks OpenAI.
package transcribe

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/sashabaranov/go-openai"
)

// Client transcribes audio. It is safe for concurrent use.
type Client struct {
	api *openai.Client
}

// New returns a client of the OpenAI API configured by cfg (key and base
// URL, as for the voice and image tools).
func New(cfg openai.ClientConfig) *Client {
	return &Client{api: openai.NewClientWithConfig(cfg)}
}

// Transcribe returns the words spoken in audio, transcribed by model
// (toolspec.TranscriptionModels). name is the audio's file name: OpenAI
// tells the format by its extension (.ogg, .oga, .mp3, .m4a, .wav, ...).
// The error wraps *openai.APIError when OpenAI refused (audio it cannot
// read is a 400).
func (c *Client) Transcribe(ctx context.Context, model, name string, audio io.Reader) (string, error) {
	res, err := c.api.CreateTranscription(ctx, openai.AudioRequest{
		Model:    model,
		FilePath: name,
		Reader:   audio,
		// json is the one format every transcription model answers.
		Format: openai.AudioResponseFormatJSON,
	})
	if err != nil {
		return "", fmt.Errorf("transcribe %s with %s: %w", name, model, err)
	}
	return strings.TrimSpace(res.Text), nil
}
