package claude

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"brainbot/claude/claudetest"
	"brainbot/mcp/openaitest"
	"brainbot/mcp/toolstest"
	"brainbot/output"
	"brainbot/toolspec"
)

// TestIntegration runs the real Claude Code CLI through the driver against
// the scripted model, with our real MCP tool server (package mcp, over
// HTTP) talking to the OpenAI stand-in.
func TestIntegration(t *testing.T) {
	cli := claudetest.RequireCLI(t)

	t.Run("text and resume", func(t *testing.T) {
		h := newHarness(t, cli)
		req := h.request(Text, "hello")
		res, err := h.run(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "You said: hello (message 1)" || res.SessionID != req.SessionID {
			t.Fatalf("text %q session %q, want the scripted reply in session %s", res.Text, res.SessionID, req.SessionID)
		}

		next := h.request(Text, "and again")
		next.SessionID, next.Resume = res.SessionID, true
		res, err = h.run(next)
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "You said: and again (message 2)" {
			t.Fatalf("resumed reply %q does not continue the conversation", res.Text)
		}
	})

	// A message replayed after a restart that cut its first attempt short
	// (the CLI had it, its answer never reached the user) is asked again,
	// and the model sees it once.
	t.Run("a message sent again is in the session once", func(t *testing.T) {
		h := newHarness(t, cli)
		first := h.request(Text, "hello")
		first.MessageID = uuid.NewString()
		if _, err := h.run(first); err != nil {
			t.Fatal(err)
		}
		second := h.request(Text, "second")
		// A request id as brainbot makes it (bot/intake, requestID: a version 5 UUID).
		second.SessionID, second.Resume = first.SessionID, true
		second.MessageID = uuid.NewSHA1(uuid.NameSpaceURL, []byte("brainbot:alpha/7/1764000000000")).String()
		if _, err := h.run(second); err != nil {
			t.Fatal(err)
		}
		second.Retry = true
		res, err := h.run(second)
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "You said: second (message 2)" || res.SessionID != first.SessionID {
			t.Errorf("reply %q in session %s, want message 2 of session %s", res.Text, res.SessionID, first.SessionID)
		}
		reqs := h.model.Requests()
		if got := userTexts(reqs[len(reqs)-1:]); !slices.Equal(got, []string{"hello", "second"}) {
			t.Errorf("the model's history = %q, want each message once", got)
		}

		// The first message of a session, sent again: the session starts
		// anew under its name.
		first.Retry, first.Resume = true, true
		if res, err := h.run(first); err != nil || res.Text != "You said: hello (message 1)" || res.SessionID != first.SessionID {
			t.Fatalf("first message again = %+v, %v", res, err)
		}
	})

	t.Run("structured output", func(t *testing.T) {
		h := newHarness(t, cli)
		req := h.request(Text, "whose answer do you comment on?")
		req.JSONSchema = `{"type":"object","properties":{"target":{"type":"string","enum":["voice","painter"]},"comment":{"type":"string"}},"required":["target","comment"]}`
		res, err := h.run(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(res.Structured); got != `{"comment":"comment of voice","target":"voice"}` {
			t.Fatalf("structured output %s (text %q)", got, res.Text)
		}
		req = h.request(Speech, "say it")
		req.JSONSchema = `{"type":"object"}`
		if _, err := h.run(req); err == nil {
			t.Error("a speech request with a JSON schema was run")
		}
	})

	t.Run("speech", func(t *testing.T) {
		h := newHarness(t, cli)
		req := h.request(Speech, "say hello")
		req.Speech = toolspec.SpeechSettings{Voice: "nova", Speed: 1, Model: "tts-1", Format: "mp3"}
		res, err := h.run(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "You said: say hello (message 1)" {
			t.Errorf("turn-1 text %q", res.Text)
		}
		data := h.checkFile(res, "audio-output", ".mp3")
		// An MPEG audio frame starts with 11 set sync bits (after an
		// optional ID3 tag).
		if !bytes.HasPrefix(data, []byte("ID3")) && !(len(data) > 1 && data[0] == 0xFF && data[1]&0xE0 == 0xE0) {
			t.Errorf("%s is not MP3: % x", res.FilePath, data[:min(len(data), 8)])
		}
	})

	t.Run("image", func(t *testing.T) {
		h := newHarness(t, cli)
		req := h.request(Image, "draw a cat")
		req.Image = toolspec.ImageSettings{Model: "dall-e-2", Size: "256x256"}
		res, err := h.run(req)
		if err != nil {
			t.Fatal(err)
		}
		data := h.checkFile(res, "image-output", ".png")
		if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("%s is not PNG: % x", res.FilePath, data[:min(len(data), 8)])
		}
		var prompts []string
		for _, r := range h.openai.Requests() {
			prompts = append(prompts, r.Prompt)
		}
		if len(prompts) != 1 || !strings.Contains(prompts[0], "draw a cat") {
			t.Errorf("OpenAI got image prompts %q, want one from the user's request", prompts)
		}
	})

	t.Run("a photo, a PDF and a text file reach the model", func(t *testing.T) {
		h := newHarness(t, cli)
		img, err := openaitest.PNG("64x48")
		if err != nil {
			t.Fatal(err)
		}
		req := h.request(Text, "what are these?")
		req.Attachments = []Attachment{
			{MediaType: "image/png", Data: img},
			{MediaType: "application/pdf", Name: "paper.pdf", Data: []byte("%PDF-1.4\n%%EOF\n")},
			{MediaType: "text/plain", Name: "notes.md", Data: []byte("# Shopping\nmilk")},
		}
		res, err := h.run(req)
		if err != nil {
			t.Fatal(err)
		}
		want := `You said: what are these? (message 1) [I see: image image/png 64x48; document "paper.pdf" application/pdf 15 bytes; document "notes.md" text/plain: "# Shopping"]`
		if res.Text != want {
			t.Fatalf("reply %q\nwant  %q", res.Text, want)
		}
		// The session keeps them: a resume is the next message.
		next := h.request(Text, "and now?")
		next.SessionID, next.Resume = res.SessionID, true
		if res, err = h.run(next); err != nil || res.Text != "You said: and now? (message 2)" {
			t.Fatalf("resumed: %v, %+v", err, res)
		}
		// The CLI's copy of the photo went to the process's own temporary
		// folder, not the system's, and left with the process.
		// The CLI names its folder after the working folder, every
		// character but letters and digits made a "-".
		workDir := regexp.MustCompile(`[^a-zA-Z0-9]`).ReplaceAllString(filepath.Join(h.data, "claude", "bot-it"), "-")
		if copies, _ := filepath.Glob(filepath.Join(os.TempDir(), "claude-*", workDir)); len(copies) > 0 {
			t.Errorf("the CLI wrote to the system's temporary folder: %q", copies)
		}
		if left, err := os.ReadDir(filepath.Join(h.data, "claude", "tmp")); err != nil || len(left) > 0 {
			t.Errorf("per-process temporary folders left after the processes ended: %v %v", left, err)
		}
	})

	t.Run("a model calling the tool on its own in turn one", func(t *testing.T) {
		for _, tt := range []struct {
			mode   Mode
			prompt string
		}{{Speech, "tell me #owntool"}, {Image, "draw a boat #owntool"}} {
			h := newHarness(t, cli)
			req := h.request(tt.mode, tt.prompt)
			req.Speech = toolspec.SpeechSettings{Voice: "nova", Speed: 1, Model: "tts-1", Format: "mp3"}
			req.Image = toolspec.ImageSettings{Model: "dall-e-2", Size: "256x256"}
			// Two round trips a turn are enough, even with the refused
			// call in turn one.
			req.MaxTurns = 2
			res, err := h.run(req)
			if err != nil {
				t.Fatalf("%v: %v", tt.mode, err)
			}
			// Only turn 2's call reached OpenAI, with the brain's settings
			// although the model asked for costly ones both times.
			reqs := h.openai.Requests()
			switch {
			case len(reqs) != 1:
				t.Errorf("%v: OpenAI saw %d calls, want 1: %+v", tt.mode, len(reqs), reqs)
			case tt.mode == Speech && (reqs[0].Voice != "nova" || reqs[0].Model != "tts-1" || reqs[0].Speed != 1):
				t.Errorf("speech call %+v, want the brain's nova tts-1 at 1.0", reqs[0])
			case tt.mode == Image && (reqs[0].Model != "dall-e-2" || reqs[0].Size != "256x256" || reqs[0].Quality != ""):
				t.Errorf("image call %+v, want the brain's dall-e-2 256x256", reqs[0])
			}
			if !strings.HasPrefix(filepath.Base(res.FilePath), req.FilePrefix+"-") {
				t.Errorf("%v: file %s, want the request's prefix %s", tt.mode, res.FilePath, req.FilePrefix)
			}
		}
	})

	t.Run("a question with options", func(t *testing.T) {
		for _, mode := range []Mode{Text, Speech} {
			h := newHarness(t, cli)
			req := h.request(mode, `where to? #ask {"question":"Which city?","options":["Paris","Rome"]}`)
			req.Speech = toolspec.SpeechSettings{Voice: "nova", Speed: 1, Model: "tts-1", Format: "mp3"}
			req.Questions = true
			res, err := h.run(req)
			if err != nil {
				t.Fatalf("%v: %v", mode, err)
			}
			var asked []ToolCall
			for _, c := range res.ToolCalls {
				if c.Server == toolspec.QuestionServer && c.Tool == toolspec.QuestionToolName {
					asked = append(asked, c)
				}
			}
			if len(asked) != 1 || asked[0].Outcome != ToolOK || asked[0].TextBefore != claudetest.AskPreamble ||
				string(asked[0].Input) != `{"options":["Paris","Rome"],"question":"Which city?"}` {
				t.Fatalf("%v: question calls %+v, want one accepted, after %q", mode, asked, claudetest.AskPreamble)
			}
			// A question ends the request after turn one: no voice note.
			if res.FilePath != "" || len(h.openai.Requests()) != 0 || res.Turn2 != 0 {
				t.Errorf("%v: a question was followed by turn two (file %q, %d OpenAI calls)", mode, res.FilePath, len(h.openai.Requests()))
			}
		}
		// Without leave, the model is not offered the tool at all.
		h := newHarness(t, cli)
		if _, err := h.run(h.request(Text, "#ask")); err != nil {
			t.Fatal(err)
		}
		reqs := h.model.Requests()
		if slices.Contains(reqs[0].Tools, toolspec.QuestionTool) {
			t.Errorf("a request without Questions offered the model %v", reqs[0].Tools)
		}
	})

	t.Run("bounds", func(t *testing.T) {
		h := newHarness(t, cli)
		req := h.request(Speech, "say hello")
		req.Speech = toolspec.SpeechSettings{Voice: "nova", Speed: 1, Model: "tts-1", Format: "mp3"}
		req.MaxTurns = 1 // turn 2 needs the tool call and the answer to its result
		if _, err := h.run(req); !errors.Is(err, errMaxTurns) {
			t.Errorf("speech with --max-turns 1: %v, want errMaxTurns", err)
		}
		req = h.request(Text, "hello")
		req.MaxBudgetUSD = 0.000001 // less than any turn costs
		if _, err := h.run(req); !errors.Is(err, errMaxBudget) {
			t.Errorf("text over --max-budget-usd: %v, want errMaxBudget", err)
		}
	})

	t.Run("unknown session", func(t *testing.T) {
		h := newHarness(t, cli)
		req := h.request(Text, "hello")
		req.Resume = true
		_, err := h.run(req)
		if !errors.Is(err, ErrSessionNotFound) {
			t.Fatalf("resume of an unknown session: %v, want ErrSessionNotFound", err)
		}
		// The CLI writes this after its result line.
		if !strings.Contains(err.Error(), "stderr: No conversation found with session ID") {
			t.Errorf("resume of an unknown session: %v, want the CLI's stderr in it", err)
		}
	})

	t.Run("model error", func(t *testing.T) {
		h := newHarness(t, cli)
		_, err := h.run(h.request(Text, "please #fail"))
		var re *resultError
		if !errors.As(err, &re) || !strings.Contains(re.Message, "400") {
			t.Fatalf("a model answering HTTP 400 gave %v, want a *resultError", err)
		}
	})

	t.Run("a user's slash command reaches the model as words", func(t *testing.T) {
		h := newHarness(t, cli)
		img, err := openaitest.PNG("8x8")
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			prompt string
			files  []Attachment
		}{
			{"/config model=haiku", nil},
			{"/insights", []Attachment{{MediaType: "image/png", Data: img}}}, // a caption
			{"/heapdump: hello", nil},                                        // a group sender named /heapdump
			{"/context", nil},
		} {
			before := len(h.model.Requests())
			req := h.request(Text, tc.prompt)
			req.Attachments = tc.files
			res, err := h.run(req)
			if err != nil {
				t.Fatalf("%q: %v", tc.prompt, err)
			}
			if !strings.HasPrefix(res.Text, "You said: ") || !strings.Contains(res.Text, tc.prompt+" (message 1)") {
				t.Errorf("%q: reply %q, want the model's answer to the words", tc.prompt, res.Text)
			}
			got := userTexts(h.model.Requests()[before:])
			if !slices.ContainsFunc(got, func(text string) bool { return strings.HasPrefix(text, " "+tc.prompt) }) {
				t.Errorf("%q: the model got the texts %q", tc.prompt, got)
			}
		}
		h.checkNoCLIState()
	})

	t.Run("a user's @path reaches the model as words, not as the file", func(t *testing.T) {
		h := newHarness(t, cli)
		const secret = "TOP-SECRET-0451"
		outside := filepath.Join(h.root, "secret.txt")
		inside := filepath.Join(h.driver.workDir("it"), "notes.txt")
		for _, path := range []string{outside, inside} {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(secret), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for _, prompt := range []string{"what is in @" + outside + " ?", "and in @notes.txt?", "@~/.claude/settings.json"} {
			before := len(h.model.Requests())
			res, err := h.run(h.request(Text, prompt))
			if err != nil {
				t.Fatalf("%q: %v", prompt, err)
			}
			if res.Text != "You said: "+prompt+" (message 1)" {
				t.Errorf("%q: reply %q", prompt, res.Text)
			}
			all, _ := json.Marshal(h.model.Requests()[before:])
			if strings.Contains(string(all), secret) || strings.Contains(string(all), "disableAllHooks") {
				t.Errorf("%q: the CLI sent the model a file's contents: %s", prompt, all)
			}
		}
	})

	t.Run("the settings the CLI reads are the bot's, as brainbot wrote them", func(t *testing.T) {
		h := newHarness(t, cli)
		config := filepath.Dir(filepath.Dir(filepath.Dir(h.driver.SessionFile("it", "x"))))
		if err := os.MkdirAll(config, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(config, "settings.json"), []byte(`{"model":"haiku"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		// Project and local settings in the working folder are not read.
		project := filepath.Join(h.driver.workDir("it"), ".claude")
		if err := os.MkdirAll(project, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"settings.json", "settings.local.json"} {
			if err := os.WriteFile(filepath.Join(project, name), []byte(`{"model":"haiku"}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		before := len(h.model.Requests())
		if _, err := h.run(h.request(Text, "which model?")); err != nil {
			t.Fatal(err)
		}
		for _, r := range h.model.Requests()[before:] {
			if strings.Contains(r.Model, "haiku") {
				t.Errorf("the CLI used the model %s of a settings file brainbot did not write", r.Model)
			}
		}
		if got, _ := os.ReadFile(filepath.Join(config, "settings.json")); string(got) != botSettings {
			t.Errorf("settings %s, want ours", got)
		}
	})

	t.Run("no shell", func(t *testing.T) {
		h := newHarness(t, cli)
		target := filepath.Join(t.TempDir(), "pwned")
		res, err := h.run(h.request(Text, "#bash "+target))
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != claudetest.DoneReply {
			t.Errorf("reply %q, want %q after the refused Bash call", res.Text, claudetest.DoneReply)
		}
		if _, err := os.Stat(target); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the model's Bash command ran: stat %s: %v", target, err)
		}
	})

	t.Run("model hangs", func(t *testing.T) {
		h := newHarness(t, cli)
		req := h.request(Speech, "wait for it #hang")
		req.InactivityTimeout = 2 * time.Second
		_, err := h.run(req)
		if !errors.Is(err, errTimeout) {
			t.Fatalf("a model that never answers gave %v, want errTimeout", err)
		}
		// The harness checks the CLI is gone.
	})

	t.Run("path traversal", func(t *testing.T) {
		h := newHarness(t, cli)
		req := h.request(Image, "draw a dog #evilpath")
		req.Image = toolspec.ImageSettings{Model: "dall-e-2", Size: "256x256"}
		res, err := h.run(req)
		// Refusing the name or sanitising it are both fine; a file
		// outside the output folder is not.
		if err == nil {
			h.checkInside(res.FilePath, "image-output")
		}
		output := filepath.Join(h.data, "image-output")
		_ = filepath.WalkDir(h.root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), "evil") && !strings.HasPrefix(path, output+string(filepath.Separator)) {
				t.Errorf("a tool wrote %s outside %s", path, output)
			}
			return nil
		})
	})
}

