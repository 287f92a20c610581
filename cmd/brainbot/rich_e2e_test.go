package main

import (
	"strings"
	"testing"

	"brainbot/cmd/internal/stack"
)

// A reply longer than one Telegram message goes, with the real CLI, as one
// rich message of the model's Markdown where the Bot API knows them, a
// short one as an ordinary message. (Where it does not, the stand-in's
// default, TestEndToEndStreaming sees the split messages.)
func TestEndToEndRichMessage(t *testing.T) { eachMode(t, testRichMessage) }

func testRichMessage(t *testing.T, env []string) {
	s := newStackWithPrepare(t, nil, env, func(s *stack.Stack) { s.Telegram.RichMessages(stack.Token("narrator")) })
	r := ask(t, s, "narrator", 961, "tell me a story #long")
	if methods := r.Methods(); len(methods) != 1 || methods[0] != "sendRichMessage" {
		t.Fatalf("long reply sent as %v, want one rich message", methods)
	}
	if md := r.Calls[0].Markdown(); !strings.HasPrefix(md, "Paragraph 1.") || len(md) < 5000 {
		t.Errorf("rich message holds %d characters %.40q, want the whole answer", len(md), md)
	}
	if short := ask(t, s, "narrator", 961, "hello"); strings.Join(short.Methods(), ",") != "sendMessage" {
		t.Errorf("short reply sent as %v, want an ordinary message", short.Methods())
	}
}
