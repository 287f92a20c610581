package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/mcptest"
	"github.com/mark3labs/mcp-go/server"
	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/mcp/audio"
	"brainbot/mcp/openaitest"
	"brainbot/toolspec"
)

const testKey = "sk-test-do-not-log-0123456789"

var fixedNow = time.UnixMilli(1761837902984)

type fixture struct {
	cfg  Config
	oa   *openaitest.Server
	logs *observer.ObservedLogs
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	oa := openaitest.NewServer()
	t.Cleanup(oa.Close)
	core, logs := observer.New(zap.DebugLevel)
	oc := openai.DefaultConfig(testKey)
	oc.BaseURL = oa.URL
	f := &fixture{
		cfg: Config{DataDir: t.TempDir(), OpenAI: oc, Timeout: 10 * time.Second, Log: zap.New(core),
			Now: func() time.Time { return fixedNow }},
		oa: oa, logs: logs,
	}
	t.Cleanup(func() { f.assertKeyNeverLogged(t) })
	return f
}

func (f *fixture) assertKeyNeverLogged(t *testing.T) {
	for _, e := range f.logs.All() {
		if strings.Contains(e.Message, testKey) {
			t.Errorf("log message contains the API key: %q", e.Message)
		}
		for k, v := range e.ContextMap() {
			if strings.Contains(toString(v), testKey) {
				t.Errorf("log field %s contains the API key", k)
			}
		}
	}
}

func toString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func startTool(t *testing.T, tool server.ServerTool) *client.Client {
	t.Helper()
	srv, err := mcptest.NewServer(t, tool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv.Client()
}

func call(t *testing.T, c *client.Client, name string, args map[string]any) *mcpgo.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard
	defer cancel()
	var req mcpgo.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	return res
}

func resultText(t *testing.T, res *mcpgo.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d contents", len(res.Content))
	}
	tc, ok := mcpgo.AsTextContent(res.Content[0])
	if !ok {
		t.Fatalf("result content is %T, not text", res.Content[0])
	}
	return tc.Text
}

// success decodes a successful result into v.
func success(t *testing.T, res *mcpgo.CallToolResult, v any) {
	t.Helper()
	text := resultText(t, res)
	if res.IsError {
		t.Fatalf("tool error: %s", text)
	}
	if err := json.Unmarshal([]byte(text), v); err != nil {
		t.Fatalf("result %q: %v", text, err)
	}
}

func failure(t *testing.T, res *mcpgo.CallToolResult) string {
	t.Helper()
	text := resultText(t, res)
	if !res.IsError {
		t.Fatalf("want a tool error, got %s", text)
	}
	return text
}

// assertInside checks that path is a file directly inside dir.
func assertInside(t *testing.T, dir, path string) {
	t.Helper()
	if filepath.Dir(path) != dir {
		t.Errorf("%s is not directly inside %s", path, dir)
	}
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("%s: %v", path, err)
	}
}

func TestTTSWritesRealAudio(t *testing.T) {
	for _, tt := range []struct {
		format, ext string
		duration    func([]byte) (time.Duration, error)
	}{
		{"mp3", ".mp3", audio.MP3Duration},
		{"opus", ".ogg", audio.OggOpusDuration},
	} {
		t.Run(tt.format, func(t *testing.T) {
			f := newFixture(t)
			c := startTool(t, ttsTool(f.cfg))
			text := "Hello there. This is a test of the voice reply."
			var res toolspec.SpeechResult
			success(t, call(t, c, "text_to_speech", map[string]any{
				"text": text, "voice": "nova", "speed": 1.25, "format": tt.format,
				"filename": "bot-narrator-user-42-1761837889351",
			}), &res)
			dir := filepath.Join(f.cfg.DataDir, "audio-output")
			want := filepath.Join(dir, "bot-narrator-user-42-1761837889351-1761837902984"+tt.ext)
			if res.AudioPath != want {
				t.Errorf("audio_path = %s, want %s", res.AudioPath, want)
			}
			assertInside(t, dir, res.AudioPath)
			data, err := os.ReadFile(res.AudioPath)
			if err != nil {
				t.Fatal(err)
			}
			d, err := tt.duration(data)
			if err != nil || d <= 0 {
				t.Errorf("file is not playable %s: %v, %v", tt.format, d, err)
			}
			if res.Bytes != len(data) || res.Characters != len(text) || res.Voice != "nova" || res.Format != tt.format || res.Base64 != "" {
				t.Errorf("result %+v does not describe the file (%d bytes)", res, len(data))
			}
			reqs := f.oa.Requests()
			if len(reqs) != 1 || reqs[0].Model != "tts-1" || reqs[0].Voice != "nova" || reqs[0].Speed != 1.25 || reqs[0].Format != tt.format || reqs[0].Input != text || !reqs[0].Authorized {
				t.Errorf("OpenAI saw %+v", reqs)
			}
		})
	}
}

