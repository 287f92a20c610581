package conversation

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/bot/brain"
	"brainbot/bot/message"
	"brainbot/metrics"
)

// A bot without a brain here may still have a message turned away by a
// full queue. The busy answer must drop the message, finished and with
// its summary line, rather than crash the process on a nil brain.
func TestBusyWithoutABrainDropsTheMessage(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	p := New(Config{Chats: noChats{}, Brain: func(string) *brain.Brain { return nil }, Now: time.Now, Metrics: metrics.New(),
		Log: zap.New(core)})
	progress := &doneProgress{}
	p.Busy(context.Background(), &message.Inbound{Update: message.Update{Key: message.Key{Bot: "gone", Chat: 7}, Sender: 7, Text: "hi"},
		RequestID: "req", Arrived: time.Now(), Progress: progress}, true)
	if !progress.finished {
		t.Error("the message was not finished")
	}
	lines := logs.FilterMessage("request").All()
	if len(lines) != 1 || lines[0].ContextMap()["outcome"] != "dropped" {
		t.Errorf("summary lines %v, want one, dropped", lines)
	}
}

// noChats reaches no Telegram: nothing may be sent.
type noChats struct{}

func (noChats) Outbox(message.Key, bool, int, *zap.Logger) Outbox { return nil }
func (noChats) GuestOutbox(string, string, *zap.Logger) Outbox    { return nil }
func (noChats) Fetch(context.Context, string, string, int64) ([]byte, error) {
	panic("nothing to fetch")
}
func (noChats) AnswerTap(context.Context, string, string, string) error { panic("no tap to answer") }
func (noChats) IsAdmin(context.Context, string, int64, int64) (bool, error) {
	panic("no admin to ask about")
}

// doneProgress records that a message was finished.
type doneProgress struct{ finished bool }

func (p *doneProgress) Attempts() int                             { return 0 }
func (p *doneProgress) Charged() bool                             { return false }
func (p *doneProgress) MarkCharged(context.Context, string) error { return nil }
func (p *doneProgress) MarkAttempt(context.Context, string) error { return nil }
func (p *doneProgress) Answered()                                 { p.finished = true }
func (p *doneProgress) Finish(bool)                               { p.finished = true }
