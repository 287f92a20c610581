package bot

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"brainbot/bot/telegramtest"
	"brainbot/metrics"
)

// A notice meant for one user (here: access denied) is shown in a group
// to that user only; where Telegram refuses an ephemeral message it is an
// ordinary reply; in a private chat it is an ordinary message anyway.
func TestNoticesInGroupsAreForTheirUserOnly(t *testing.T) {
	reg := metrics.New()
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "access:\n  allowed_users: [1]\nmessages:\n  denied: Members only.\n")},
		func(c *Config) { c.Metrics = reg })
	h.srv.SendText(tokenA, 7, -100, "/help")
	got := h.waitSent(tokenA, 1)[0]
	if got.ChatID() != -100 || got.Param("text") != "Members only." || !strings.Contains(got.Param("ephemeral_message_parameters"), `"receiver_user_id":7`) {
		t.Fatalf("group notice %s %v, want it for user 7 only", got.Method, got.Params)
	}

	h.srv.Fail(tokenA, telegramtest.Rule{Match: func(c telegramtest.Call) bool { return c.Param("ephemeral_message_parameters") != "" },
		Err: telegramtest.APIError{Code: 400, Description: "Bad Request: ephemeral messages are not available in this chat"}})
	h.srv.SendText(tokenA, 8, -100, "/help")
	got = h.waitSent(tokenA, 2)[1]
	if got.Param("text") != "Members only." || got.Param("ephemeral_message_parameters") != "" || got.Param("reply_parameters") == "" {
		t.Fatalf("refused notice sent as %v, want an ordinary reply", got.Params)
	}
	if got := h.exchange(tokenA, 9, "hi"); got.Param("ephemeral_message_parameters") != "" || got.Param("text") != "Members only." {
		t.Errorf("private notice %v, want an ordinary message", got.Params)
	}
	if sent, fallback := testutil.ToFloat64(reg.EphemeralNotices.WithLabelValues("sent")), testutil.ToFloat64(reg.EphemeralNotices.WithLabelValues("fallback")); sent != 1 || fallback != 1 {
		t.Errorf("ephemeral notices sent %g, fallback %g; want 1 and 1", sent, fallback)
	}
}
