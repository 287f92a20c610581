package transcribe

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/sashabaranov/go-openai"

	"brainbot/mcp/openaitest"
)

func newClient(t *testing.T) (*Client, *openaitest.Server) {
	t.Helper()
	api := openaitest.NewServer()
	t.Cleanup(api.Close)
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = api.URL
	return New(cfg), api
}

func TestTranscribeReturnsTheWords(t *testing.T) {
	c, api := newClient(t)
	note, err := openaitest.VoiceNote("  What is the weather like today?  ")
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Transcribe(context.Background(), "gpt-4o-mini-transcribe", "voice.ogg", bytes.NewReader(note))
	if err != nil {
		t.Fatal(err)
	}
	if got != "What is the weather like today?" {
		t.Errorf("transcript %q", got)
	}
	reqs := api.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/audio/transcriptions" || r.Model != "gpt-4o-mini-transcribe" || r.FileName != "voice.ogg" ||
		r.Format != "json" || r.AudioBytes != len(note) || !r.Authorized {
		t.Errorf("request %+v", r)
	}
}

// Audio OpenAI cannot read is an API error the caller can inspect, with
// the file and model named for the log.
func TestTranscribeBrokenAudio(t *testing.T) {
	c, _ := newClient(t)
	_, err := c.Transcribe(context.Background(), "whisper-1", "voice.ogg", bytes.NewReader([]byte("not audio at all")))
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusBadRequest {
		t.Fatalf("err = %v, want a 400 APIError", err)
	}
	if msg := err.Error(); !bytes.Contains([]byte(msg), []byte("voice.ogg")) || !bytes.Contains([]byte(msg), []byte("whisper-1")) {
		t.Errorf("error %q does not name the file and model", msg)
	}
}