// harness is one test's world: its own HOME, data folder, model and
// OpenAI stand-in, and a driver using them.
type harness struct {
	t      *testing.T
	root   string // holds home and data: searched for stray files
	home   string
	data   string
	model  *claudetest.Model
	openai *openaitest.Server
	driver *Driver
}

func newHarness(t *testing.T, cli string) *harness {
	return newWarmHarness(t, cli, WarmConfig{})
}

// newWarmHarness is newHarness with warm processes set by warm.
func newWarmHarness(t *testing.T, cli string, warm WarmConfig) *harness {
	root := t.TempDir()
	h := &harness{t: t, root: root, home: filepath.Join(root, "home"), data: filepath.Join(root, "data")}
	for _, dir := range []string{h.home, h.data} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.model = claudetest.NewModel()
	t.Cleanup(h.model.Close)
	log := zaptest.NewLogger(t)
	tools := toolstest.Start(t, h.data, log)
	h.openai = tools.OpenAI
	// Registered after the servers, so it runs before they close.
	t.Cleanup(h.checkNoProcessLeft)

	env := append(h.model.Env(), "HOME="+h.home)
	d, err := New(Config{Command: cli, DataDir: h.data, ToolsURL: tools.URL, Tickets: tools.Tickets, Env: env, Log: log, Warm: warm})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close) // before the process check
	h.driver = d
	return h
}

