package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	"brainbot/mcp/audio"
	"brainbot/output"
)

// MaxSpeechInput is the API's input limit in characters; longer text is
// synthesised in parts and joined into one file.
const MaxSpeechInput = 4096

// maxSpeechBytes bounds one speech answer (a 4096-character MP3 is ~5 MB).
const maxSpeechBytes = 64 << 20

var voices = []string{"alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse"}

// speechFormats maps the tool's format to the file extension.
var speechFormats = map[string]string{"mp3": ".mp3", "opus": ".ogg"}

type speechResult struct {
	Success    bool   `json:"success"`
	AudioPath  string `json:"audio_path"`
	Format     string `json:"format"`
	Bytes      int    `json:"bytes"`
	Characters int    `json:"characters"`
	Voice      string `json:"voice"`
	Parts      int    `json:"parts"`
	Base64     string `json:"audio_base64,omitempty"`
}

// NewTTSServer is the "tts" MCP server with the text_to_speech tool.
func NewTTSServer(cfg Config) *server.MCPServer {
	return newServer("tts", ttsTool(cfg))
}

func ttsTool(cfg Config) server.ServerTool {
	t := &tts{cfg: cfg.withDefaults(), client: openai.NewClientWithConfig(cfg.OpenAI)}
	tool := mcpgo.NewTool("text_to_speech",
		mcpgo.WithDescription("Convert text to speech with OpenAI and save it as an audio file. Returns JSON with audio_path."),
		mcpgo.WithString("text", mcpgo.Required(), mcpgo.Description("The text to speak, verbatim. Long text is spoken in full.")),
		mcpgo.WithString("voice", mcpgo.Description("OpenAI voice (default alloy)."), mcpgo.Enum(voices...)),
		mcpgo.WithNumber("speed", mcpgo.Description("Speaking speed, 0.25 to 4.0 (default 1.0)."), mcpgo.Min(0.25), mcpgo.Max(4.0)),
		mcpgo.WithString("model", mcpgo.Description("Speech model (default tts-1).")),
		mcpgo.WithString("format", mcpgo.Description("Audio format: mp3 (default) or opus (saved as .ogg)."), mcpgo.Enum("mp3", "opus")),
		mcpgo.WithString("filename", mcpgo.Description("File name prefix; the tool appends -<unix ms> and the extension.")),
		mcpgo.WithBoolean("include_base64", mcpgo.Description("Also return the audio as base64 (default false).")),
	)
	return server.ServerTool{Tool: tool, Handler: t.handle}
}

type tts struct {
	cfg    Config
	client *openai.Client
}

func (t *tts) handle(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	text, err := req.RequireString("text")
	if err != nil || strings.TrimSpace(text) == "" {
		return mcpgo.NewToolResultError("text is required and must not be empty"), nil
	}
	voice := req.GetString("voice", "alloy")
	if !slices.Contains(voices, voice) {
		return mcpgo.NewToolResultError(fmt.Sprintf("unknown voice %q (one of %s)", voice, strings.Join(voices, ", "))), nil
	}
	speed := req.GetFloat("speed", 1.0)
	if speed < 0.25 || speed > 4.0 {
		return mcpgo.NewToolResultError(fmt.Sprintf("speed %v out of range 0.25-4.0", speed)), nil
	}
	format := req.GetString("format", "mp3")
	ext, ok := speechFormats[format]
	if !ok {
		return mcpgo.NewToolResultError(fmt.Sprintf("unknown format %q (mp3 or opus)", format)), nil
	}
	model := req.GetString("model", string(openai.TTSModel1))
	filename := req.GetString("filename", "")
	log := t.cfg.Log.With(zap.String("tool", "text_to_speech"), zap.String("voice", voice), zap.String("format", format))
	log.Debug("speech requested", zap.String("text", text))

	parts := splitText(text, MaxSpeechInput)
	clips, failed, err := t.synthesiseAll(ctx, parts, openai.CreateSpeechRequest{
		Model: openai.SpeechModel(model), Voice: openai.SpeechVoice(voice),
		ResponseFormat: openai.SpeechResponseFormat(format), Speed: speed,
	})
	if err != nil {
		reason := openAIFailure(err, t.cfg.Timeout)
		log.Warn("speech failed", zap.Int("part", failed+1), zap.Int("parts", len(parts)), zap.String("reason", reason))
		return mcpgo.NewToolResultError(reason), nil
	}
	data, err := joinClips(format, clips)
	if err != nil {
		log.Warn("joining speech parts failed", zap.Error(err))
		return mcpgo.NewToolResultError("audio: cannot join the parts: " + err.Error()), nil
	}
	path, err := output.Save(filepath.Join(t.cfg.DataDir, output.Audio.Dir()), filename, ext, data, t.cfg.Now())
	if err != nil {
		log.Error("saving speech failed", zap.Error(err))
		return mcpgo.NewToolResultError("saving the audio failed: " + err.Error()), nil
	}
	res := speechResult{Success: true, AudioPath: path, Format: format, Bytes: len(data),
		Characters: utf8.RuneCountInString(text), Voice: voice, Parts: len(parts)}
	if req.GetBool("include_base64", false) {
		res.Base64 = base64.StdEncoding.EncodeToString(data)
	}
	log.Info("speech saved", zap.String("path", path), zap.Int("bytes", len(data)), zap.Int("characters", res.Characters), zap.Int("parts", len(parts)))
	return jsonResult(res), nil
}

// synthesise makes one speech call within the per-call deadline, body
// included.
// speechParallel bounds how many parts of one long text are spoken at once.
const speechParallel = 4

// synthesiseAll speaks the parts concurrently, at most speechParallel at
// once, and returns the clips in order. The Claude CLI prints nothing while
// a tool runs, so a long answer spoken part after part could outlast the
// bot's inactivity limit (and keeps the user waiting longer). The first
// failure cancels the rest; failed is its part's index.
func (t *tts) synthesiseAll(ctx context.Context, parts []string, base openai.CreateSpeechRequest) (clips [][]byte, failed int, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clips = make([][]byte, len(parts))
	slots := make(chan struct{}, speechParallel)
	var (
		wg   sync.WaitGroup
		once sync.Once
	)
	for i, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				return
			}
			req := base
			req.Input = part
			clip, perr := t.synthesise(ctx, req)
			if perr != nil {
				// Only the first failure counts: the others are its cancellation.
				once.Do(func() { failed, err = i, perr; cancel() })
				return
			}
			clips[i] = clip
		}()
	}
	wg.Wait()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err() // the caller's context ended before every part began
	}
	return clips, failed, err
}

func (t *tts) synthesise(ctx context.Context, req openai.CreateSpeechRequest) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	resp, err := t.client.CreateSpeech(ctx, req)
	if err != nil {
		return nil, err
	}
	defer resp.Close()
	b, err := io.ReadAll(io.LimitReader(resp, maxSpeechBytes+1))
	switch {
	case err != nil:
		return nil, err
	case len(b) == 0:
		return nil, errors.New("empty audio answer")
	case len(b) > maxSpeechBytes:
		return nil, fmt.Errorf("audio answer larger than %d bytes", maxSpeechBytes)
	}
	return b, nil
}

// joinClips makes one file of the parts' audio. A single part is kept as
// OpenAI sent it.
func joinClips(format string, clips [][]byte) ([]byte, error) {
	if len(clips) == 1 {
		return clips[0], nil
	}
	if format == "opus" {
		return audio.JoinOggOpus(clips)
	}
	return audio.JoinMP3(clips)
}
