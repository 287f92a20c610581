package terminal

import (
	"context"
	"strings"
	"testing"

	"brainbot/bot/conversation"
	"brainbot/message"
)

// A streamed answer is written as it grows, and the reply that replaces
// it adds only what the stream had not shown; a reply that does not go on
// from it starts a line of its own.
func TestStreamThenReply(t *testing.T) {
	var out strings.Builder
	s := New(&out, "Bot")
	o := s.Outbox(message.Key{}, false, 0, nil)
	st := o.Stream(context.Background())
	st.Update("Once upon")
	st.Update("Once upon a time")
	st.Finish()
	if err := o.Text(context.Background(), "Once upon a time, a lighthouse.", true); err != nil {
		t.Fatal(err)
	}
	st = s.Outbox(message.Key{}, false, 0, nil).Stream(context.Background())
	st.Update("Draft")
	st.Finish()
	s.Print("you: %s", "stop")
	want := "Bot: Once upon a time, a lighthouse.\nBot: Draft\nyou: stop\n"
	if out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
}

// A question's options are numbered; the number typed names the button,
// until the question is answered.
func TestChoiceByNumber(t *testing.T) {
	var out strings.Builder
	s := New(&out, "Bot")
	o := s.Outbox(message.Key{}, false, 0, nil)
	o.Attach(message.Keyboard{{{Text: "Paris", Data: "q.0"}}, {{Text: "Rome", Data: "q.1"}}})
	if err := o.Text(context.Background(), "Which city?", true); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "Bot: Which city?\n  1. Paris\n  2. Rome\n") {
		t.Errorf("wrote %q", out.String())
	}
	b, id, ok := s.Choice(2)
	if !ok || b.Data != "q.1" || id != o.Sent()[0] {
		t.Errorf("Choice(2) = %v, %d, %v; want Rome under message %d", b, id, ok, o.Sent()[0])
	}
	if _, _, ok := s.Choice(3); ok {
		t.Error("Choice(3) of two options chose one")
	}
	if err := o.Amend(context.Background(), id, "Which city?", "→ Rome"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s.Choice(1); ok {
		t.Error("an answered question's option was chosen again")
	}
}

// Another bot of the conversation (a panel's member) writes under its
// own name, and names the bot it replies to; its messages take ids of the
// conversation's.
func TestAnotherBotWritesUnderItsName(t *testing.T) {
	var out strings.Builder
	s := New(&out, "Bot")
	ctx := context.Background()
	main := s.Outbox(message.Key{}, true, 0, nil)
	if err := main.Text(ctx, "Hello", true); err != nil {
		t.Fatal(err)
	}
	o := s.As("Painter", 0)
	if err := o.Text(ctx, "Blue.", true); err != nil {
		t.Fatal(err)
	}
	for _, reply := range []conversation.Outbox{s.As("Painter", main.Sent()[0]), s.As("Bot", o.Sent()[0]), s.As("Bot", main.Sent()[0])} {
		if err := reply.Text(ctx, "Yes.", true); err != nil {
			t.Fatal(err)
		}
	}
	if want := "Bot: Hello\nPainter: Blue.\nPainter (to Bot): Yes.\nBot (to Painter): Yes.\nBot: Yes.\n"; out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
	if got := o.Sent(); len(got) != 1 || got[0] != 2 {
		t.Errorf("Painter's message has ids %v, want [2]", got)
	}
}