func TestTTSIncludeBase64(t *testing.T) {
	f := newFixture(t)
	c := startTool(t, ttsTool(f.cfg))
	var res toolspec.SpeechResult
	success(t, call(t, c, "text_to_speech", map[string]any{"text": "Hi.", "include_base64": true}), &res)
	data, err := os.ReadFile(res.AudioPath)
	if err != nil {
		t.Fatal(err)
	}
	if res.Base64 == "" || toString(data) != toString([]byte(mustDecode(t, res.Base64))) {
		t.Error("audio_base64 does not hold the file")
	}
}

func mustDecode(t *testing.T, s string) []byte {
	var b []byte
	if err := json.Unmarshal([]byte(`"`+s+`"`), &b); err != nil {
		t.Fatal(err)
	}
	return b
}

// A text beyond the API limit is spoken whole, as one file.
func TestTTSLongTextBecomesOneFile(t *testing.T) {
	sentence := "This sentence is one of many in a long answer. "
	text := strings.Repeat(sentence, 250) // 12,000 characters
	for _, tt := range []struct {
		format   string
		duration func([]byte) (time.Duration, error)
	}{
		{"mp3", audio.MP3Duration},
		{"opus", audio.OggOpusDuration},
	} {
		t.Run(tt.format, func(t *testing.T) {
			f := newFixture(t)
			c := startTool(t, ttsTool(f.cfg))
			var res toolspec.SpeechResult
			success(t, call(t, c, "text_to_speech", map[string]any{"text": text, "format": tt.format}), &res)
			reqs := f.oa.Requests()
			if len(reqs) != 3 || res.Parts != 3 {
				t.Fatalf("%d requests, %d parts; want 3", len(reqs), res.Parts)
			}
			var spoken strings.Builder
			for _, r := range reqs {
				if len(r.Input) > MaxSpeechInput {
					t.Errorf("part of %d characters", len(r.Input))
				}
				if !strings.HasSuffix(r.Input, ".") {
					t.Errorf("part not cut at a sentence end: ...%q", r.Input[len(r.Input)-20:])
				}
				spoken.WriteString(r.Input + " ")
			}
			if spoken.String() != text {
				t.Error("the parts do not add up to the text")
			}
			data, err := os.ReadFile(res.AudioPath)
			if err != nil {
				t.Fatal(err)
			}
			d, err := tt.duration(data)
			if err != nil {
				t.Fatal(err)
			}
			// The stand-in speaks 60 ms per character: the whole text is
			// in the file, give or take frame rounding and pre-skip.
			want := time.Duration(len(strings.TrimSpace(text))) * 60 * time.Millisecond
			if d < want-time.Second || d > want+time.Second {
				t.Errorf("joined duration %v, want about %v", d, want)
			}
		})
	}
}

