package openaitest

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"

	"brainbot/mcp/audio"
)

func client(s *Server) *openai.Client {
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = s.URL
	return openai.NewClientWithConfig(cfg)
}

func speak(t *testing.T, c *openai.Client, input, format string) ([]byte, error) {
	t.Helper()
	resp, err := c.CreateSpeech(context.Background(), openai.CreateSpeechRequest{Model: "tts-1", Input: input, Voice: "alloy", ResponseFormat: openai.SpeechResponseFormat(format)})
	if err != nil {
		return nil, err
	}
	defer resp.Close()
	return io.ReadAll(resp)
}

func TestSpeechIsRealAudioScalingWithInput(t *testing.T) {
	s := NewServer()
	defer s.Close()
	c := client(s)
	short, err := speak(t, c, "Hi there.", "mp3")
	if err != nil {
		t.Fatal(err)
	}
	long, err := speak(t, c, "Hi there, this is a much longer sentence to speak.", "mp3")
	if err != nil {
		t.Fatal(err)
	}
	ds, err1 := audio.MP3Duration(short)
	dl, err2 := audio.MP3Duration(long)
	if err1 != nil || err2 != nil || ds <= 0 || dl <= ds {
		t.Errorf("durations %v (%v), %v (%v): want real MP3s, longer for longer input", ds, err1, dl, err2)
	}
	opus, err := speak(t, c, "Hi there.", "opus")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := audio.OggOpusDuration(opus); err != nil || d < 400*time.Millisecond {
		t.Errorf("opus: %v, %v", d, err)
	}
	if r := s.Requests(); len(r) != 3 || r[2].Format != "opus" || r[0].Input != "Hi there." || !r[0].Authorized {
		t.Errorf("requests %+v", r)
	}
}

func TestImages(t *testing.T) {
	s := NewServer()
	defer s.Close()
	c := client(s)
	for _, format := range []string{"b64_json", ""} {
		resp, err := c.CreateImage(context.Background(), openai.ImageRequest{Prompt: "x", Model: "dall-e-2", Size: "256x256", N: 1, ResponseFormat: format})
		if err != nil {
			t.Fatal(err)
		}
		item := resp.Data[0]
		if (item.B64JSON != "") != (format == "b64_json") || (item.URL != "") != (format == "") {
			t.Errorf("format %q answered %+v", format, item)
		}
		if item.URL != "" {
			r, err := http.Get(item.URL)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if cfg, err := png.DecodeConfig(bytes.NewReader(b)); err != nil || cfg.Width != 256 {
				t.Errorf("served image: %+v, %v", cfg, err)
			}
		}
	}
	if _, err := c.CreateImage(context.Background(), openai.ImageRequest{Prompt: "x", Model: "dall-e-3", Size: "256x256"}); err == nil {
		t.Error("dall-e-3 accepted 256x256")
	}
}

func TestFailures(t *testing.T) {
	s := NewServer()
	defer s.Close()
	c := client(s)
	s.FailNext(http.StatusServiceUnavailable, "overloaded", "try later")
	for _, tt := range []struct {
		input  string
		status int
		code   string
	}{
		{"queued failure", 503, "overloaded"},
		{"x #openai-401", 401, "invalid_api_key"},
		{"x #openai-429", 429, "rate_limit_exceeded"},
		{"x #openai-500", 500, "server_error"},
		{"x #openai-policy", 400, "content_policy_violation"},
	} {
		_, err := speak(t, c, tt.input, "mp3")
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != tt.status || apiErr.Code != tt.code {
			t.Errorf("%s: %v", tt.input, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.CreateImage(ctx, openai.ImageRequest{Prompt: "#openai-slow", Model: "dall-e-2"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow: %v", err)
	}
}

func transcribe(c *openai.Client, name string, data []byte) (string, error) {
	res, err := c.CreateTranscription(context.Background(), openai.AudioRequest{Model: "whisper-1", FilePath: name, Reader: bytes.NewReader(data)})
	return res.Text, err
}

// The transcription stand-in hears a VoiceNote's words, silence in other
// audio it can parse, and refuses the rest as OpenAI does.
func TestTranscriptions(t *testing.T) {
	s := NewServer()
	defer s.Close()
	c := client(s)
	note, err := VoiceNote("hello there")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := audio.OggOpusDuration(note); err != nil || d < 600*time.Millisecond {
		t.Errorf("voice note lasts %v (%v), want about 11 characters of speech", d, err)
	}
	if got, err := transcribe(c, "voice.oga", note); err != nil || got != "hello there" {
		t.Errorf("voice note heard as %q, %v", got, err)
	}
	silence, _ := SilentOggOpus(50)
	if got, err := transcribe(c, "voice.ogg", silence); err != nil || got != "" {
		t.Errorf("silence heard as %q, %v", got, err)
	}
	if got, err := transcribe(c, "song.mp3", SilentMP3(10)); err != nil || got != "" {
		t.Errorf("mp3 heard as %q, %v", got, err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		code int
	}{
		{"voice.ogg", []byte("broken"), http.StatusBadRequest},
		{"voice.aiff", note, http.StatusBadRequest},
		{"huge.mp3", bytes.Repeat([]byte{0}, MaxTranscriptionBytes+1), http.StatusRequestEntityTooLarge},
	} {
		_, err := transcribe(c, tc.name, tc.data)
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != tc.code {
			t.Errorf("%s: err = %v, want HTTP %d", tc.name, err, tc.code)
		}
	}
	// A directive among the words fails the call, as in speech input.
	failing, _ := VoiceNote("please #openai-500")
	var apiErr *openai.APIError
	if _, err := transcribe(c, "voice.ogg", failing); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 {
		t.Errorf("#openai-500 voice note: err = %v", err)
	}
}

// GET /v1/models is the cheap call that checks a key: it lists the
// models the tools use, and with RequireKey a wrong key is refused as
// OpenAI refuses it.
func TestModelsAndKeys(t *testing.T) {
	s := NewServer()
	defer s.Close()
	list, err := client(s).ListModels(context.Background())
	if err != nil || !slices.ContainsFunc(list.Models, func(m openai.Model) bool { return m.ID == "tts-1" }) {
		t.Fatalf("ListModels = %+v, %v; want tts-1 among them", list, err)
	}
	s.RequireKey("sk-right")
	_, err = client(s).ListModels(context.Background())
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Errorf("a wrong key: %v, want 401 invalid_api_key", err)
	}
	cfg := openai.DefaultConfig("sk-right")
	cfg.BaseURL = s.URL
	if _, err := openai.NewClientWithConfig(cfg).ListModels(context.Background()); err != nil {
		t.Errorf("the right key: %v", err)
	}
}

// Paced, a speech answer takes the base time plus the time per character
// of its input; each request says when it came; SetSpeechBytes makes
// answers at least that large.
func TestSpeechPaceAndSize(t *testing.T) {
	s := NewServer()
	defer s.Close()
	c := client(s)
	s.SetPace(40*time.Millisecond, 2*time.Millisecond)
	s.SetSpeechBytes(96 * 1000)
	start := time.Now()
	data, err := speak(t, c, "ten chars.", "mp3")
	if took := time.Since(start); err != nil || took < 60*time.Millisecond {
		t.Errorf("answered after %v (%v): want at least 40 ms + 10 x 2 ms", took, err)
	}
	if len(data) < 96*1000 {
		t.Errorf("%d bytes, want at least %d", len(data), 96*1000)
	}
	if r := s.Requests(); len(r) != 1 || r[0].At.Before(start) || r[0].At.After(time.Now()) {
		t.Errorf("requests %+v: want one, stamped when it came", r)
	}
}