func (h *harness) request(mode Mode, prompt string) Request {
	return Request{
		Mode:         mode,
		Prompt:       prompt,
		SessionID:    uuid.NewString(),
		SystemPrompt: "You are an integration test bot.",
		BotID:        "it",
		FilePrefix:   output.Prefix("it", 42, time.Now()),
		// Hang guards only: a healthy request takes a few seconds.
		InactivityTimeout: time.Minute,
		MaxDuration:       3 * time.Minute,
	}
}

func (h *harness) run(req Request) (*Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	return h.driver.Run(ctx, req)
}

// checkFile checks the tool's file is in the output folder, named with the
// driver's prefix, and returns its contents.
func (h *harness) checkFile(res *Result, folder, ext string) []byte {
	h.t.Helper()
	if res.FileExt != ext || !strings.HasPrefix(filepath.Base(res.FilePath), res.FilePrefix) || filepath.Ext(res.FilePath) != ext {
		h.t.Errorf("file %q, prefix %q, extension %q: want <prefix>-<ms>%s", res.FilePath, res.FilePrefix, res.FileExt, ext)
	}
	return h.checkInside(res.FilePath, folder)
}

// userTexts are the user's own texts the model received in reqs.
func userTexts(reqs []claudetest.Request) []string {
	var texts []string
	for _, r := range reqs {
		for _, m := range r.Messages {
			for _, b := range m.Content {
				if m.Role == "user" && b.Type == "text" && !strings.HasPrefix(b.Text, "<system-reminder>") {
					texts = append(texts, b.Text)
				}
			}
		}
	}
	return texts
}

