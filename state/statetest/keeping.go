package statetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state"
)

// What the backends keep per conversation and user: sessions, /voice
// choices, daily counters, spending.

var (
	chat  = message.Key{Bot: "alice", Chat: 1001}
	topic = message.Key{Bot: "alice", Chat: -1002003004005, Thread: 7}
	guest = message.GuestKey("alice", -1002003004005, 42)
	other = message.Key{Bot: "bob", Chat: 1001}
)

var sessionTests = []behaviour{
	{"NoneThenUseThenReadBack", func(t *testing.T, s *subject) {
		if _, ok, err := s.Session(ctx(t), chat); err != nil || ok {
			t.Fatalf("Session of a new conversation = ok %v, %v; want none", ok, err)
		}
		t0 := base()
		must(t, s.UseSession(ctx(t), chat, "s1", t0))
		must(t, s.UseSession(ctx(t), chat, "s1", t0.Add(time.Minute)))
		wantSession(t, s, chat, state.Session{ID: "s1", Created: t0, LastUsed: t0.Add(time.Minute)})
		for _, k := range []message.Key{topic, guest, other} {
			if _, ok, err := s.Session(ctx(t), k); err != nil || ok {
				t.Errorf("Session(%v) = ok %v, %v; want none: another conversation's is not its", k, ok, err)
			}
		}
		s.restarted()
		wantSession(t, s, chat, state.Session{ID: "s1", Created: t0, LastUsed: t0.Add(time.Minute)})
	}},
	{"NewIDReplaces", func(t *testing.T, s *subject) {
		t0 := base()
		must(t, s.UseSession(ctx(t), topic, "s1", t0))
		must(t, s.UseSession(ctx(t), topic, "s2", t0.Add(time.Minute)))
		wantSession(t, s, topic, state.Session{ID: "s2", Created: t0.Add(time.Minute), LastUsed: t0.Add(time.Minute)})
	}},
	{"ResetReturnsEndedAndLeavesNone", func(t *testing.T, s *subject) {
		t0 := base()
		if ended, err := s.ResetSession(ctx(t), guest, t0); err != nil || ended != "" {
			t.Fatalf("ResetSession without a session = %q, %v; want \"\"", ended, err)
		}
		must(t, s.UseSession(ctx(t), guest, "s1", t0))
		must(t, s.UseSession(ctx(t), chat, "kept", t0))
		ended, err := s.ResetSession(ctx(t), guest, t0.Add(time.Minute))
		if err != nil || ended != "s1" {
			t.Fatalf("ResetSession = %q, %v; want s1", ended, err)
		}
		if _, ok, err := s.Session(ctx(t), guest); err != nil || ok {
			t.Errorf("Session after a reset = ok %v, %v; want none", ok, err)
		}
		wantSession(t, s, chat, state.Session{ID: "kept", Created: t0, LastUsed: t0})
		if ended, err := s.ResetSession(ctx(t), guest, t0.Add(2*time.Minute)); err != nil || ended != "" {
			t.Errorf("a second ResetSession = %q, %v; want \"\"", ended, err)
		}
	}},
	{"RecentSinceLimitOrder", func(t *testing.T, s *subject) {
		// A shared backend lists the conversations whose updates come to
		// this instance: those of the partitions it consumes. One
		// instance consuming consumes them all.
		stop := consume(t, s)
		defer stop()
		t0 := base()
		must(t, s.UseSession(ctx(t), chat, "old", t0.Add(-2*time.Hour)))
		must(t, s.UseSession(ctx(t), topic, "middle", t0.Add(-time.Minute)))
		must(t, s.UseSession(ctx(t), guest, "newest", t0))
		must(t, s.UseSession(ctx(t), other, "ended", t0))
		_, err := s.ResetSession(ctx(t), other, t0)
		must(t, err)
		got, err := s.RecentSessions(ctx(t), t0.Add(-time.Hour), 10)
		must(t, err)
		want := []state.RecentSession{
			{Conversation: guest, Session: state.Session{ID: "newest", Created: t0, LastUsed: t0}},
			{Conversation: topic, Session: state.Session{ID: "middle", Created: t0.Add(-time.Minute), LastUsed: t0.Add(-time.Minute)}},
		}
		if !sameRecent(got, want) {
			t.Errorf("RecentSessions(since an hour) = %+v\nwant %+v", got, want)
		}
		got, err = s.RecentSessions(ctx(t), t0.Add(-time.Hour), 1)
		must(t, err)
		if !sameRecent(got, want[:1]) {
			t.Errorf("RecentSessions(limit 1) = %+v\nwant %+v", got, want[:1])
		}
	}},
}

func wantSession(t *testing.T, s *subject, k message.Key, want state.Session) {
	t.Helper()
	got, ok, err := s.Session(ctx(t), k)
	switch {
	case err != nil:
		t.Fatal(err)
	case !ok:
		t.Fatalf("Session(%v): none, want %+v", k, want)
	case got.ID != want.ID || !got.Created.Equal(want.Created) || !got.LastUsed.Equal(want.LastUsed):
		t.Errorf("Session(%v) = %+v\nwant %+v", k, got, want)
	}
}

