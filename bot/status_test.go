package bot

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// Status says of each bot whether it runs its brain file, an older
// version of it (the file now broken, with file:line), or not at all and
// why; how Telegram serves it; and what it did today against its caps.
func TestStatusSaysWhatEachBotDoes(t *testing.T) {
	h := newHarness(t, map[string]string{
		"alpha":   brainFile(tokenA, "limits:\n  daily_usd: 5\n  per_user_per_day: 20\n"),
		"broken":  "name: Broken\nsytem_prompt: Hi.\n",
		"notoken": "name: No token\nsystem_prompt: Hi.\ntelegram:\n  token_env: MISSING_TOKEN\n",
	}, nil)
	h.exchange(tokenA, 7, "one")
	h.exchange(tokenA, 7, "two")
	// Its usage is recorded once the reply is out.
	waitFor(t, func() bool { return status(t, h)["alpha"].Today.Requests == 2 })

	bots := status(t, h)
	alpha := bots["alpha"]
	if alpha.State != StateRunning || !alpha.OK || alpha.Telegram != TelegramPolling || alpha.Problem != "" ||
		alpha.File != filepath.Join(h.brains, "alpha.yaml") || alpha.LastAnswer.IsZero() || alpha.LastUpdate.IsZero() {
		t.Errorf("alpha = %+v, want running its file, polling", alpha)
	}
	if alpha.Today.USD < 0.019 || alpha.Caps.DailyUSD != 5 || alpha.Caps.PerUserPerDay != 20 {
		t.Errorf("alpha's day = %+v against %+v, want 0.02 USD against 5 USD and 20 a user", alpha.Today, alpha.Caps)
	}
	if b := bots["broken"]; b.State != StateNotStarted || b.OK || !strings.Contains(b.Problem, filepath.Join(h.brains, "broken.yaml")+":1: system_prompt: is required") {
		t.Errorf("broken = %+v, want not started, with its problems as file:line", b)
	}
	// A brain the admin has not given a token yet (as the package's
	// example brains come) waits for it: no failing bot.
	if b := bots["notoken"]; b.State != StateNoToken || b.OK || b.Failing() || !strings.Contains(b.Problem, "no token") || !strings.Contains(b.Problem, "MISSING_TOKEN") {
		t.Errorf("notoken = %+v, want waiting for its token, not failing", b)
	}
	if b := bots["broken"]; !b.Failing() {
		t.Errorf("broken = %+v, want failing", b)
	}

	// A broken edit: the last good version runs on, and says where.
	h.writeBrain("alpha", brainFile(tokenA, "tts:\n  speed: 9\n"))
	waitFor(t, func() bool { return status(t, h)["alpha"].State == StateOlder })
	if a := status(t, h)["alpha"]; a.OK || a.Telegram != TelegramPolling || !strings.Contains(a.Problem, filepath.Join(h.brains, "alpha.yaml")+":7: tts.speed") {
		t.Errorf("alpha after a broken edit = %+v, want the older version running, its problem at alpha.yaml:7", a)
	}

	// Telegram refuses the token: the bot does not run, and says so.
	h.srv.Unauthorize(tokenA)
	waitFor(t, func() bool { return status(t, h)["alpha"].Telegram == TelegramRejected })
	if a := status(t, h)["alpha"]; a.State != StateRejected || a.OK || !a.Failing() {
		t.Errorf("alpha with its token rejected = %+v, want not running, failing", a)
	}
}

// A bot whose token Telegram rejected keeps no spare CLI (no message can
// come for it), and has its spares again once Telegram takes the token.
func TestARejectedBotKeepsNoSpares(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, ""), "beta": brainFile(tokenB, "")}, func(c *Config) { c.Spares = 1 })
	h.exchange(tokenA, 7, "one")
	h.exchange(tokenB, 8, "one")
	waitFor(t, func() bool { s := h.claude.keptSets(); return s["alpha"].n == 1 && s["beta"].n == 1 })

	h.srv.Unauthorize(tokenA)
	waitFor(t, func() bool { _, kept := h.claude.keptSets()["alpha"]; return !kept })
	if _, kept := h.claude.keptSets()["beta"]; !kept {
		t.Error("beta lost its spares with alpha's token")
	}
	h.srv.ClearFailures(tokenA)
	h.exchange(tokenA, 7, "back")
	waitFor(t, func() bool { return h.claude.keptSets()["alpha"].n == 1 })
}

// A second brain with a running bot's token does not start, and says
// whose token it is.
func TestStatusNamesTheBrainHoldingTheToken(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	h.exchange(tokenA, 7, "one")
	h.writeBrain("copy", brainFile(tokenA, ""))
	waitFor(t, func() bool { _, ok := status(t, h)["copy"]; return ok })
	if c := status(t, h)["copy"]; c.State != StateNotStarted || !strings.Contains(c.Problem, filepath.Join(h.brains, "alpha.yaml")) {
		t.Errorf("copy = %+v, want not started, naming alpha's file", c)
	}
	if a := status(t, h)["alpha"]; !a.OK {
		t.Errorf("alpha = %+v, want it running on", a)
	}
}

// status is the Manager's status by bot name.
func status(t *testing.T, h *harness) map[string]BotStatus {
	t.Helper()
	bots, err := h.m.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]BotStatus{}
	for _, b := range bots {
		byName[b.ID] = b
	}
	return byName
}
