package bot

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"brainbot/bot/telegramtest"
	"brainbot/claude"
)

// sendGroupCommand posts one message that every bot named receives.
func sendGroupCommand(h *harness, chat int64, messageID int, text string, tokens ...string) {
	cmd, _, _ := strings.Cut(text, " ")
	for _, token := range tokens {
		h.srv.SendMessage(token, map[string]any{
			"message_id": messageID, "date": time.Now().Unix(), "text": text,
			"chat":     map[string]any{"id": chat, "type": "supergroup", "title": "G"},
			"from":     map[string]any{"id": 9, "is_bot": false, "first_name": "Ann"},
			"entities": []map[string]any{{"type": "bot_command", "offset": 0, "length": len(cmd)}},
		})
	}
}

// A panel counts as one message per member against the daily limits, its
// turns stay within the Claude slots in processes and sessions of their
// own, and a member whose limit is used up stops the next panel.
func TestPanelLimitsAndSlots(t *testing.T) {
	panels := t.TempDir()
	if err := os.WriteFile(filepath.Join(panels, "duo.yaml"), []byte("members: [alpha, beta]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, map[string]string{
		"alpha": brainFile(tokenA, ""),
		"beta":  brainFile(tokenB, "limits:\n  per_user_per_day: 1\nmessages:\n  limit: Enough for today.\n"),
	}, func(c *Config) { c.PanelsDir, c.MaxClaude = panels, 1 })
	const group = -500
	sendGroupCommand(h, group, 40, "/panel is it?", tokenA, tokenB)
	h.waitLog("panel")
	for _, bot := range []string{"alpha", "beta"} {
		if n, err := h.store.DailyCount(context.Background(), bot, 9, time.Now()); n != 1 || err != nil {
			t.Errorf("%s counted %d messages for the panel (%v), want 1", bot, n, err)
		}
	}
	h.claude.mu.Lock()
	maxRun, calls := h.claude.maxRun, append([]claude.Request(nil), h.claude.calls...)
	h.claude.mu.Unlock()
	if maxRun != 1 {
		t.Errorf("%d Claude requests ran at once, want at most BRAINBOT_MAX_CLAUDE=1", maxRun)
	}
	for _, c := range calls {
		// A session of its own: the driver names it (a spare's).
		if c.Conversation != "" || c.Resume || c.SessionID != "" {
			t.Errorf("a panel turn in a shared conversation or session: %+v", c)
		}
	}
	before := len(h.srv.Sent(tokenA)) + len(h.srv.Sent(tokenB))
	sendGroupCommand(h, group, 41, "/panel and now?", tokenA, tokenB)
	var reply telegramtest.Call
	waitFor(t, func() bool {
		all := append(h.srv.Sent(tokenA, "sendMessage"), h.srv.Sent(tokenB, "sendMessage")...)
		for _, c := range all {
			if c.Param("text") == "Enough for today." {
				reply = c
				return true
			}
		}
		return false
	})
	if reply.ChatID() != group {
		t.Errorf("limit reply in chat %d", reply.ChatID())
	}
	time.Sleep(100 * time.Millisecond)
	if after := len(h.srv.Sent(tokenA)) + len(h.srv.Sent(tokenB)); after != before+1 {
		t.Errorf("%d calls after the refused panel, want only its reply", after-before)
	}
}

// panelsFolder is a folder of the panel files given (name → YAML).
func panelsFolder(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, y := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A member over its spending cap refuses the panel with
// messages.spending_cap, not the message limit's text.
func TestPanelSpendingCap(t *testing.T) {
	panels := panelsFolder(t, map[string]string{"duo.yaml": "members: [alpha, beta]\n"})
	h := newHarness(t, map[string]string{
		"alpha": brainFile(tokenA, ""),
		"beta": brainFile(tokenB, "limits:\n  daily_usd: 0.005\n  per_user_per_day: 5\n"+
			"messages:\n  limit: Enough for today.\n  spending_cap: Out of budget.\n"),
	}, func(c *Config) { c.PanelsDir = panels })
	const group = -502
	sendGroupCommand(h, group, 40, "/panel is it?", tokenA, tokenB)
	h.waitLog("panel") // beta's turns cost $0.01 each
	sendGroupCommand(h, group, 41, "/panel and now?", tokenA, tokenB)
	waitFor(t, func() bool {
		for _, c := range append(h.srv.Sent(tokenA, "sendMessage"), h.srv.Sent(tokenB, "sendMessage")...) {
			if c.Param("text") == "Out of budget." && c.ChatID() == group {
				return true
			}
		}
		return false
	})
}

// A member bot still connecting to Telegram when /panel arrives (it has
// just started, or is retrying) is waited for, not reported missing.
func TestPanelWaitsForAMemberStillConnecting(t *testing.T) {
	panels := t.TempDir()
	if err := os.WriteFile(filepath.Join(panels, "duo.yaml"), []byte("members: [alpha, beta]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, map[string]string{"alpha": brainFile(tokenA, ""), "beta": brainFile(tokenB, "")},
		func(c *Config) {
			c.PanelsDir, c.RetryMin, c.RetryMax = panels, 300*time.Millisecond, 300*time.Millisecond
		},
		func(h *harness) {
			// beta's first getMe fails: it connects a retry later.
			h.srv.Fail(tokenB, telegramtest.Rule{Method: "getMe", Times: 1,
				Err: telegramtest.APIError{Code: 502, Description: "Bad Gateway"}})
		})
	sendGroupCommand(h, -501, 50, "/panel is it?", tokenA)
	if line := h.waitLog("panel"); line.ContextMap()["answers"] != int64(2) {
		t.Errorf("panel line %v, want both members answering", line.ContextMap())
	}
	for _, c := range h.srv.Sent(tokenA, "sendMessage") {
		if strings.Contains(c.Param("text"), "missing") {
			t.Errorf("beta, still connecting, was reported missing: %q", c.Param("text"))
		}
	}
}
