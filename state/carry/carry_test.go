package carry_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state"
	"brainbot/state/carry"
	"brainbot/state/jetstream"
	"brainbot/state/jetstream/natstest"
	"brainbot/state/sqlite"
	"brainbot/state/statetest"
)

// files is a machine's CLI folder: where a session's transcript is.
type files string

func (f files) path(bot, session string) string {
	return filepath.Join(string(f), bot, session+".jsonl")
}

func (f files) write(t *testing.T, bot, session, text string) {
	t.Helper()
	p := f.path(bot, session)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (f files) read(t *testing.T, bot, session string) string {
	t.Helper()
	data, err := os.ReadFile(f.path(bot, session))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func connect(t *testing.T, url, instance string) *jetstream.Cluster {
	t.Helper()
	c, err := jetstream.Connect(context.Background(), jetstream.Config{URL: url, Instance: instance})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var (
	alice   = message.Key{Bot: "narrator", Chat: 7}
	bob     = message.Key{Bot: "narrator", Chat: 8}
	created = time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	used    = time.Date(2026, 11, 26, 18, 30, 0, 0, time.UTC)
)

func outcomes(t *testing.T, cfg carry.Config) map[message.Key]carry.Result {
	t.Helper()
	results, err := carry.Carry(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := map[message.Key]carry.Result{}
	for _, r := range results {
		out[r.Key] = r
	}
	return out
}

func wantSession(t *testing.T, s state.Sessions, k message.Key, id string) {
	t.Helper()
	got, ok, err := s.Session(context.Background(), k)
	if err != nil || !ok || got.ID != id || !got.Created.Equal(created) || !got.LastUsed.Equal(used) {
		t.Fatalf("session of %v: %+v, %v, %v; want %s created %v, last used %v", k, got, ok, err, id, created, used)
	}
}

// Going back: the cluster's conversations, their latest transcripts and
// /voice choices land in the SQLite file and this machine's CLI folder; a
// session whose transcript the cluster never stored fails, and says why;
// a second carry changes nothing.
func TestCarryFromAClusterIntoSQLite(t *testing.T) {
	ctx := context.Background()
	url := natstest.Start(t)
	there, here := files(t.TempDir()), files(t.TempDir())
	answered := connect(t, url, "i1").Backend(there.path)
	if err := answered.UseSession(ctx, alice, "s-alice", created); err != nil {
		t.Fatal(err)
	}
	if err := answered.UseSession(ctx, alice, "s-alice", used); err != nil {
		t.Fatal(err)
	}
	there.write(t, "narrator", "s-alice", "turn 1\nturn 2\n")
	if err := answered.Save(ctx, "narrator", "s-alice"); err != nil {
		t.Fatal(err)
	}
	if err := answered.SetVoice(ctx, "narrator", 7, true); err != nil {
		t.Fatal(err)
	}
	keepNotes(t, answered, "Has a cat named Miso", "Learns Portuguese")
	reminders := keepSchedule(t, answered)
	if err := answered.UseSession(ctx, bob, "s-bob", used); err != nil { // no transcript stored
		t.Fatal(err)
	}

	db := openSQLite(t)
	cfg := carry.Config{From: connect(t, url, "carry").Backend(here.path), To: db,
		ToTranscripts: func(func(string, string) string) state.Transcripts { return db },
		Local:         here.path, Scratch: t.TempDir()}
	got := outcomes(t, cfg)
	if got[alice].Outcome != carry.Carried || got[bob].Outcome != carry.Failed || got[bob].Err == nil {
		t.Fatalf("outcomes: %+v", got)
	}
	wantSession(t, db, alice, "s-alice")
	// Kept all the same: bob's next message finds no such session and
	// starts a new one with messages.expired, instead of a new one without
	// a word.
	if got, ok, err := db.Session(ctx, bob); err != nil || !ok || got.ID != "s-bob" {
		t.Errorf("bob's session: %+v, %v, %v", got, ok, err)
	}
	if text := here.read(t, "narrator", "s-alice"); text != "turn 1\nturn 2\n" {
		t.Errorf("transcript here: %q", text)
	}
	if on, set, err := db.Voice(ctx, "narrator", 7); err != nil || !set || !on {
		t.Errorf("alice's /voice choice: on %v, set %v, %v", on, set, err)
	}
	statetest.WantNotes(t, db, "narrator", 7, "Has a cat named Miso", "Learns Portuguese")
	wantSchedule(t, db, reminders)

	again := outcomes(t, cfg)
	if again[alice].Outcome != carry.Already || again[bob].Outcome != carry.Failed {
		t.Fatalf("second carry: %+v", again)
	}
	wantSession(t, db, alice, "s-alice")
	wantSchedule(t, db, reminders)
}

// Joining a cluster: the instance's conversations and transcripts are
// stored in the cluster, where any instance restores them; carried back
// and forth, a transcript continued in between follows the version the
// cluster kept instead of being refused as stale.
func TestCarryFromSQLiteIntoACluster(t *testing.T) {
	ctx := context.Background()
	url := natstest.Start(t)
	here, elsewhere := files(t.TempDir()), files(t.TempDir())
	db := openSQLite(t)
	for _, at := range []time.Time{created, used} {
		if err := db.UseSession(ctx, alice, "s-alice", at); err != nil {
			t.Fatal(err)
		}
	}
	here.write(t, "narrator", "s-alice", "turn 1\n")
	if err := db.SetVoice(ctx, "narrator", 7, false); err != nil {
		t.Fatal(err)
	}
	keepNotes(t, db, "Has a cat named Miso")
	reminders := keepSchedule(t, db)
	cluster := connect(t, url, "carry")
	cfg := carry.Config{From: db, To: cluster.Backend(here.path),
		ToTranscripts: func(p func(string, string) string) state.Transcripts { return cluster.Transcripts(p) },
		Local:         here.path, Scratch: t.TempDir()}
	if got := outcomes(t, cfg); got[alice].Outcome != carry.Carried {
		t.Fatalf("outcomes: %+v", got)
	}
	other := connect(t, url, "i2").Backend(elsewhere.path)
	wantSession(t, other, alice, "s-alice")
	if err := other.Restore(ctx, "narrator", "s-alice", func() {}); err != nil {
		t.Fatal(err)
	}
	if text := elsewhere.read(t, "narrator", "s-alice"); text != "turn 1\n" {
		t.Errorf("transcript restored elsewhere: %q", text)
	}
	if on, set, err := other.Voice(ctx, "narrator", 7); err != nil || !set || on {
		t.Errorf("alice's /voice choice: on %v, set %v, %v", on, set, err)
	}
	statetest.WantNotes(t, other, "narrator", 7, "Has a cat named Miso")
	wantSchedule(t, other, reminders)
	if got := outcomes(t, cfg); got[alice].Outcome != carry.Already {
		t.Fatalf("second carry: %+v", got)
	}

	// The instance answers once more on its own, and is carried again.
	later := used.Add(time.Hour)
	here.write(t, "narrator", "s-alice", "turn 1\nturn 2\n")
	if err := db.UseSession(ctx, alice, "s-alice", later); err != nil {
		t.Fatal(err)
	}
	keepNotes(t, db, "Learns Portuguese")
	if got := outcomes(t, cfg); got[alice].Outcome != carry.Carried || got[alice].Err != nil {
		t.Fatalf("carry after another turn: %+v", got)
	}
	// The new note follows; the one carried before is not doubled, nor
	// are the reminders and check-ins.
	statetest.WantNotes(t, other, "narrator", 7, "Has a cat named Miso", "Learns Portuguese")
	wantSchedule(t, other, reminders)
	if err := other.Restore(ctx, "narrator", "s-alice", func() {}); err != nil {
		t.Fatal(err)
	}
	if text := elsewhere.read(t, "narrator", "s-alice"); text != "turn 1\nturn 2\n" {
		t.Errorf("transcript restored elsewhere after the second carry: %q", text)
	}
}

// keepNotes keeps texts as alice's notes with the narrator (user 7).
func keepNotes(t *testing.T, m state.Memories, texts ...string) {
	t.Helper()
	for _, text := range texts {
		if _, err := m.AddNote(context.Background(), "narrator", 7, text, 0, used); err != nil {
			t.Fatal(err)
		}
	}
}

// schedule is what keepSchedule keeps of alice's (user 7) with the
// narrator: two reminders, one set in a group, and her contact.
type schedule interface {
	state.Reminders
	state.Contacts
}

var (
	group   = message.Key{Bot: "narrator", Chat: -1001234}
	checkIn = used.Add(-24 * time.Hour)
)

// keepSchedule keeps alice's reminders and contact and returns the
// reminders, the soonest first.
func keepSchedule(t *testing.T, s schedule) []state.Reminder {
	t.Helper()
	ctx := context.Background()
	var kept []state.Reminder
	for _, r := range []state.Reminder{
		{Key: group, User: 7, Text: "bring the slides", Due: used.Add(time.Hour), Created: used},
		{Key: alice, User: 7, Text: "call mom", Due: used.Add(48 * time.Hour), Created: used},
	} {
		r, err := s.AddReminder(ctx, r, 0)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, r)
	}
	for _, err := range []error{s.Wrote(ctx, "narrator", 7, used), s.SetTimeZone(ctx, "narrator", 7, "Europe/Lisbon"),
		s.CheckedIn(ctx, "narrator", 7, checkIn), s.DeclineCheckIns(ctx, "narrator", 7, true)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return kept
}

// wantSchedule checks that s keeps alice's reminders (by their chat,
// words and times, under ids of its own) and contact.
func wantSchedule(t *testing.T, s schedule, want []state.Reminder) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Reminders(ctx, "narrator", 7)
	if err != nil {
		t.Fatal(err)
	}
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		g, w := got[i], want[i]
		same = g.Key == w.Key && g.User == w.User && g.Text == w.Text && g.Due.Equal(w.Due) && g.Created.Equal(w.Created)
	}
	if !same {
		t.Errorf("reminders carried: %+v\nwant %+v", got, want)
	}
	c, ok, err := s.Contact(ctx, "narrator", 7)
	if err != nil || !ok || c.Zone != "Europe/Lisbon" || !c.Wrote.Equal(used) || !c.Declined || c.Blocked ||
		len(c.CheckIns) != 1 || !c.CheckIns[0].Equal(checkIn) {
		t.Errorf("contact carried: %+v, %v, %v", c, ok, err)
	}
}
