package bot

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"brainbot/claude"
)

// processShape is what of a request a CLI process is started with, which
// a spare must match (claude's fingerprint), as comparable text.
func processShape(req claude.Request) string {
	data, _ := json.Marshal([]any{req.SystemPrompt, req.PromptVars["bot_name"], req.Model, req.BotID, req.MCPServers,
		req.AllowedTools, req.ToolTimeout, req.MaxTurns, req.JSONSchema})
	return string(data)
}

// Each running bot keeps spares of the very shape its conversations'
// requests have, and a panel member those of its turns (two plain, one
// with turn 2's schema); the requests let the driver name their session;
// an edited brain changes the shape; a removed bot's spares go.
func TestSparesFollowTheBots(t *testing.T) {
	panels := t.TempDir()
	if err := os.WriteFile(filepath.Join(panels, "duo.yaml"), []byte("members: [alpha, beta]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, map[string]string{
		"alpha": brainFile(tokenA, "claude:\n  model: sonnet\n  max_turns: 5\n"),
		"beta":  brainFile(tokenB, ""),
		"solo":  brainFile(tokenC, ""),
	}, func(c *Config) { c.PanelsDir, c.Spares = panels, 1 })
	want := map[string]int{"alpha": 1, "beta": 1, "solo": 1, "panel/alpha": 2, "panel/alpha/2": 1, "panel/beta": 2, "panel/beta/2": 1}
	waitFor(t, func() bool { return len(h.claude.keptSets()) == len(want) })
	kept := h.claude.keptSets()
	for set, n := range want {
		if kept[set].n != n {
			t.Errorf("set %s keeps %d, want %d (kept: %v)", set, kept[set].n, n, kept)
		}
	}

	h.exchange(tokenA, 7, "hello")
	req := h.claude.requests()[0]
	if req.SessionID != "" || req.Resume || processShape(req) != processShape(kept["alpha"].shape) {
		t.Errorf("a new conversation's request, session %q, shape %s; want no session and the spares' shape %s",
			req.SessionID, processShape(req), processShape(kept["alpha"].shape))
	}

	sendGroupCommand(h, -500, 40, "/panel is it?", tokenA, tokenB)
	h.waitLog("panel")
	for _, turn := range h.claude.requests()[1:] {
		set := "panel/" + turn.BotID
		if turn.JSONSchema != "" {
			set += "/2"
		}
		if turn.SessionID != "" || processShape(turn) != processShape(kept[set].shape) {
			t.Errorf("a panel turn of %s, session %q, shape %s; want no session and the shape of %s: %s",
				turn.BotID, turn.SessionID, processShape(turn), set, processShape(kept[set].shape))
		}
	}

	h.writeBrain("alpha", brainFile(tokenA, "claude:\n  model: opus\n"))
	waitFor(t, func() bool { return h.claude.keptSets()["alpha"].shape.Model == "opus" })
	if err := os.Remove(filepath.Join(h.brains, "beta.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		kept := h.claude.keptSets()
		_, bot := kept["beta"]
		_, plain := kept["panel/beta"]
		_, comment := kept["panel/beta/2"]
		return !bot && !plain && !comment
	})
	if kept := h.claude.keptSets(); kept["panel/alpha/2"].n != 1 || kept["solo"].n != 1 {
		t.Errorf("the other bots' spares changed: %v", kept)
	}
}
