package bot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lastBotAsked is the brain the last Claude request was made for.
func (h *harness) lastBotAsked() string {
	reqs := h.claude.requests()
	if len(reqs) == 0 {
		return ""
	}
	return reqs[len(reqs)-1].BotID
}

// refusal waits for the error line refusing file and returns its error.
func (h *harness) refusal(file string) string {
	h.t.Helper()
	var refused string
	waitFor(h.t.(*testing.T), func() bool {
		for _, e := range h.logs.FilterMessage("brain file has problems; bot not started").All() {
			if e.ContextMap()["file"] == filepath.Join(h.brains, file) {
				refused = fmt.Sprint(e.ContextMap()["error"])
				return true
			}
		}
		return false
	})
	return refused
}

// A copy of a brain file that kept its token never takes the bot over:
// refused while the original runs, and after a restart too, although it
// is read first by name; the error names both files, the same each time.
// In a cluster, the cluster remembers.
func TestCopiedBrainNeverTakesTheBot(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { copiedBrainNeverTakesTheBot(t, m) })
	}
}

func copiedBrainNeverTakesTheBot(t *testing.T, m mode) {
	h := newHarnessWith(t, map[string]string{"original": brainFile(tokenA, "")}, nil, func(h *harness) { m.setup(t, h) })
	h.exchange(tokenA, 7, "hello")
	h.writeBrain("a-copy", brainFile(tokenA, ""))
	want := filepath.Join(h.brains, "a-copy.yaml") + ":5: telegram.token: the same token is already used by " +
		filepath.Join(h.brains, "original.yaml") + "; Telegram allows one bot per token"
	if got := h.refusal("a-copy.yaml"); got != want {
		t.Errorf("while running, the copy's error = %q, want %q", got, want)
	}
	for restart := range 2 {
		h.stop()
		h.start()
		if got := h.refusal("a-copy.yaml"); got != want {
			t.Errorf("restart %d: the copy's error = %q, want %q", restart+1, got, want)
		}
		h.exchange(tokenA, 7, "still you?")
		if bot := h.lastBotAsked(); bot != "original" {
			t.Fatalf("restart %d: answered by %q, want the original brain", restart+1, bot)
		}
	}
}

// Two brains naming one token through different sources: the one running
// keeps it, and the other starts once the first lets go of it.
func TestTokenOfARunningBotIsRefusedUntilReleased(t *testing.T) {
	h := newHarness(t, map[string]string{"original": brainFile(tokenA, "")}, func(c *Config) {
		c.LookupEnv = func(name string) (string, bool) { return tokenA, name == "COPY_TOKEN" }
	})
	h.exchange(tokenA, 7, "hello")
	h.writeBrain("copy", "name: Copy\ndescription: A copy.\nsystem_prompt: Be brief.\ntelegram:\n  token_env: COPY_TOKEN\n")
	want := filepath.Join(h.brains, "copy.yaml") + ":5: telegram.token_env: COPY_TOKEN holds the same token as the inline token of " +
		filepath.Join(h.brains, "original.yaml") + "; Telegram allows one bot per token"
	if got := h.refusal("copy.yaml"); got != want {
		t.Errorf("the copy's error = %q, want %q", got, want)
	}
	h.exchange(tokenA, 7, "still you?")
	if bot := h.lastBotAsked(); bot != "original" {
		t.Fatalf("answered by %q, want the original brain", bot)
	}
	if err := os.Remove(filepath.Join(h.brains, "original.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(h.logs.FilterMessage("telegram bot polling").All()) >= 2 })
	h.exchange(tokenA, 7, "who now?")
	if bot := h.lastBotAsked(); bot != "copy" {
		t.Fatalf("after the original left, answered by %q, want the copy", bot)
	}
	var refusals int
	for _, e := range h.logs.FilterMessage("brain file has problems; bot not started").All() {
		if strings.HasSuffix(fmt.Sprint(e.ContextMap()["file"]), "copy.yaml") {
			refusals++
		}
	}
	if refusals != 1 {
		t.Errorf("the copy refused in %d log lines, want 1", refusals)
	}
}
