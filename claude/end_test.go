package claude

import (
	"os"
	"strings"
	"testing"
	"time"

	"brainbot/claude/claudetest"
)

// A warm CLI that ends appends its ending to the session's transcript
// (the last prompt, with the leaf of the history it knew). End returns
// only once it exited, so a transcript restored after End (answered
// elsewhere meanwhile) is not given an old leaf to resume from: that lost
// a turn when a conversation moved between instances (issue 26).
func TestEndReturnsOnceTheCLIWroteItsEnding(t *testing.T) {
	cli := claudetest.RequireCLI(t)
	h := newWarmHarness(t, cli, WarmConfig{Max: 2, Idle: time.Minute})
	req := h.request(Text, "hello")
	req.Conversation = "c"
	res, err := h.run(req)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Warm && h.driver.Warm() != 1 {
		t.Fatalf("%d warm processes, want the conversation's", h.driver.Warm())
	}
	path := h.driver.SessionFile("it", res.SessionID)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h.driver.End("c")
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if ending := strings.TrimPrefix(string(after), string(before)); !strings.Contains(ending, `"type":"last-prompt"`) {
		t.Fatalf("after End the transcript has no ending of the CLI yet (appended %q): it may still land on a restored copy", ending)
	}
}