// checkNoCLIState fails the test if a CLI command left its traces: a
// settings file that is not brainbot's, a heap snapshot or an insights
// report.
func (h *harness) checkNoCLIState() {
	h.t.Helper()
	_ = filepath.WalkDir(h.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Name() == "settings.json" {
			if data, _ := os.ReadFile(path); string(data) != botSettings {
				h.t.Errorf("settings %s changed: %s", path, data)
			}
		}
		if strings.HasSuffix(d.Name(), ".heapsnapshot") || strings.Contains(path, "insights") {
			h.t.Errorf("a CLI command wrote %s", path)
		}
		return nil
	})
}

// checkInside checks path is a file inside the data folder's folder and
// returns its contents.
func (h *harness) checkInside(path, folder string) []byte {
	h.t.Helper()
	out := filepath.Join(h.data, folder)
	if rel, err := filepath.Rel(out, path); err != nil || !filepath.IsLocal(rel) {
		h.t.Errorf("file %s is not under %s", path, out)
	}
	data, err := os.ReadFile(path)
	if err != nil || len(data) < 8 {
		h.t.Fatalf("tool file: %d bytes, %v", len(data), err)
	}
	return data
}

// checkNoProcessLeft fails the test if any process started for it (they all
// have a HOME in its folder) is still alive shortly after the test.
func (h *harness) checkNoProcessLeft() {
	var left []claudetest.Process
	// Killed processes can take a moment to be reaped; poll as a hang guard.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left = claudetest.ProcessesUnder(h.root)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		h.t.Errorf("processes left behind: %+v", left)
	}
}

