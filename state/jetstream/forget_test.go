package jetstream

import (
	"context"
	"slices"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state"
	"brainbot/state/jetstream/natstest"
)

// A forget done through one instance reaches the others (their warm CLIs
// and local copies go), and not the one that did it, which cleans up
// itself with what ForgetUser returned.
func TestForgetIsToldToTheOtherInstances(t *testing.T) {
	url := natstest.Start(t)
	noFile := func(bot, session string) string { return t.TempDir() + "/" + session }
	a, b := join(t, url, "a").Backend(noFile), join(t, url, "b").Backend(noFile)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	heardA, heardB := make(chan state.Forgotten, 1), make(chan state.Forgotten, 1)
	a.WatchForgets(ctx, func(f state.Forgotten) { heardA <- f })
	b.WatchForgets(ctx, func(f state.Forgotten) { heardB <- f })
	ann := message.Key{Bot: "alice", Chat: 7}
	if err := a.UseSession(ctx, ann, "s1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ForgetUser(ctx, "alice", 7); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-heardB:
		if f.User != 7 || f.Bot != "alice" || !slices.Equal(f.Conversations, []message.Key{ann}) || !slices.Equal(f.Sessions, []string{"s1"}) {
			t.Errorf("instance b heard %+v", f)
		}
	case <-ctx.Done():
		t.Fatal("instance b was not told of the forget")
	}
	// A second forget, done by b: a hears it, and it hears its own first
	// (subscriptions keep order) if it would hear its own at all.
	if _, err := b.ForgetUser(ctx, "alice", 8); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-heardA:
		if f.User != 8 {
			t.Errorf("instance a heard its own forget first: %+v", f)
		}
	case <-ctx.Done():
		t.Fatal("instance a was not told of b's forget")
	}
}
