package sqlite

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"brainbot/bot/telegram"
	"brainbot/message"
)

func openJournal(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), FileName), Retries(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func envelope(id int64) message.Envelope {
	return message.Envelope{Bot: "b", UpdateID: id, Key: message.Key{Bot: "b", Chat: 7}, Raw: []byte(`{"update_id":1}`),
		Me: message.Identity{ID: 1001, Username: "b_bot"}, Received: time.Now()}
}

// What an earlier process left is handed first, in order, as redelivered
// with its marks; then each append as it is stored, with the offset.
func TestConsumeHandsTheLeftoversFirst(t *testing.T) {
	ctx := context.Background()
	s := openJournal(t)
	for id := int64(1); id <= 2; id++ {
		if err := s.Append(ctx, "b@1001", envelope(id)); err != nil {
			t.Fatal(err)
		}
	}
	left, _ := s.Pending(ctx)
	if err := s.Attempt(ctx, left[1].ID, "text"); err != nil {
		t.Fatal(err)
	}
	handed := make(chan message.Delivery, 3)
	s.Consume(ctx, func(d message.Delivery) { handed <- d })
	if err := s.Append(ctx, "b@1001", envelope(3)); err != nil {
		t.Fatal(err)
	}
	got := []message.Delivery{<-handed, <-handed, <-handed}
	var ids []int64
	for _, d := range got {
		ids = append(ids, d.Envelope().UpdateID)
	}
	if !slices.Equal(ids, []int64{1, 2, 3}) {
		t.Fatalf("handed %v, want 1, 2, 3", ids)
	}
	if !got[0].Redelivered() || got[0].Attempts() != 0 || !got[1].Redelivered() || got[1].Attempts() != 1 || !got[1].Charged() ||
		got[2].Redelivered() || got[2].Envelope().Me.Username != "b_bot" {
		t.Errorf("marks: %+v %+v %+v", got[0], got[1], got[2])
	}
	if off, err := s.Offset(ctx, "b@1001"); off != 3 || err != nil {
		t.Errorf("offset %d, %v", off, err)
	}
	for _, d := range got {
		d.Done(true)
	}
	if p, _ := s.Pending(ctx); len(p) != 0 {
		t.Errorf("left after Done: %+v", p)
	}
}

// Append never calls the consumer back: it returns while the consumer's
// handle is still busy with an earlier delivery (the intake may append
// from inside its own work), and the consumer gets the next one after.
func TestAppendReturnsWhileHandleIsBusy(t *testing.T) {
	ctx := context.Background()
	s := openJournal(t)
	handed, release := make(chan message.Delivery), make(chan struct{})
	s.Consume(ctx, func(d message.Delivery) {
		handed <- d
		<-release
	})
	if err := s.Append(ctx, "b@1001", envelope(1)); err != nil {
		t.Fatal(err)
	}
	first := <-handed // handle now waits for release
	if err := s.Append(ctx, "b@1001", envelope(2)); err != nil {
		t.Fatal(err)
	}
	close(release)
	if second := <-handed; first.Envelope().UpdateID != 1 || second.Envelope().UpdateID != 2 {
		t.Fatalf("handed %d, then %d; want 1, then 2", first.Envelope().UpdateID, second.Envelope().UpdateID)
	}
}

// Appends from many goroutines, some before Consume starts and some while
// it does, are each handed over once, in the order they were stored
// (earlier entries as left by "an earlier process"), one at a time.
func TestConsumeKeepsTheOrderOfConcurrentAppends(t *testing.T) {
	const writers, each = 4, 25
	ctx := context.Background()
	s := openJournal(t)
	var appending sync.WaitGroup
	for w := range writers {
		appending.Add(1)
		go func() {
			defer appending.Done()
			for i := range each {
				env := envelope(int64(w*each + i + 1))
				env.Key.Chat = int64(w)
				if err := s.Append(ctx, fmt.Sprintf("b%d", w), env); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	handed := make(chan *delivery, writers*each)
	var busy atomic.Int32
	s.Consume(ctx, func(d message.Delivery) {
		if busy.Add(1) != 1 {
			t.Error("handle called while it was busy")
		}
		handed <- d.(*delivery)
		busy.Add(-1)
	})
	appending.Wait()
	var last int64
	next := map[int64]int64{} // per conversation, the update expected next
	for range writers * each {
		d := <-handed
		if d.id <= last {
			t.Fatalf("entry %d handed after entry %d", d.id, last)
		}
		last = d.id
		chat, update := d.env.Key.Chat, d.env.UpdateID
		if want := cmp.Or(next[chat], chat*each+1); update != want {
			t.Fatalf("conversation %d: update %d handed, want %d", chat, update, want)
		}
		next[chat] = update + 1
	}
}

// Once the consumer stopped, nothing more is handed over: an entry
// appended then stays in the journal for the next start.
func TestNothingIsHandedAfterTheConsumerStopped(t *testing.T) {
	s := openJournal(t)
	ctx, stop := context.WithCancel(context.Background())
	handed := make(chan message.Delivery, 1)
	s.Consume(ctx, func(d message.Delivery) { handed <- d })
	stop()
	if err := s.Append(context.Background(), "b@1001", envelope(1)); err != nil {
		t.Fatal(err)
	}
	s.Close() // the hand-over has ended when Close returns
	select {
	case d := <-handed:
		t.Fatalf("update %d handed after the consumer stopped", d.Envelope().UpdateID)
	default:
	}
	next, err := Open(context.Background(), s.db.path)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if p, _ := next.Pending(context.Background()); len(p) != 1 {
		t.Fatalf("%d entries pending at the next start, want the one appended", len(p))
	}
}

// An entry of schema 3 (the message as accepted, not the update) reads
// back, through telegram.Decode, as the message it was: every kind of
// file the entry could hold, a command, a group message with its sender.
func TestLegacyEntriesReadAsTheirMessage(t *testing.T) {
	me := message.Identity{ID: 1001, Username: "b_bot"}
	files := []message.Attachment{
		{Kind: message.Voice, FileID: "v", Size: 10, MIME: "audio/ogg", Seconds: 3},
		{Kind: message.Audio, FileID: "a", Size: 11, MIME: "audio/mpeg", Name: "song.mp3", Seconds: 4},
		{Kind: message.Image, FileID: "p", Size: 12, MIME: "image/jpeg"},
		{Kind: message.Image, What: "file", FileID: "d", Size: 13, MIME: "image/png", Name: "x.png"},
		{Kind: message.PDF, What: "file", FileID: "f", Size: 14, MIME: "application/pdf", Name: "x.pdf"},
		{Kind: message.Text, What: "file", FileID: "t", Size: 15, MIME: "text/plain", Name: "x.txt"},
		{Kind: message.Other, What: "file", FileID: "z", Size: 16, MIME: "application/zip", Name: "x.zip"},
		{Kind: message.Other, What: "video note"},
		{Kind: message.Other, What: "sticker"},
		{Kind: message.Image, FileID: "q", Size: 12, MIME: "image/jpeg", Album: "77"},
	}
	for _, f := range files {
		raw, err := legacyUpdate(Entry{Bot: "b", Chat: 7, User: 7, ChatType: "private", MessageID: 3, Text: "caption",
			Media: mustJSON(t, []message.Attachment{f})})
		if err != nil {
			t.Fatal(err)
		}
		u := telegram.Decode(message.Envelope{Bot: "b", Me: me, Raw: raw})
		if len(u.Media) != 1 || u.Media[0] != f || u.Text != "caption" || u.Album != f.Album {
			t.Errorf("%+v read back as %+v, text %q", f, u.Media, u.Text)
		}
	}
	raw, _ := legacyUpdate(Entry{Bot: "b", Chat: -100, User: -5, ChatType: "supergroup", Sender: "Ann Lee", MessageID: 4,
		Thread: 9, Text: "/reset@b_bot now"})
	u := telegram.Decode(message.Envelope{Bot: "b", Me: me, Raw: raw})
	if u.Command != "reset" || u.ForOtherBot || u.SenderName != "Ann Lee" || u.Sender != -5 || u.Key != (message.Key{Bot: "b", Chat: -100, Thread: 9}) ||
		u.MessageID != 4 || u.Kind != message.Written {
		t.Errorf("group command read back as %+v", u)
	}
}

func mustJSON(t *testing.T, files []message.Attachment) string {
	t.Helper()
	raw, err := json.Marshal(files)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// A delivery handed back while the consumer runs (the state it needed was
// unavailable for now) is handed out again, not left until the next
// start, and not counted against the daily limit again (its attempt is:
// the next is a retry); once the consumer stopped, it stays for the next
// start.
func TestAbandonHandsBackWhileRunning(t *testing.T) {
	s := openJournal(t)
	ctx, stop := context.WithCancel(context.Background())
	handed := make(chan message.Delivery, 4)
	s.Consume(ctx, func(d message.Delivery) { handed <- d })
	if err := s.Append(ctx, "b@1001", envelope(1)); err != nil {
		t.Fatal(err)
	}
	first := <-handed
	if err := first.MarkCharged(ctx, "text"); err != nil {
		t.Fatal(err)
	}
	if err := first.MarkAttempt(ctx, "text"); err != nil {
		t.Fatal(err)
	}
	first.Abandon()
	again := <-handed
	if again.Envelope().UpdateID != 1 || !again.Redelivered() || !again.Charged() || again.Attempts() != 1 {
		t.Fatalf("handed again: update %d, redelivered %v, charged %v, attempts %d; want 1, true, true, 1 (a retry)",
			again.Envelope().UpdateID, again.Redelivered(), again.Charged(), again.Attempts())
	}
	stop()
	again.Abandon()
	if p, _ := s.Pending(context.Background()); len(p) != 1 {
		t.Fatalf("%d entries pending after the stop, want the one handed back", len(p))
	}
	select {
	case d := <-handed:
		t.Fatalf("update %d handed out after the consumer stopped", d.Envelope().UpdateID)
	default:
	}
}

// consuming opens a journal whose hand-backs wait retry at first, and
// consumes it until the test ends: what it hands out comes on handed.
func consuming(t *testing.T, retry time.Duration) (*Store, chan message.Delivery) {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), FileName), Retries(retry, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	handed := make(chan message.Delivery, 4)
	s.Consume(ctx, func(d message.Delivery) { handed <- d })
	return s, handed
}

// Deliveries handed back come back in the order they went back, whatever
// their waits: a conversation's message handed back after its earlier
// one (the intake hands a message's waiting successors back with it)
// never overtakes it, though the earlier one, handed back before, waits
// longer.
func TestHandedBackInTheOrderTheyWentBack(t *testing.T) {
	s, handed := consuming(t, 50*time.Millisecond)
	ctx := context.Background()
	for id := range int64(2) {
		if err := s.Append(ctx, "b@1001", envelope(id+1)); err != nil {
			t.Fatal(err)
		}
	}
	first, second := <-handed, <-handed
	first.Abandon() // paused once already: its next wait is longer
	first = <-handed
	first.Abandon()
	second.Abandon()
	if a, b := <-handed, <-handed; a.Envelope().UpdateID != 1 || b.Envelope().UpdateID != 2 {
		t.Errorf("handed again: updates %d, %d; want 1, 2", a.Envelope().UpdateID, b.Envelope().UpdateID)
	}
}

// A message appended while an earlier one of its conversation waits to be
// handed out again waits behind it (another conversation's is handed out
// too, whenever).
func TestAppendedWaitsBehindItsConversationHandedBack(t *testing.T) {
	s, handed := consuming(t, 200*time.Millisecond)
	ctx := context.Background()
	if err := s.Append(ctx, "b@1001", envelope(1)); err != nil {
		t.Fatal(err)
	}
	(<-handed).Abandon()
	other := envelope(3)
	other.Key.Chat = 8
	for _, env := range []message.Envelope{envelope(2), other} {
		if err := s.Append(ctx, "b@1001", env); err != nil {
			t.Fatal(err)
		}
	}
	var got []int64
	for range 3 {
		got = append(got, (<-handed).Envelope().UpdateID)
	}
	if slices.Index(got, 1) > slices.Index(got, 2) || !slices.Contains(got, 3) {
		t.Errorf("handed out %v, want 1 before 2, and 3", got)
	}
}
