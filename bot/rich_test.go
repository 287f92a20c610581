package bot

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"brainbot/metrics"
)

const table = "compare:\n| a | b |\n|---|---|\n| 1 | 2 |"

// A reply that needs it (a table, more than one message) goes as one rich
// message Telegram formats itself; a short plain one as today. Brains
// turn it off or always on; past 32,768 characters it is split as today.
func TestRichMessages(t *testing.T) {
	reg := metrics.New()
	h := newHarness(t, map[string]string{
		"alpha": brainFile(tokenA, ""),
		"beta":  brainFile(tokenB, "rich: always\n"),
		"gamma": brainFile(tokenC, "rich: off\n"),
	}, func(c *Config) { c.Metrics = reg })
	for _, token := range []string{tokenA, tokenB, tokenC} {
		h.srv.RichMessages(token)
	}
	if got := h.exchange(tokenA, 7, table); got.Method != "sendRichMessage" || got.Markdown() != "You said: "+table {
		t.Errorf("a table: %s %q, want it as one rich message of the Markdown", got.Method, got.Markdown())
	}
	if got := h.exchange(tokenA, 7, "hi"); got.Method != "sendMessage" {
		t.Errorf("a short plain reply went as %s", got.Method)
	}
	long := strings.Repeat("word ", 1000) // 5000 characters: more than one message
	if got := h.exchange(tokenA, 7, long); got.Method != "sendRichMessage" {
		t.Errorf("a long reply went as %s, want one rich message", got.Method)
	}
	huge := strings.Repeat("word ", 7000) // over 32,768
	h.srv.SendText(tokenA, 7, 7, huge)
	if sent := h.waitSent(tokenA, 3+9); sent[3].Method != "sendMessage" || sent[11].Method != "sendMessage" {
		t.Errorf("a reply over 32,768 characters: %s", describeCalls(sent[3:]))
	}
	if got := h.exchange(tokenB, 7, "hi"); got.Method != "sendRichMessage" {
		t.Errorf("rich: always sent %s", got.Method)
	}
	if got := h.exchange(tokenC, 7, table); got.Method != "sendMessage" || got.Param("parse_mode") != "HTML" {
		t.Errorf("rich: off sent %s", got.Method)
	}
	if n := testutil.ToFloat64(reg.RichMessages.WithLabelValues("sent")); n != 3 {
		t.Errorf("rich messages sent: %g, want 3", n)
	}
}

// A Bot API server that does not know rich messages (404): the reply goes
// as today's split HTML with nothing lost, and the bot does not try again.
func TestRichMessagesUnknownToTheServer(t *testing.T) {
	reg := metrics.New()
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, func(c *Config) { c.Metrics = reg })
	for i := range 2 {
		if got := h.exchange(tokenA, 7, table); got.Method != "sendMessage" || !strings.Contains(got.Param("text"), "| 1 | 2 |") {
			t.Fatalf("reply %d: %s %q, want the whole text as a message", i, got.Method, got.Param("text"))
		}
	}
	if tried := callsOf(h, tokenA, "sendRichMessage"); tried != 1 {
		t.Errorf("sendRichMessage tried %d times, want once: the bot remembers", tried)
	}
	if n := testutil.ToFloat64(reg.RichMessages.WithLabelValues("unknown_method")); n != 1 {
		t.Errorf("unknown_method counted %g, want 1", n)
	}
	h.waitLog("the Bot API server does not know rich messages: this bot sends split HTML from now on")
}

// callsOf counts token's calls of method, failed ones too.
func callsOf(h *harness, token, method string) int {
	n := 0
	for _, c := range h.srv.Calls(token) {
		if c.Method == method {
			n++
		}
	}
	return n
}

// A reply that goes rich streams as rich drafts in a private chat (with
// the stop button); a server that does not know them gets plain drafts
// and split HTML, each tried once.
func TestRichDrafts(t *testing.T) {
	for _, known := range []bool{true, false} {
		h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "rich: always\n")}, fastStream)
		if known {
			h.srv.RichMessages(tokenA)
		}
		h.waitStreamed(tokenA, nil)
		h.srv.SendText(tokenA, 7, 7, "tell me #stream")
		final := h.waitSent(tokenA, 1)[0]
		rich, plain := h.srv.Sent(tokenA, "sendRichMessageDraft"), h.srv.Sent(tokenA, "sendMessageDraft")
		switch {
		case known && (final.Method != "sendRichMessage" || len(rich) == 0 || len(plain) != 0 || !strings.Contains(rich[0].Param("rich_message"), "You")):
			t.Errorf("rich known: final %s, %d rich drafts, %d plain; want rich throughout", final.Method, len(rich), len(plain))
		case known && rich[0].Param("can_stop") != "true":
			t.Errorf("rich draft without a stop button: %v", rich[0].Params)
		case !known && (final.Method != "sendMessage" || len(plain) == 0 || callsOf(h, tokenA, "sendRichMessageDraft") != 1 || callsOf(h, tokenA, "sendRichMessage") != 0):
			t.Errorf("rich unknown: final %s, %d plain drafts, rich tried %d+%d times; want plain, rich tried once",
				final.Method, len(plain), callsOf(h, tokenA, "sendRichMessageDraft"), callsOf(h, tokenA, "sendRichMessage"))
		}
	}
}
