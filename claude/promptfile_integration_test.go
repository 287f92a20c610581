package claude

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"brainbot/claude/claudetest"
	"brainbot/sysprompt"
)

// The brain's system prompt reaches the real CLI in a file only the
// service's user may read, never on its command line (which any local
// user reads in /proc): in a new session, on a resume in a new process,
// and edited, with the snapshot off. The file goes once no CLI uses it.
func TestIntegrationSystemPromptInAFile(t *testing.T) {
	cli := claudetest.RequireCLI(t)
	h := newWarmHarness(t, cli, WarmConfig{Max: 4})
	marker := "secret-" + uuid.NewString()
	req := h.request(Text, "one")
	req.Conversation, req.SystemPrompt = "it/prompt", "You are Verity. Keep "+marker+" to yourself."
	res, err := h.run(req)
	if err != nil {
		t.Fatal(err)
	}
	wantSystem(t, h, marker)
	// The warm process waits for the next message: what anyone sees of it.
	procs := claudetest.ProcessesUnder(h.root)
	if len(procs) == 0 {
		t.Fatal("no CLI process kept warm")
	}
	var file string
	for _, p := range procs {
		if strings.Contains(p.Cmdline, marker) || strings.Contains(p.Cmdline, "Verity") {
			t.Errorf("process %d shows the system prompt on its command line: %s", p.PID, p.Cmdline)
		}
		if f := p.Flag("--system-prompt-file"); f != "" {
			file = f
		}
	}
	wantPromptFile(t, file, sysprompt.ForProcess(req.SystemPrompt, req.PromptVars))

	// A resume in a new process, then with the brain's prompt edited.
	h.driver.End(req.Conversation)
	next := req
	next.Prompt, next.SessionID, next.Resume = "two", res.SessionID, true
	if res, err = h.run(next); err != nil || res.Text != "You said: two (message 2)" {
		t.Fatalf("resumed: %+v, %v", res, err)
	}
	wantSystem(t, h, marker)
	edited := next
	edited.Prompt, edited.SystemPrompt = "three", "You are Verity, edited."
	if res, err = h.run(edited); err != nil || res.Text != "You said: three (message 3)" {
		t.Fatalf("resumed with the prompt edited: %+v, %v", res, err)
	}
	if got := wantSystem(t, h, "You are Verity, edited."); strings.Contains(got, marker) {
		t.Errorf("the edited prompt came with the old one: %q", got)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the first prompt's file %s is still there once no CLI uses it: %v", file, err)
	}
	h.driver.End(req.Conversation)
	if left, _ := filepath.Glob(filepath.Join(h.data, "claude", "home", "bot-it", promptFilePattern)); len(left) > 0 {
		t.Errorf("prompt files left once every CLI ended: %v", left)
	}
}

// wantSystem checks the model's latest request had a system prompt
// holding want, and returns it.
func wantSystem(t *testing.T, h *harness, want string) string {
	t.Helper()
	reqs := h.model.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model got no request")
	}
	got := reqs[len(reqs)-1].System
	if !strings.Contains(got, want) {
		t.Errorf("the model's system prompt %q lacks %q", got, want)
	}
	return got
}

// wantPromptFile checks the CLI's --system-prompt-file: the service's
// user's alone, holding the process's prompt.
func wantPromptFile(t *testing.T, path, want string) {
	t.Helper()
	if path == "" {
		t.Fatal("no process was given --system-prompt-file")
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, info.Mode().Perm())
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != want {
		t.Errorf("%s holds %q (%v), want %q", path, got, err, want)
	}
}

const promptFilePattern = "system-prompt-*"
