package jetstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state"
	"brainbot/state/jetstream/natstest"
)

func TestStateIsSharedAndCountsExactly(t *testing.T) {
	url := natstest.Start(t)
	ca, cb := join(t, url, "a"), join(t, url, "b")
	a, b := ca.State(), cb.State()
	ctx := context.Background()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	conv := message.Key{Bot: "bot", Chat: -100123, Thread: 7}

	if _, ok, err := b.Session(ctx, conv); err != nil || ok {
		t.Fatalf("session before any: ok=%v err=%v", ok, err)
	}
	if err := a.UseSession(ctx, conv, "s1", now); err != nil {
		t.Fatal(err)
	}
	if s, ok, err := b.Session(ctx, conv); err != nil || !ok || s.ID != "s1" {
		t.Fatalf("b sees %+v ok=%v err=%v", s, ok, err)
	}
	if ended, err := b.ResetSession(ctx, conv, now); err != nil || ended != "s1" {
		t.Fatalf("reset: %q %v", ended, err)
	}
	if _, ok, _ := a.Session(ctx, conv); ok {
		t.Fatal("session still there after reset")
	}

	if err := a.SetVoice(ctx, "bot", 5, true); err != nil {
		t.Fatal(err)
	}
	if on, set, err := b.Voice(ctx, "bot", 5); err != nil || !on || !set {
		t.Fatalf("voice on=%v set=%v err=%v", on, set, err)
	}

	// Two instances count one user's messages at once: exactly the limit passes.
	var passed atomic.Int32
	var wg sync.WaitGroup
	for i := range 40 {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			ok, _, err := st.TakeDaily(ctx, "bot", 9, 25, now)
			if err != nil {
				t.Error(err)
			}
			if ok {
				passed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := passed.Load(); n != 25 {
		t.Fatalf("%d messages passed a limit of 25", n)
	}

	for range 3 {
		if err := a.RecordUsage(ctx, state.Usage{At: now, Bot: "bot", User: 9, ClaudeUSD: 0.25, OpenAIUSD: 0.05}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.RecordUsage(ctx, state.Usage{At: now, Bot: "bot", User: 10, ClaudeUSD: 1}); err != nil {
		t.Fatal(err)
	}
	if usd, _ := b.SpentToday(ctx, "bot", 9, now); usd < 0.899 || usd > 0.901 {
		t.Errorf("user 9 spent %v, want 0.9", usd)
	}
	if usd, _ := a.SpentToday(ctx, "bot", 0, now); usd < 1.899 || usd > 1.901 {
		t.Errorf("bot spent %v, want 1.9", usd)
	}

	if err := ca.setOffset(ctx, "bot@123", 50); err != nil {
		t.Fatal(err)
	}
	if err := cb.setOffset(ctx, "bot@123", 40); err != nil { // a late poller never moves it back
		t.Fatal(err)
	}
	if off, err := cb.Offset(ctx, "bot@123"); err != nil || off != 50 {
		t.Fatalf("offset %d %v", off, err)
	}
}

// sessionAt keeps sessions under dir, a folder per bot, as the CLI does.
func sessionAt(dir string) func(bot, session string) string {
	return func(bot, session string) string { return filepath.Join(dir, bot, session+".jsonl") }
}

// writeSession writes text as session s1 of "bot" under dir.
func writeSession(t *testing.T, dir, text string) {
	t.Helper()
	p := sessionAt(dir)("bot", "s1")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTranscriptFollowsTheConversation(t *testing.T) {
	url := natstest.Start(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := join(t, url, "a").Transcripts(sessionAt(dirA)), join(t, url, "b").Transcripts(sessionAt(dirB))
	ctx := context.Background()
	read := func(dir string) string {
		got, _ := os.ReadFile(sessionAt(dir)("bot", "s1"))
		return string(got)
	}
	released := 0
	release := func() { released++ }
	if err := b.Restore(ctx, "bot", "s1", release); err != nil || released != 0 {
		t.Fatalf("restore of nothing: released %d, %v", released, err)
	}
	writeSession(t, dirA, "turn 1\n")
	if err := a.Save(ctx, "bot", "s1"); err != nil {
		t.Fatal(err)
	}
	writeSession(t, dirB, "a warm CLI's old copy\n")
	if err := b.Restore(ctx, "bot", "s1", release); err != nil || released != 1 {
		t.Fatalf("restore: released %d, %v", released, err)
	}
	if err := b.Restore(ctx, "bot", "s1", release); err != nil || released != 1 {
		t.Fatalf("second restore wrote again: released %d, %v", released, err)
	}
	if got := read(dirB); got != "turn 1\n" {
		t.Fatalf("b has %q", got)
	}
	// b goes on; back on a, the old local copy is replaced.
	writeSession(t, dirB, "turn 1\nturn 2\n")
	if err := b.Save(ctx, "bot", "s1"); err != nil {
		t.Fatal(err)
	}
	if err := a.Restore(ctx, "bot", "s1", release); err != nil || released != 2 {
		t.Fatalf("restore on a: released %d, %v", released, err)
	}
	if got := read(dirA); got != "turn 1\nturn 2\n" {
		t.Fatalf("a has %q", got)
	}
}

// An instance the conversation has left cannot store its older copy over
// the newer one: the version it was restored from is checked.
func TestAnOlderTranscriptNeverReplacesANewerOne(t *testing.T) {
	url := natstest.Start(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := join(t, url, "a").Transcripts(sessionAt(dirA)), join(t, url, "b").Transcripts(sessionAt(dirB))
	ctx := context.Background()
	writeSession(t, dirA, "turn 1\n")
	if err := a.Save(ctx, "bot", "s1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Restore(ctx, "bot", "s1", func() {}); err != nil {
		t.Fatal(err)
	}
	writeSession(t, dirB, "turn 1\nturn 2 (b)\n")
	if err := b.Save(ctx, "bot", "s1"); err != nil {
		t.Fatal(err)
	}
	// a, stalled, still answers on its copy of turn 1.
	writeSession(t, dirA, "turn 1\nturn 2 (a, late)\n")
	if err := a.Save(ctx, "bot", "s1"); !errors.Is(err, ErrStaleTranscript) {
		t.Fatalf("late save on an old copy: %v, want ErrStaleTranscript", err)
	}
	dirC := t.TempDir()
	c := join(t, url, "c").Transcripts(sessionAt(dirC))
	if err := c.Restore(ctx, "bot", "s1", func() {}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(sessionAt(dirC)("bot", "s1")); string(got) != "turn 1\nturn 2 (b)\n" {
		t.Fatalf("restored %q, want b's newer copy", got)
	}
}

func TestPanelRunsStartOnceAndOneAtATimePerChat(t *testing.T) {
	url := natstest.Start(t)
	a, b := join(t, url, "a").State(), join(t, url, "b").State()
	ctx := context.Background()
	now := time.Now()
	run := state.PanelRun{ID: "r1", Chat: -100, MessageID: 5, Run: []byte(`{}`), Created: now}
	if err := a.StartPanel(ctx, run); err != nil {
		t.Fatal(err)
	}
	// The same /panel message reached another member bot on b.
	if err := b.StartPanel(ctx, state.PanelRun{ID: "r1b", Chat: -100, MessageID: 5}); !errors.Is(err, state.ErrPanelStarted) {
		t.Fatalf("same message: %v, want ErrPanelStarted", err)
	}
	if err := b.StartPanel(ctx, state.PanelRun{ID: "r2", Chat: -100, MessageID: 6}); !errors.Is(err, state.ErrPanelBusy) {
		t.Fatalf("second run in the chat: %v, want ErrPanelBusy", err)
	}
	if err := a.SavePanel(ctx, "r1", []byte(`{"step":1}`), false, now); err != nil {
		t.Fatal(err)
	}
	if err := a.SavePanel(ctx, "r1", []byte(`{"step":2}`), true, now); err != nil {
		t.Fatal(err)
	}
	if err := b.StartPanel(ctx, state.PanelRun{ID: "r3", Chat: -100, MessageID: 7}); err != nil {
		t.Fatalf("after the run finished: %v", err)
	}
	if n, err := b.DailyCount(ctx, "bot", 1, now); err != nil || n != 0 {
		t.Fatalf("daily count %d %v", n, err)
	}
	if _, _, err := a.TakeDaily(ctx, "bot", 1, 0, now); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.DailyCount(ctx, "bot", 1, now); n != 1 {
		t.Fatalf("daily count %d, want 1", n)
	}
}

func TestUsageReportSumsTheSharedRecords(t *testing.T) {
	url := natstest.Start(t)
	a, b := join(t, url, "a").State(), join(t, url, "b").State()
	ctx := context.Background()
	now := time.Now()
	for _, u := range []state.Usage{
		{At: now.Add(-48 * time.Hour), Bot: "old", User: 1, Mode: "text", Outcome: "ok", ClaudeUSD: 9},
		{At: now, Bot: "alpha", User: 1, Mode: "text", Outcome: "ok", ClaudeUSD: 0.5, InputTokens: 10},
		{At: now, Bot: "alpha", User: 2, Mode: "text", Outcome: "error", ClaudeUSD: 0.25, InputTokens: 5},
		{At: now, Bot: "alpha", User: 2, Mode: "speech", Outcome: "ok", ClaudeUSD: 0.1, OpenAIUSD: 0.2},
		{At: now, Bot: "beta", User: 3, Mode: "text", Outcome: "ok", ClaudeUSD: 1},
	} {
		st := a
		if u.User == 2 {
			st = b
		}
		if err := st.RecordUsage(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	lines, err := UsageReport(ctx, url, state.UsageFilter{Since: now.Add(-24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	want := []state.UsageLine{
		{Bot: "alpha", Mode: "speech", Requests: 1, ClaudeUSD: 0.1, OpenAIUSD: 0.2},
		{Bot: "alpha", Mode: "text", Requests: 2, Errors: 1, InputTokens: 15, ClaudeUSD: 0.75},
		{Bot: "beta", Mode: "text", Requests: 1, ClaudeUSD: 1},
	}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Fatalf("report\n got %+v\nwant %+v", lines, want)
	}
	lines, err = UsageReport(ctx, url, state.UsageFilter{Since: now.Add(-24 * time.Hour), Bot: "alpha", ByUser: true})
	if err != nil || len(lines) != 3 || lines[0].User != 1 || lines[2].User != 2 || lines[2].Mode != "text" {
		t.Fatalf("alpha by user: %+v %v", lines, err)
	}
}

// Every instance knows which brain has each Telegram bot.
func TestTelegramBotHoldersAreShared(t *testing.T) {
	url := natstest.Start(t)
	a, b := join(t, url, "a").State(), join(t, url, "b").State()
	ctx := context.Background()
	if holders, err := b.TelegramBotHolders(ctx); err != nil || len(holders) != 0 {
		t.Fatalf("holders before any = %v, %v", holders, err)
	}
	for _, hold := range [][2]string{{"7000000001", "alpha"}, {"7000000002", "beta"}, {"7000000002", "gamma"}} {
		if err := a.HoldTelegramBot(ctx, hold[0], hold[1], time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	holders, err := b.TelegramBotHolders(ctx)
	if err != nil || !maps.Equal(holders, map[string]string{"7000000001": "alpha", "7000000002": "gamma"}) {
		t.Errorf("b sees holders %v, %v", holders, err)
	}
}

// A transcript an earlier release stored (under the session's name, with
// no version) is restored where there is no local copy, and the next
// save makes it the first version.
func TestATranscriptOfAnEarlierReleaseIsRestored(t *testing.T) {
	url := natstest.Start(t)
	a := join(t, url, "a")
	ctx := context.Background()
	if _, err := a.objects.PutBytes(ctx, "bot/s1", []byte("turn 1\n")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b := join(t, url, "b").Transcripts(sessionAt(dir))
	if err := b.Restore(ctx, "bot", "s1", func() {}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(sessionAt(dir)("bot", "s1")); string(got) != "turn 1\n" {
		t.Fatalf("restored %q, want the earlier release's copy", got)
	}
	writeSession(t, dir, "turn 1\nturn 2\n")
	if err := b.Save(ctx, "bot", "s1"); err != nil {
		t.Fatalf("first versioned save: %v", err)
	}
}

// The lock a restore of a session holds goes with its last restore: an
// instance that restores many sessions over its life keeps none of their
// locks (each was kept for good).
func TestRestoreLocksGoWithTheirLastRestore(t *testing.T) {
	url := natstest.Start(t)
	dir := t.TempDir()
	a := join(t, url, "a").Transcripts(sessionAt(dir))
	ctx := context.Background()
	writeSession(t, dir, "turn 1\n")
	if err := a.Save(ctx, "bot", "s1"); err != nil {
		t.Fatal(err)
	}
	var restores sync.WaitGroup
	for range 4 {
		restores.Go(func() {
			a.Forget("bot", "s1")
			if err := a.Restore(ctx, "bot", "s1", func() {}); err != nil {
				t.Error(err)
			}
		})
	}
	restores.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.restoring) != 0 {
		t.Errorf("%d restore locks kept after the restores, want none", len(a.restoring))
	}
}

// A panel run whose instance is gone is taken over by one live instance,
// once; a run whose instance lives is left to it.
func TestAPanelRunOfAGoneInstanceIsTakenOverOnce(t *testing.T) {
	url := natstest.Start(t)
	a, b, c := join(t, url, "a"), join(t, url, "b"), join(t, url, "c")
	ctx := context.Background()
	for _, in := range []*Cluster{a, b, c} {
		in.Work(ctx, func(d *Delivery) { d.Done(false) })
		t.Cleanup(in.Release)
	}
	run := state.PanelRun{ID: "r1", Chat: -100, MessageID: 5, Run: []byte(`{"turn":2}`), Created: time.Now()}
	if err := a.State().StartPanel(ctx, run); err != nil {
		t.Fatal(err)
	}
	if runs, err := b.State().RunningPanels(ctx); err != nil || len(runs) != 0 {
		t.Fatalf("while its instance lives: %+v %v, want none", runs, err)
	}
	a.Release() // gone from the membership
	var taken []state.PanelRun
	waitFor(t, hangGuard, "the run taken over", func() bool {
		runs, err := b.State().RunningPanels(ctx)
		taken = append(taken, runs...)
		return err == nil && len(taken) > 0
	})
	if len(taken) != 1 || taken[0].ID != "r1" || string(taken[0].Run) != `{"turn":2}` {
		t.Fatalf("taken over %+v, want r1 at the turn it saved", taken)
	}
	for _, in := range []*Cluster{b, c} {
		if runs, err := in.State().RunningPanels(ctx); err != nil || len(runs) != 0 {
			t.Errorf("%s takes %+v over again (%v)", in.Instance(), runs, err)
		}
	}
}
