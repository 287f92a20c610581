package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"brainbot/message"
)

func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

var t0 = time.Date(2025, 3, 9, 22, 30, 0, 0, time.UTC)

func TestSessionsSurviveReopenAndKeepHistory(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	if _, ok, err := s.Session(ctx, message.Key{Bot: "bot", Chat: 1}); err != nil || ok {
		t.Fatalf("fresh store: ok=%v err=%v, want no session", ok, err)
	}
	if err := s.UseSession(ctx, message.Key{Bot: "bot", Chat: 1}, "s1", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.UseSession(ctx, message.Key{Bot: "bot", Chat: 1}, "s1", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	ended, err := s.ResetSession(ctx, message.Key{Bot: "bot", Chat: 1}, t0.Add(2*time.Minute))
	if err != nil || ended != "s1" {
		t.Fatalf("ResetSession = %q, %v; want s1", ended, err)
	}
	if _, ok, _ := s.Session(ctx, message.Key{Bot: "bot", Chat: 1}); ok {
		t.Fatal("session still current after reset")
	}
	if err := s.UseSession(ctx, message.Key{Bot: "bot", Chat: 1}, "s2", t0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// A lost session replaced without /reset is archived too.
	if err := s.UseSession(ctx, message.Key{Bot: "bot", Chat: 1}, "s3", t0.Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cur, ok, err := s.Session(ctx, message.Key{Bot: "bot", Chat: 1})
	if err != nil || !ok || cur.ID != "s3" || !cur.Created.Equal(t0.Add(4*time.Minute)) {
		t.Fatalf("after reopen: %+v ok=%v err=%v; want s3", cur, ok, err)
	}
	hist, err := s.SessionHistory(ctx, message.Key{Bot: "bot", Chat: 1})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range hist {
		ids = append(ids, h.ID)
	}
	if fmt.Sprint(ids) != "[s1 s2]" {
		t.Fatalf("history = %v, want [s1 s2]", ids)
	}
	if !hist[0].Created.Equal(t0) || !hist[0].Ended.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("history[0] times = %v..%v", hist[0].Created, hist[0].Ended)
	}
	if _, ok, _ := s.Session(ctx, message.Key{Bot: "other", Chat: 1}); ok {
		t.Error("session leaked to another bot")
	}
	if ended, err := s.ResetSession(ctx, message.Key{Bot: "bot", Chat: 99}, t0); err != nil || ended != "" {
		t.Errorf("reset without session = %q, %v", ended, err)
	}
}

func TestVoiceToggle(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	if _, set, err := s.Voice(ctx, "b", 7); err != nil || set {
		t.Fatalf("unset toggle: set=%v err=%v", set, err)
	}
	for _, want := range []bool{true, false} {
		if err := s.SetVoice(ctx, "b", 7, want); err != nil {
			t.Fatal(err)
		}
		on, set, err := s.Voice(ctx, "b", 7)
		if err != nil || !set || on != want {
			t.Fatalf("Voice = %v,%v,%v; want %v", on, set, err, want)
		}
	}
}

func TestDailyLimitResetsAtUTCMidnight(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	for i := range 2 {
		ok, reset, err := s.TakeDaily(ctx, "b", 1, 2, t0)
		if err != nil || !ok {
			t.Fatalf("message %d: ok=%v err=%v", i, ok, err)
		}
		if want := time.Date(2025, 3, 10, 0, 0, 0, 0, time.UTC); !reset.Equal(want) {
			t.Fatalf("reset = %v, want %v", reset, want)
		}
	}
	s.Close()
	s, err := Open(ctx, path) // a restart does not reset the count
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ok, _, _ := s.TakeDaily(ctx, "b", 1, 2, t0.Add(time.Minute)); ok {
		t.Fatal("third message allowed over a limit of 2")
	}
	if n, _ := s.DailyCount(ctx, "b", 1, t0); n != 2 {
		t.Fatalf("refused message counted: %d", n)
	}
	// Local midnight in another zone is not the reset: only UTC is.
	nextDay := time.Date(2025, 3, 10, 0, 0, 1, 0, time.UTC)
	if ok, _, _ := s.TakeDaily(ctx, "b", 1, 2, nextDay.In(time.FixedZone("west", -5*3600))); !ok {
		t.Fatal("limit not reset on the next UTC day")
	}
	if ok, _, _ := s.TakeDaily(ctx, "b", 2, 0, t0); !ok {
		t.Fatal("limit 0 must mean unlimited")
	}
}

func TestDailyLimitUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 20 {
		wg.Go(func() {
			ok, _, err := s.TakeDaily(ctx, "b", 1, 5, t0)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if allowed != 5 {
		t.Fatalf("allowed %d of 20 concurrent messages, limit 5", allowed)
	}
}

func TestJournal(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	e := Entry{Bot: "b", Chat: 10, User: 1, MessageID: 5, Text: "hi", Created: t0}
	id1, err := s.Journal(ctx, e, "b@1", 100)
	if err != nil {
		t.Fatal(err)
	}
	e.MessageID, e.Text, e.Media = 6, "second", `[{"kind":"photo","file_id":"p1"}]`
	id2, err := s.Journal(ctx, e, "b@1", 101)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Journal(ctx, Entry{Bot: "other", Text: "x", Created: t0}, "other@2", 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Attempt(ctx, id1, "speech"); err != nil {
		t.Fatal(err)
	}
	// An entry of an earlier update (a webhook's, say) never moves the
	// offset back.
	if _, err := s.Journal(ctx, Entry{Bot: "b", Text: "late", Created: t0}, "b@1", 50); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if off, _ := s.Offset(ctx, "b@1"); off != 101 {
		t.Fatalf("offset = %d, want 101", off)
	}
	got, err := pendingOf(ctx, s, "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].ID != id1 || got[1].ID != id2 || got[2].Text != "late" {
		t.Fatalf("pending = %+v", got)
	}
	if g := got[0]; g.Attempts != 1 || g.Mode != "speech" || g.Text != "hi" || g.Media != "" || g.Chat != 10 || g.User != 1 || g.MessageID != 5 || !g.Created.Equal(t0) {
		t.Fatalf("entry = %+v", g)
	}
	if g := got[1]; g.Media != `[{"kind":"photo","file_id":"p1"}]` {
		t.Fatalf("second entry's media = %q", g.Media)
	}
	if err := s.Done(ctx, id1); err != nil {
		t.Fatal(err)
	}
	if got, _ := pendingOf(ctx, s, "b"); len(got) != 2 || got[0].ID != id2 {
		t.Fatalf("after Done: %+v", got)
	}
}

// BenchmarkSessions10k stores 10,000 sessions and reports the heap in use
// afterwards (target: the whole bot process stays under 60 MB).
func BenchmarkSessions10k(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		s, _ := openTemp(b)
		b.StartTimer()
		for u := range int64(10_000) {
			if err := s.UseSession(ctx, message.Key{Bot: "bot", Chat: u}, fmt.Sprintf("session-%d", u), t0); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		b.ReportMetric(float64(m.HeapInuse)/(1<<20), "heap-MB")
		// SQLite's page cache lives outside the Go heap: report the
		// process's resident size as well.
		if rss, ok := residentMB(); ok {
			b.ReportMetric(rss, "rss-MB")
		}
		if _, ok, err := s.Session(ctx, message.Key{Bot: "bot", Chat: 9_999}); !ok || err != nil {
			b.Fatal("last session missing", err)
		}
		s.Close()
		b.StartTimer()
	}
}

func BenchmarkSessionLookup(b *testing.B) {
	ctx := context.Background()
	s, _ := openTemp(b)
	for u := range int64(10_000) {
		if err := s.UseSession(ctx, message.Key{Bot: "bot", Chat: u}, fmt.Sprintf("session-%d", u), t0); err != nil {
			b.Fatal(err)
		}
	}
	var u int64
	for b.Loop() {
		if _, _, err := s.Session(ctx, message.Key{Bot: "bot", Chat: u % 10_000}); err != nil {
			b.Fatal(err)
		}
		u++
	}
}

// residentMB reads VmRSS from /proc (Linux only).
func residentMB() (float64, bool) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(status) {
		var kb float64
		if _, err := fmt.Sscanf(string(line), "VmRSS: %f kB", &kb); err == nil {
			return kb / 1024, true
		}
	}
	return 0, false
}

// pendingOf is bot's part of the journal.
func pendingOf(ctx context.Context, s *Store, bot string) ([]Entry, error) {
	all, err := s.Pending(ctx)
	var out []Entry
	for _, e := range all {
		if e.Bot == bot {
			out = append(out, e)
		}
	}
	return out, err
}

// A journal entry keeps the update as received, its id and the bot's
// identity, and gives them back.
func TestJournalKeepsTheUpdate(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	raw := []byte(`{"update_id":9,"message":{"message_id":1,"text":"hi","future_field":{"x":1}}}`)
	if _, err := s.Journal(ctx, Entry{Bot: "b", Chat: 7, Update: raw, UpdateID: 9, MeID: 1001, MeUsername: "b_bot", Created: t0}, "b@1001", 9); err != nil {
		t.Fatal(err)
	}
	got, err := s.Pending(ctx)
	if err != nil || len(got) != 1 {
		t.Fatalf("pending = %+v, %v", got, err)
	}
	if g := got[0]; string(g.Update) != string(raw) || g.UpdateID != 9 || g.MeID != 1001 || g.MeUsername != "b_bot" || g.Chat != 7 {
		t.Errorf("entry = %+v", g)
	}
}

// The brain a Telegram bot belongs to is remembered, and changes only when
// another brain takes the bot.
func TestTelegramBotHolders(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	at := time.UnixMilli(1741559400000)
	for _, hold := range [][2]string{{"7000000001", "alpha"}, {"7000000002", "beta"}, {"7000000001", "alpha"}, {"7000000002", "gamma"}} {
		if err := s.HoldTelegramBot(ctx, hold[0], hold[1], at); err != nil {
			t.Fatal(err)
		}
	}
	holders, err := s.TelegramBotHolders(ctx)
	if err != nil || !maps.Equal(holders, map[string]string{"7000000001": "alpha", "7000000002": "gamma"}) {
		t.Errorf("holders = %v, %v", holders, err)
	}
}

// The conversations used since a time, most recent first, within a limit;
// a reset conversation has no current session to list.
func TestRecentSessions(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	use := func(c message.Key, id string, at time.Duration) {
		t.Helper()
		if err := s.UseSession(ctx, c, id, t0.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	use(message.Key{Bot: "a", Chat: 1}, "old", -time.Hour)
	use(message.Key{Bot: "a", Chat: 2}, "s2", time.Minute)
	use(message.Key{Bot: "b", Chat: -100, Thread: 7}, "s3", 3*time.Minute)
	use(message.Key{Bot: "a", Chat: 4}, "s4", 2*time.Minute)
	use(message.Key{Bot: "a", Chat: 5}, "reset", 4*time.Minute)
	if _, err := s.ResetSession(ctx, message.Key{Bot: "a", Chat: 5}, t0.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	recent, err := s.RecentSessions(ctx, t0, 2)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recent {
		got = append(got, fmt.Sprintf("%s %s %v", r.Conversation, r.ID, r.LastUsed.Sub(t0)))
	}
	if want := fmt.Sprint([]string{"b/-100/7 s3 3m0s", "a/4/0 s4 2m0s"}); fmt.Sprint(got) != want {
		t.Errorf("recent sessions %v, want %v", got, want)
	}
}

// The database and every file beside it (-wal, -shm, -answered) hold
// what users said: readable by the service's user alone, as backups are,
// whatever the umask.
func TestFilesAreTheOwnersAlone(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0))
	s, path := openTemp(t)
	if err := s.UseSession(context.Background(), message.Key{Bot: "bot", Chat: 1}, "s1", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.answered.keep(1); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(path + "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm", answeredSuffix} {
		if !slices.Contains(files, path+suffix) {
			t.Errorf("no %s: %v", FileName+suffix, files)
		}
	}
	for _, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want -rw-------", filepath.Base(f), info.Mode())
		}
	}
}
