package bot

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"brainbot/bot/telegramtest"
	"brainbot/metrics"
	"brainbot/output"
)

// A streamed answer's drafts carry a stop button. Pressing it ends the
// turn at once; what was written so far is sent as a real message, the
// partial turn's usage is recorded and counted, and the conversation goes
// on. A press for a draft that is gone changes nothing. The same alone
// and in a cluster (where the press reaches the conversation's owner).
func TestStopButtonKeepsWhatWasWritten(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			reg := metrics.New()
			h := newHarnessWith(t, map[string]string{"alpha": brainFile(tokenA, "")}, func(c *Config) {
				fastStream(c)
				c.Metrics = reg
			}, func(h *harness) { m.setup(t, h) })
			checkStopButton(t, h, reg)
		})
	}
}

func checkStopButton(t *testing.T, h *harness, reg *metrics.Metrics) {
	h.srv.SendText(tokenA, 7, 7, "write on #stopme")
	draft := h.waitSent(tokenA, 1, "sendMessageDraft")[0]
	if draft.Param("can_stop") != "true" || draft.Param("keep_on_stop") != "true" {
		t.Fatalf("draft params %v: want can_stop and keep_on_stop", draft.Params)
	}
	draftID, err := strconv.ParseInt(draft.Param("draft_id"), 10, 64)
	if err != nil || draftID <= 0 || draftID >= 1<<31 {
		t.Fatalf("draft_id %q: want a small positive integer", draft.Param("draft_id"))
	}
	// Another draft's stop (an answer long gone) stops nothing.
	h.srv.PressStop(tokenA, 7, draftID+1)
	h.waitLog("stop button for no answer being written: ignored")

	h.srv.PressStop(tokenA, 7, draftID)
	got := h.waitSent(tokenA, 1)[0]
	if got.ChatID() != 7 || got.Param("text") != "You said: write on #stopme" {
		t.Fatalf("after the stop: %s, want the text written so far as a message", describeCalls([]telegramtest.Call{got}))
	}
	var stopped bool
	for _, e := range waitSummaries(t, h.logs, 3) {
		stopped = stopped || e.ContextMap()["outcome"] == "stopped"
	}
	if !stopped {
		t.Error("no request line with outcome stopped")
	}
	spent, err := h.m.cfg.State.SpentToday(h.ctx(), "alpha", 7, h.m.cfg.Now()) // the cluster's state in a cluster
	if err != nil || spent < 0.005 {
		t.Errorf("spent today %g, %v: want the partial turn's cost recorded", spent, err)
	}
	if n := testutil.ToFloat64(reg.Stops.WithLabelValues("alpha", "button")); n != 1 {
		t.Errorf("brainbot_stops_total{via=button} = %g, want 1", n)
	}

	// A second press of the same draft: the answer is over, nothing happens.
	h.srv.PressStop(tokenA, 7, draftID)
	if err := h.srv.WaitConfirmed(h.ctx(), tokenA); err != nil {
		t.Fatal(err)
	}
	if got := h.exchange(tokenA, 7, "next"); got.Param("text") != "You said: next" {
		t.Fatalf("after the stop = %q", got.Param("text"))
	}
	if n := len(h.srv.Sent(tokenA)); n != 2 {
		t.Errorf("%d messages sent, want 2 (the stop's own press answers nothing): %s", n, describeCalls(h.srv.Sent(tokenA)))
	}
}

// A voice reply shows a note while it is made, in a draft with a stop
// button; pressed, the request ends and no voice note is made or sent.
func TestStopButtonEndsAVoiceReply(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "tts:\n  enabled: true\n")}, fastStream)
	h.srv.SendText(tokenA, 7, 7, "speak #stopme")
	draft := h.waitSent(tokenA, 1, "sendMessageDraft")[0]
	if draft.Param("text") != "🎙 Recording a voice message…" || draft.Param("can_stop") != "true" {
		t.Fatalf("draft %v: want the note with a stop button", draft.Params)
	}
	draftID, _ := strconv.ParseInt(draft.Param("draft_id"), 10, 64)
	h.srv.PressStop(tokenA, 7, draftID)
	var outcome any
	for _, e := range waitSummaries(t, h.logs, 2) {
		if e.ContextMap()["mode"] == "speech" {
			outcome = e.ContextMap()["outcome"]
		}
	}
	if outcome != "stopped" {
		t.Errorf("the voice request's outcome %v, want stopped", outcome)
	}
	if sent := h.srv.Sent(tokenA); len(sent) != 0 {
		t.Errorf("sent %s after the stop, want nothing", describeCalls(sent))
	}
	entries, _ := os.ReadDir(filepath.Join(h.data, output.Audio.Dir()))
	if len(entries) != 0 {
		t.Errorf("%d files left in %s, want none", len(entries), output.Audio.Dir())
	}
}