func TestTTSRejectsBadArguments(t *testing.T) {
	f := newFixture(t)
	c := startTool(t, ttsTool(f.cfg))
	for _, args := range []map[string]any{
		{},
		{"text": "   "},
		{"text": "hi", "speed": 5.0},
		{"text": "hi", "speed": 0.1},
		{"text": "hi", "format": "wav"},
		{"text": "hi", "voice": "darth"},
	} {
		msg := failure(t, call(t, c, "text_to_speech", args))
		if msg == "" {
			t.Errorf("%v: empty reason", args)
		}
	}
	if n := len(f.oa.Requests()); n != 0 {
		t.Errorf("%d OpenAI calls for invalid arguments", n)
	}
}

func TestHostileFilenamesStayInOutputFolder(t *testing.T) {
	f := newFixture(t)
	tts := startTool(t, ttsTool(f.cfg))
	img := startTool(t, imageTool(f.cfg))
	for _, name := range []string{"../../etc/passwd", "/tmp/x", "", strings.Repeat("A", 10<<10), "дом/../../ключ", "..\\..\\win"} {
		var sr toolspec.SpeechResult
		success(t, call(t, tts, "text_to_speech", map[string]any{"text": "Hi.", "filename": name}), &sr)
		assertInside(t, filepath.Join(f.cfg.DataDir, "audio-output"), sr.AudioPath)
		var ir toolspec.ImageResult
		success(t, call(t, img, "generate_image", map[string]any{"prompt": "a cat", "size": "256x256", "filename": name}), &ir)
		assertInside(t, filepath.Join(f.cfg.DataDir, "image-output"), ir.ImagePath)
		for _, p := range []string{sr.AudioPath, ir.ImagePath} {
			if base := filepath.Base(p); !regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}-1761837902984(-\d+)?\.(mp3|png)$`).MatchString(base) {
				t.Errorf("filename %.30q gave %s", name, base)
			}
		}
	}
}

func TestImageWritesRealPNG(t *testing.T) {
	for _, tt := range []struct {
		model, size string
		w, h        int
		revised     bool
	}{
		{"dall-e-2", "256x256", 256, 256, false},
		{"dall-e-3", "1792x1024", 1792, 1024, true},
		{"gpt-image-1", "1536x1024", 1536, 1024, false},
	} {
		t.Run(tt.model, func(t *testing.T) {
			f := newFixture(t)
			c := startTool(t, imageTool(f.cfg))
			var res toolspec.ImageResult
			success(t, call(t, c, "generate_image", map[string]any{
				"prompt": "a lighthouse at dusk", "model": tt.model, "size": tt.size, "filename": "bot-a-user-1-5",
			}), &res)
			dir := filepath.Join(f.cfg.DataDir, "image-output")
			if want := filepath.Join(dir, "bot-a-user-1-5-1761837902984.png"); res.ImagePath != want {
				t.Errorf("image_path %s, want %s", res.ImagePath, want)
			}
			assertInside(t, dir, res.ImagePath)
			data, err := os.ReadFile(res.ImagePath)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("not a PNG: %v", err)
			}
			if b := img.Bounds(); b.Dx() != tt.w || b.Dy() != tt.h {
				t.Errorf("image is %v, want %dx%d", b, tt.w, tt.h)
			}
			if res.Bytes != len(data) || (res.RevisedPrompt != "") != tt.revised {
				t.Errorf("result %+v", res)
			}
			reqs := f.oa.Requests()
			wantFormat := "b64_json"
			if tt.model == "gpt-image-1" {
				wantFormat = "" // gpt-image models reject response_format
			}
			if len(reqs) != 1 || reqs[0].Model != tt.model || reqs[0].Size != tt.size || reqs[0].ResponseFormat != wantFormat {
				t.Errorf("OpenAI saw %+v", reqs)
			}
		})
	}
}

func TestImageRejectsBadArguments(t *testing.T) {
	f := newFixture(t)
	c := startTool(t, imageTool(f.cfg))
	for _, args := range []map[string]any{
		{},
		{"prompt": ""},
		{"prompt": "x", "model": "dall-e-9"},
		{"prompt": "x", "model": "dall-e-2", "size": "1792x1024"},
		{"prompt": "x", "model": "dall-e-3", "size": "256x256"},
		{"prompt": "x", "model": "gpt-image-1", "size": "1792x1024"},
		{"prompt": "x", "model": "dall-e-3", "quality": "ultra"},
		{"prompt": "x", "model": "dall-e-3", "style": "cubist"},
	} {
		failure(t, call(t, c, "generate_image", args))
	}
	if n := len(f.oa.Requests()); n != 0 {
		t.Errorf("%d OpenAI calls for invalid arguments", n)
	}
	// Options another model lacks are dropped, not refused.
	var res toolspec.ImageResult
	success(t, call(t, c, "generate_image", map[string]any{"prompt": "x", "model": "dall-e-2", "size": "256x256", "style": "vivid", "quality": "hd"}), &res)
	if r := f.oa.Requests(); len(r) != 1 || r[0].Style != "" || r[0].Quality != "" {
		t.Errorf("OpenAI saw %+v", r)
	}
}

// Every OpenAI failure is a short tool error, and the server keeps serving.
func TestOpenAIFailures(t *testing.T) {
	tests := []struct {
		directive, want string
	}{
		{"#openai-401", "openai: 401 unauthorized"},
		{"#openai-429", "openai: 429 rate limited: Rate limit reached"},
		{"#openai-500", "openai: 500 server error"},
		{"#openai-policy", "openai: 400 content policy violation"},
	}
	f := newFixture(t)
	tts := startTool(t, ttsTool(f.cfg))
	img := startTool(t, imageTool(f.cfg))
	// Only the timeout case gets a short deadline: on a loaded machine an
	// ordinary call can take longer than any short one.
	slow := f.cfg
	slow.Timeout = 300 * time.Millisecond
	slowTTS, slowImg := startTool(t, ttsTool(slow)), startTool(t, imageTool(slow))
	const timedOut = "openai: timed out after 300ms"
	if msg := failure(t, call(t, slowTTS, "text_to_speech", map[string]any{"text": "Say this #openai-slow"})); !strings.HasPrefix(msg, timedOut) {
		t.Errorf("tts #openai-slow: %q, want prefix %q", msg, timedOut)
	}
	if msg := failure(t, call(t, slowImg, "generate_image", map[string]any{"prompt": "Draw #openai-slow"})); !strings.HasPrefix(msg, timedOut) {
		t.Errorf("image #openai-slow: %q, want prefix %q", msg, timedOut)
	}
	for _, tt := range tests {
		msg := failure(t, call(t, tts, "text_to_speech", map[string]any{"text": "Say this " + tt.directive}))
		if !strings.HasPrefix(msg, tt.want) || len(msg) > 300 {
			t.Errorf("tts %s: %q, want prefix %q", tt.directive, msg, tt.want)
		}
		msg = failure(t, call(t, img, "generate_image", map[string]any{"prompt": "Draw " + tt.directive}))
		if !strings.HasPrefix(msg, tt.want) {
			t.Errorf("image %s: %q, want prefix %q", tt.directive, msg, tt.want)
		}
	}
	if strings.Contains(toString(f.logs.All()), "Incorrect API key") {
		t.Error("a 401 message (which quotes the key) was logged")
	}
	// Still serving.
	var sr toolspec.SpeechResult
	success(t, call(t, tts, "text_to_speech", map[string]any{"text": "Back to normal."}), &sr)
	var ir toolspec.ImageResult
	success(t, call(t, img, "generate_image", map[string]any{"prompt": "fine", "size": "256x256"}), &ir)

	// Programmatic failures, and an error body that is not OpenAI's JSON.
	f.oa.FailNext(http.StatusTooManyRequests, "rate_limit_exceeded", "slow down")
	if msg := failure(t, call(t, tts, "text_to_speech", map[string]any{"text": "Hi."})); msg != "openai: 429 rate limited: slow down" {
		t.Errorf("FailNext: %q", msg)
	}
	if entries := f.logs.FilterMessage("speech failed").All(); len(entries) == 0 {
		t.Error("failures are not logged")
	}
}

func TestOpenAIErrorWithoutJSONBody(t *testing.T) {
	f := newFixture(t)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	t.Cleanup(bad.Close)
	f.cfg.OpenAI.BaseURL = bad.URL + "/v1"
	c := startTool(t, ttsTool(f.cfg))
	if msg := failure(t, call(t, c, "text_to_speech", map[string]any{"text": "Hi."})); msg != "openai: 502 server error" {
		t.Errorf("got %q", msg)
	}
}

// OpenAI may answer a URL instead of b64_json: it is downloaded, capped and
// checked.
func TestImageURLAnswers(t *testing.T) {
	f := newFixture(t)
	g := &imageGen{cfg: f.cfg.withDefaults(), client: openai.NewClientWithConfig(f.cfg.OpenAI)}
	ctx := context.Background()
	// No response_format: the stand-in answers a URL it serves itself.
	img, _, err := g.generate(ctx, openai.ImageRequest{Prompt: "a cat", Model: "dall-e-2", Size: "512x512", N: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(img))
	if err != nil || cfg.Width != 512 {
		t.Errorf("downloaded image: %+v, %v", cfg, err)
	}

	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/huge.png":
			w.Header().Set("Content-Type", "image/png")
			w.Write(bytes.Repeat([]byte{0}, MaxImageBytes+1))
		case "/page.png":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html></html>"))
		case "/fake.png":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte("GIF89a not a png"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(files.Close)
	for _, path := range []string{"/huge.png", "/page.png", "/missing.png"} {
		if _, err := g.download(ctx, files.URL+path); err == nil {
			t.Errorf("download %s succeeded", path)
		}
	}
	if _, err := g.download(ctx, "file:///etc/passwd"); err == nil {
		t.Error("download of a file: URL succeeded")
	}
	// An answer whose URL serves something that is not a PNG is refused.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"created": 1, "data": []any{map[string]string{"url": files.URL + "/fake.png"}}})
	}))
	t.Cleanup(api.Close)
	oc := f.cfg.OpenAI
	oc.BaseURL = api.URL + "/v1"
	fake := &imageGen{cfg: f.cfg.withDefaults(), client: openai.NewClientWithConfig(oc)}
	if _, _, err := fake.generate(ctx, openai.ImageRequest{Prompt: "a cat", Model: "dall-e-2", Size: "512x512", N: 1}); err == nil || !strings.Contains(err.Error(), "not a PNG") {
		t.Errorf("generate with a non-PNG download: %v, want a not-a-PNG error", err)
	}
}

func TestSplitText(t *testing.T) {
	long := func(s string, n int) string { return strings.Repeat(s, n) }
	tests := []struct {
		name  string
		text  string
		limit int
		parts int
	}{
		{"short", "One. Two.", 100, 1},
		{"sentences", "One one. Two two! Three three? Four.", 18, 2},
		{"giant sentence", long("word ", 30) + "end.", 22, 8},
		{"giant word", long("x", 50), 20, 3},
		{"unicode counts characters", long("ключ. ", 10), 12, 5},
		{"line breaks", "line one\nline two\nline three", 12, 3},
	}
	for _, tt := range tests {
		parts := splitText(tt.text, tt.limit)
		if len(parts) != tt.parts {
			t.Errorf("%s: %d parts %q, want %d", tt.name, len(parts), parts, tt.parts)
		}
		var joined strings.Builder
		for _, p := range parts {
			if n := len([]rune(p)); n > tt.limit || n == 0 {
				t.Errorf("%s: part of %d characters (limit %d)", tt.name, n, tt.limit)
			}
			joined.WriteString(p)
		}
		if strip(joined.String()) != strip(tt.text) {
			t.Errorf("%s: parts %q lose text", tt.name, parts)
		}
	}
}

func strip(s string) string { return strings.Join(strings.Fields(s), "") }

func FuzzSplitText(f *testing.F) {
	f.Add("Hello. World! How are you?", 10)
	f.Add(strings.Repeat("ab ", 100), 7)
	f.Fuzz(func(t *testing.T, text string, limit int) {
		if limit < 1 || limit > 5000 {
			return
		}
		var joined strings.Builder
		for _, p := range splitText(text, limit) {
			if len([]rune(p)) > limit {
				t.Fatalf("part over the limit")
			}
			joined.WriteString(p)
		}
		if strip(joined.String()) != strip(text) {
			t.Fatalf("text lost: %q", text)
		}
	})
}

// The parts of a long text are spoken at the same time: the CLI shows no
// sign of life while a tool runs, so one part after another could outlast
// the bot's inactivity limit. The stand-in's barrier lets no request
// through until all three are in flight, so sequential calls fail here.
func TestTTSPartsAreSpokenConcurrently(t *testing.T) {
	f := newFixture(t)
	c := startTool(t, ttsTool(f.cfg))
	f.oa.Barrier(3)
	text := strings.Repeat("Each part of this answer is spoken at once. ", 250)
	var res toolspec.SpeechResult
	success(t, call(t, c, "text_to_speech", map[string]any{"text": text}), &res)
	if res.Parts != 3 {
		t.Errorf("%d parts, want 3", res.Parts)
	}
}

// One failing part fails the whole call with that part's reason.
func TestTTSOnePartFailing(t *testing.T) {
	f := newFixture(t)
	c := startTool(t, ttsTool(f.cfg))
	text := strings.Repeat("A sentence. ", 400) + "The end #openai-500."
	msg := failure(t, call(t, c, "text_to_speech", map[string]any{"text": text}))
	if !strings.HasPrefix(msg, "openai: 500 server error") {
		t.Errorf("failure = %q", msg)
	}
}

// A long text whose last part OpenAI refuses: the parts before it were
// spoken (four at a time, so the fifth starts only once one is made), and
// Speak says how much, for the bill.
func TestSpeakerReportsWhatWasSpokenBeforeAFailure(t *testing.T) {
	f := newFixture(t)
	s := NewSpeaker(f.cfg)
	sentence := strings.Repeat("Cars out, trees in, and the streets are ours again. ", 4) // past one part's 160 characters
	text := strings.Repeat(sentence, 4) + "And the last part fails #openai-500."
	_, _, spoken, err := s.Speak(context.Background(), text, toolspec.SpeechSettings{})
	if err == nil {
		t.Fatal("a refused part gave no error")
	}
	var made int
	for _, r := range f.oa.Requests() {
		if !strings.Contains(r.Input, "#openai-500") {
			made += len(r.Input)
		}
	}
	if spoken == 0 || spoken > made {
		t.Errorf("spoken %d characters, want those of the parts made before the failure (at most %d, more than none)", spoken, made)
	}
}

func TestSpeakerSpeaksWithTheGivenSettings(t *testing.T) {
	f := newFixture(t)
	s := NewSpeaker(f.cfg)
	data, ext, spoken, err := s.Speak(context.Background(), "Cars out, trees in.", toolspec.SpeechSettings{Voice: "onyx", Format: "opus"})
	if err != nil {
		t.Fatal(err)
	}
	if spoken != len("Cars out, trees in.") {
		t.Errorf("spoken %d characters, want the text's %d", spoken, len("Cars out, trees in."))
	}
	if d, err := audio.OggOpusDuration(data); ext != ".ogg" || err != nil || d <= 0 {
		t.Errorf("ext %s, not playable Ogg Opus: %v %v", ext, d, err)
	}
	reqs := f.oa.Requests()
	if len(reqs) != 1 || reqs[0].Voice != "onyx" || reqs[0].Model != toolspec.DefaultSpeechModel || reqs[0].Speed != toolspec.DefaultSpeed || reqs[0].Input != "Cars out, trees in." {
		t.Errorf("OpenAI saw %+v", reqs)
	}
	f.oa.FailNext(500, "server_error", "boom")
	if _, _, _, err := s.Speak(context.Background(), "again", toolspec.SpeechSettings{}); err == nil {
		t.Error("a failed speech call gave no error")
	}
}