func sameRecent(got, want []state.RecentSession) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Conversation != w.Conversation || g.ID != w.ID || !g.Created.Equal(w.Created) || !g.LastUsed.Equal(w.LastUsed) {
			return false
		}
	}
	return true
}

var voiceTests = []behaviour{
	{"UnsetThenOnOffPerBotAndUser", func(t *testing.T, s *subject) {
		wantVoice(t, s, "alice", 7, false, false)
		must(t, s.SetVoice(ctx(t), "alice", 7, true))
		wantVoice(t, s, "alice", 7, true, true)
		wantVoice(t, s, "alice", 8, false, false)
		wantVoice(t, s, "bob", 7, false, false)
		must(t, s.SetVoice(ctx(t), "bob", 7, false))
		wantVoice(t, s, "bob", 7, false, true)
		must(t, s.SetVoice(ctx(t), "alice", 7, false))
		s.restarted()
		wantVoice(t, s, "alice", 7, false, true)
		wantVoice(t, s, "bob", 7, false, true)
	}},
}

func wantVoice(t *testing.T, s *subject, bot string, user int64, on, set bool) {
	t.Helper()
	gotOn, gotSet, err := s.Voice(ctx(t), bot, user)
	must(t, err)
	if gotOn != on || gotSet != set {
		t.Errorf("Voice(%s, %d) = on %v set %v; want on %v set %v", bot, user, gotOn, gotSet, on, set)
	}
}

var counterTests = []behaviour{
	{"TakeUpToLimit", func(t *testing.T, s *subject) {
		now := base()
		for i := range 2 {
			ok, resetAt, err := s.TakeDaily(ctx(t), "alice", 7, 2, now)
			must(t, err)
			if !ok || !resetAt.Equal(state.NextReset(now)) {
				t.Fatalf("TakeDaily %d of 2 = ok %v, reset %v; want ok, %v", i+1, ok, resetAt, state.NextReset(now))
			}
		}
		ok, resetAt, err := s.TakeDaily(ctx(t), "alice", 7, 2, now)
		must(t, err)
		if ok || !resetAt.Equal(state.NextReset(now)) {
			t.Errorf("TakeDaily past the limit = ok %v, reset %v; want refused until %v", ok, resetAt, state.NextReset(now))
		}
		wantCount(t, s, "alice", 7, now, 2) // a refusal counts nothing
		wantCount(t, s, "alice", 8, now, 0)
		wantCount(t, s, "bob", 7, now, 0)
		if ok, _, err := s.TakeDaily(ctx(t), "bob", 7, 2, now); err != nil || !ok {
			t.Errorf("TakeDaily of another bot = %v, %v; want ok: each bot counts apart", ok, err)
		}
		s.restarted()
		wantCount(t, s, "alice", 7, now, 2)
	}},
	{"NewUTCDayStartsAtZero", func(t *testing.T, s *subject) {
		now := base()
		must1(t, s, "alice", 7, 1, now)
		tomorrow := state.NextReset(now)
		wantCount(t, s, "alice", 7, tomorrow, 0)
		ok, resetAt, err := s.TakeDaily(ctx(t), "alice", 7, 1, tomorrow)
		must(t, err)
		if !ok || !resetAt.Equal(tomorrow.Add(24*time.Hour)) {
			t.Errorf("TakeDaily on the next UTC day = ok %v, reset %v; want ok, %v", ok, resetAt, tomorrow.Add(24*time.Hour))
		}
		wantCount(t, s, "alice", 7, tomorrow, 1)
		wantCount(t, s, "alice", 7, now, 1)
	}},
	{"NoLimitNeverRefusesAndCounts", func(t *testing.T, s *subject) {
		now := base()
		for range 3 {
			must1(t, s, "alice", 7, 0, now)
			must1(t, s, "alice", 8, -1, now)
		}
		wantCount(t, s, "alice", 7, now, 3)
		wantCount(t, s, "alice", 8, now, 3)
	}},
}

// must1 takes one of user's messages, which limit must let through.
func must1(t *testing.T, s *subject, bot string, user int64, limit int, now time.Time) {
	t.Helper()
	ok, _, err := s.TakeDaily(ctx(t), bot, user, limit, now)
	must(t, err)
	if !ok {
		t.Fatalf("TakeDaily(%s, %d, limit %d) refused", bot, user, limit)
	}
}

func wantCount(t *testing.T, s *subject, bot string, user int64, now time.Time, want int) {
	t.Helper()
	wantOfDay(t, "DailyCount", bot, user, now, want, s.DailyCount)
}

// wantOfDay checks what read says of user's messages to bot on now's
// day.
func wantOfDay[T comparable](t *testing.T, what, bot string, user int64, now time.Time, want T,
	read func(ctx context.Context, bot string, user int64, now time.Time) (T, error)) {
	t.Helper()
	got, err := read(ctx(t), bot, user, now)
	must(t, err)
	if got != want {
		t.Errorf("%s(%s, %d, %s) = %v, want %v", what, bot, user, now.Format(time.DateOnly), got, want)
	}
}