// The real CLI kept alive across a conversation's requests: they run in
// one process, the session goes on, a voice reply works there too, and an
// interrupt stops a running turn without ending the process.
func TestIntegrationWarm(t *testing.T) {
	cli := claudetest.RequireCLI(t)
	h := newWarmHarness(t, cli, WarmConfig{Max: 4})
	req := h.request(Text, "one")
	req.Conversation = "it/1"
	res, err := h.run(req)
	if err != nil {
		t.Fatal(err)
	}
	for i, prompt := range []string{"two", "three"} {
		next := req
		next.Prompt, next.SessionID, next.Resume = prompt, res.SessionID, true
		if res, err = h.run(next); err != nil {
			t.Fatal(err)
		}
		if want := "You said: " + prompt + " (message " + string(rune('2'+i)) + ")"; !res.Warm || res.Text != want {
			t.Fatalf("request %d: warm %v, %q; want %q in the warm process", i+2, res.Warm, res.Text, want)
		}
	}
	speech := req
	speech.Mode, speech.Prompt, speech.SessionID, speech.Resume = Speech, "say it", res.SessionID, true
	speech.Speech = toolspec.SpeechSettings{Voice: "nova", Speed: 1, Model: "tts-1", Format: "mp3"}
	if res, err = h.run(speech); err != nil || !res.Warm {
		t.Fatalf("voice reply in the warm process: warm %v, %v", res != nil && res.Warm, err)
	}
	h.checkFile(res, "audio-output", ".mp3")

	// A streamed reply: the text grows as the model writes it.
	var streamed []string
	long := req
	long.Prompt, long.SessionID, long.Resume = "tell me more #long", res.SessionID, true
	long.OnText = func(text string) { streamed = append(streamed, text) }
	if res, err = h.run(long); err != nil {
		t.Fatal(err)
	}
	if len(streamed) < 5 || streamed[len(streamed)-1] != res.Text {
		t.Errorf("streamed %d texts, last %q; want many, the last the reply %q", len(streamed), streamed[len(streamed)-1:], res.Text)
	}

	h.model.SetDelay(20 * time.Second)
	slow := req
	slow.Prompt, slow.SessionID, slow.Resume = "take your time", res.SessionID, true
	done := make(chan error, 1)
	go func() {
		_, err := h.run(slow)
		done <- err
	}()
	for deadline := time.Now().Add(time.Minute); len(h.model.Requests()) < 8; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow request never reached the model")
		}
	}
	if !h.driver.Interrupt("it/1") {
		t.Fatal("nothing to interrupt")
	}
	select {
	case err := <-done:
		t.Logf("interrupted request: %v", err)
		if !errors.Is(err, ErrInterrupted) {
			t.Errorf("interrupted request: %v, want ErrInterrupted", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the request did not end within 15 s of the interrupt")
	}
	h.model.SetDelay(0)
	after := req
	after.Prompt, after.SessionID, after.Resume = "still there?", res.SessionID, true
	if res, err = h.run(after); err != nil || !strings.HasPrefix(res.Text, "You said: still there?") {
		t.Fatalf("after the interrupt: %v, %v", res, err)
	}
	t.Logf("after the interrupt: warm %v, %q", res.Warm, res.Text)
}

// A session's transcript is where SessionFile says, and copying it to
// another machine's layout (another HOME, another data folder) lets the
// real CLI resume it there: what brainbot's cluster mode relies on.
func TestIntegrationSessionMovesWithItsFile(t *testing.T) {
	cli := claudetest.RequireCLI(t)
	h := newHarness(t, cli)
	req := h.request(Text, "remember me")
	res, err := h.run(req)
	if err != nil {
		t.Fatal(err)
	}
	from := h.driver.SessionFile("it", res.SessionID)
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatalf("no transcript where SessionFile says: %v", err)
	}

	// "Another machine": its own HOME and a data folder with characters
	// the CLI's folder naming replaces.
	other := filepath.Join(h.root, "other")
	home, dataDir := filepath.Join(other, "home"), filepath.Join(other, "da_ta.v1")
	for _, dir := range []string{home, dataDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := zaptest.NewLogger(t)
	tools := toolstest.Start(t, dataDir, log)
	d, err := New(Config{Command: cli, DataDir: dataDir, ToolsURL: tools.URL, Tickets: tools.Tickets,
		Env: append(h.model.Env(), "HOME="+home), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	to := d.SessionFile("it", res.SessionID)
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
	next := h.request(Text, "who am I?")
	next.SessionID, next.Resume = res.SessionID, true
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	got, err := d.Run(ctx, next)
	if err != nil {
		t.Fatalf("resume on the other machine: %v", err)
	}
	if got.Text != "You said: who am I? (message 2)" {
		t.Fatalf("resumed reply %q does not continue the conversation", got.Text)
	}
}

// An upgrade from a brainbot whose CLIs shared one HOME loses no
// conversation: the session the real CLI kept there is resumed from the
// bot's own config folder.
func TestIntegrationUpgradeKeepsSessions(t *testing.T) {
	cli := claudetest.RequireCLI(t)
	h := newHarness(t, cli)
	h.driver.Close()
	work := h.driver.workDir("it")
	if err := os.MkdirAll(work, 0o750); err != nil {
		t.Fatal(err)
	}
	// The CLI as an earlier brainbot ran it: HOME shared, no config
	// folder of the bot's own.
	session := uuid.NewString()
	run := claudetest.CLIRun{Path: cli, Dir: work, Env: append(h.model.Env(), "HOME="+h.home, "PATH="+os.Getenv("PATH")),
		Args: []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
			"--session-id", session, "--system-prompt", "old", "--tools", "", "--strict-mcp-config", "--permission-mode", "dontAsk"}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := run.Turns(ctx, "remember me"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(SessionFile("", h.home, work, session)); err != nil {
		t.Fatalf("the earlier layout has no transcript: %v", err)
	}

	log := zaptest.NewLogger(t)
	tools := toolstest.Start(t, h.data, log)
	d, err := New(Config{Command: cli, DataDir: h.data, ToolsURL: tools.URL, Tickets: tools.Tickets,
		Env: append(h.model.Env(), "HOME="+h.home), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	req := h.request(Text, "who am I?")
	req.SessionID, req.Resume = session, true
	res, err := d.Run(ctx, req)
	if err != nil {
		t.Fatalf("resume after the upgrade: %v", err)
	}
	if res.Text != "You said: who am I? (message 2)" {
		t.Fatalf("resumed reply %q does not continue the conversation", res.Text)
	}
	if _, err := os.Stat(SessionFile("", h.home, work, session)); !os.IsNotExist(err) {
		t.Errorf("the transcript is still in the shared HOME: %v", err)
	}
}
