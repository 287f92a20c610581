package jetstream

import (
	"context"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state/jetstream/natstest"
)

// A reminder come due is appended by the instance whose scheduler found
// it, which is killed while it holds it, before it marked the reminder
// done: the next instance's scheduler finds it due and appends it again.
// It is answered once, by the next instance, and appended once more
// after that it is not handed over again.
func TestScheduledMessageOnceWhenItsHolderIsKilled(t *testing.T) {
	url := natstest.Start(t)
	a, b := join(t, url, "a"), join(t, url, "b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := message.Key{Bot: "bot", Chat: 7}
	due := time.Now().UTC().Truncate(time.Millisecond)
	env := message.Envelope{Bot: "bot", Key: k, Received: due,
		Scheduled: &message.Scheduled{Kind: message.Reminder, ID: "12", User: 7, Text: "call mom", Due: due}}
	held := make(chan *Delivery, 1)
	a.Work(ctx, func(d *Delivery) { held <- d })
	if err := a.Append(ctx, "", env); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(hangGuard):
		t.Fatal("a was not handed the reminder")
	}
	a.nc.Close() // killed: its claim lapses with the ack wait

	got := make(chan *Delivery, 4)
	b.Work(ctx, func(d *Delivery) { got <- d })
	if err := b.Append(ctx, "", env); err != nil {
		t.Fatal(err)
	}
	next := func() message.Envelope {
		t.Helper()
		select {
		case d := <-got:
			d.Done(true)
			return d.Envelope()
		case <-time.After(hangGuard):
			t.Fatal("nothing handed to b")
			return message.Envelope{}
		}
	}
	if e := next(); e.Scheduled == nil || e.Scheduled.ID != "12" || e.Scheduled.Text != "call mom" || !e.Scheduled.Due.Equal(due) ||
		e.Key != k || e.Raw != nil {
		t.Fatalf("b was handed %+v (scheduled %+v), want the reminder", e, e.Scheduled)
	}
	if err := b.Append(ctx, "", env); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ctx, "bot@1", message.Envelope{Bot: "bot", UpdateID: 5, Key: k, Raw: update(5, 7, "thanks")}); err != nil {
		t.Fatal(err)
	}
	if e := next(); e.Scheduled != nil || e.UpdateID != 5 {
		t.Fatalf("b was handed %+v (scheduled %+v), want update 5: the reminder once", e, e.Scheduled)
	}
}

// A scheduled message appended again past the stream's duplicate window,
// once the first was answered (its answered mark is there, the stream
// has forgotten its id), is not handed over.
func TestScheduledMessageAnsweredIsNotHandedAgain(t *testing.T) {
	url := natstest.Start(t)
	a := join(t, url, "a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := message.Key{Bot: "bot", Chat: 7}
	env := message.Envelope{Bot: "bot", Key: k,
		Scheduled: &message.Scheduled{Kind: message.CheckIn, ID: "checkin-7-3", User: 7, Due: time.Now()}}
	if _, err := a.marks.answered.Put(ctx, markKey(env), []byte("a")); err != nil {
		t.Fatal(err)
	}
	got := make(chan *Delivery, 2)
	a.Work(ctx, func(d *Delivery) { got <- d })
	if err := a.Append(ctx, "", env); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, "bot@1", message.Envelope{Bot: "bot", UpdateID: 6, Key: k, Raw: update(6, 7, "hello")}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-got:
		d.Done(true)
		if e := d.Envelope(); e.Scheduled != nil || e.UpdateID != 6 {
			t.Fatalf("handed %+v (scheduled %+v), want update 6 alone", e, e.Scheduled)
		}
	case <-time.After(hangGuard):
		t.Fatal("nothing handed over")
	}
}