var spendingTests = []behaviour{
	{"SpentTodayBothProvidersTodayThatUser", func(t *testing.T, s *subject) {
		now := base()
		// Costs that are exact in binary: every backend sums them exactly.
		record(t, s, state.Usage{At: now, Bot: "alice", User: 7, Mode: "text", ClaudeUSD: 0.5, OpenAIUSD: 0.25})
		record(t, s, state.Usage{At: now, Bot: "alice", User: 7, Mode: "voice", OpenAIUSD: 0.125})
		record(t, s, state.Usage{At: now, Bot: "alice", User: 8, Mode: "text", ClaudeUSD: 2})
		record(t, s, state.Usage{At: now, Bot: "bob", User: 7, Mode: "text", ClaudeUSD: 4})
		record(t, s, state.Usage{At: now.Add(-24 * time.Hour), Bot: "alice", User: 7, Mode: "text", ClaudeUSD: 8})
		wantSpent(t, s, "alice", 7, now, 0.875)
		wantSpent(t, s, "alice", 8, now, 2)
		wantSpent(t, s, "alice", 9, now, 0)
		wantSpent(t, s, "bob", 7, now, 4)
		s.restarted()
		wantSpent(t, s, "alice", 7, now, 0.875)
	}},
	{"SpentTodayIsThatDayOnly", func(t *testing.T, s *subject) {
		now := base()
		record(t, s, state.Usage{At: now, Bot: "alice", User: 7, Mode: "text", ClaudeUSD: 1})
		wantSpent(t, s, "alice", 7, now.AddDate(0, 0, -1), 0)
		wantSpent(t, s, "alice", 7, now.AddDate(0, 0, 1), 0)
	}},
	{"SpentTodayOfUserZeroIsTheBots", func(t *testing.T, s *subject) {
		now := base()
		record(t, s, state.Usage{At: now, Bot: "alice", User: 7, Mode: "text", ClaudeUSD: 0.5})
		record(t, s, state.Usage{At: now, Bot: "alice", User: 8, Mode: "text", ClaudeUSD: 2, OpenAIUSD: 0.25})
		wantSpent(t, s, "alice", 0, now, 2.75)
	}},
	{"UsageReportPerBotUserModeFiltered", func(t *testing.T, s *subject) {
		now := base()
		a := state.Usage{At: now.Add(-time.Minute), Bot: "alice", User: 7, Mode: "text", Outcome: "ok", RequestID: "r1",
			InputTokens: 10, OutputTokens: 20, CacheReadTokens: 30, CacheWriteTokens: 40, ClaudeUSD: 0.5}
		b := state.Usage{At: now.Add(-time.Minute), Bot: "alice", User: 8, Mode: "text", Outcome: "error", RequestID: "r2",
			InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, ClaudeUSD: 0.25, OpenAIUSD: 0.125}
		c := state.Usage{At: now, Bot: "alice", User: 7, Mode: "voice", Outcome: "ok", RequestID: "r3", OpenAIUSD: 1}
		d := state.Usage{At: now, Bot: "bob", User: 7, Mode: "text", Outcome: "ok", RequestID: "r4", ClaudeUSD: 2}
		old := state.Usage{At: now.Add(-2 * time.Hour), Bot: "alice", User: 7, Mode: "text", Outcome: "ok", RequestID: "r0", ClaudeUSD: 8}
		for _, u := range []state.Usage{old, a, b, c, d} {
			record(t, s, u)
		}
		since := now.Add(-time.Hour)
		sum := func(us ...state.Usage) state.UsageLine {
			l := us[0].Line()
			for _, u := range us[1:] {
				l.Add(u.Line())
			}
			return l
		}
		perBot := func(l state.UsageLine) state.UsageLine { l.User = 0; return l }
		wantReport(t, s, state.UsageFilter{Since: since}, []state.UsageLine{perBot(sum(a, b)), perBot(c.Line()), perBot(d.Line())})
		wantReport(t, s, state.UsageFilter{Since: since, ByUser: true}, []state.UsageLine{a.Line(), c.Line(), b.Line(), d.Line()})
		wantReport(t, s, state.UsageFilter{Since: since, Bot: "bob"}, []state.UsageLine{perBot(d.Line())})
		wantReport(t, s, state.UsageFilter{Since: now.Add(-3 * time.Hour), Bot: "alice"},
			[]state.UsageLine{perBot(sum(old, a, b)), perBot(c.Line())})
		wantReport(t, s, state.UsageFilter{Since: since, Bot: "carol"}, nil)
	}},
}

func record(t *testing.T, s *subject, u state.Usage) {
	t.Helper()
	must(t, s.RecordUsage(ctx(t), u))
}

func wantSpent(t *testing.T, s *subject, bot string, user int64, now time.Time, want float64) {
	t.Helper()
	wantOfDay(t, "SpentToday", bot, user, now, want, s.SpentToday)
}

func wantReport(t *testing.T, s *subject, f state.UsageFilter, want []state.UsageLine) {
	t.Helper()
	got, err := s.UsageReport(ctx(t), f)
	must(t, err)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("UsageReport(%+v) =\n%+v\nwant\n%+v", f, got, want)
	}
}
