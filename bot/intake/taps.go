package intake

import (
	"context"

	"brainbot/message"
)

// tap hands a tap on a button to the conversation beside the queue: it is
// answered at once, even while the conversation's queue is busy. A tap
// that chose an option of a question then goes into the queue as the
// user's words, with the tap's delivery: it waits its turn, is admitted
// like a message and stays in the log until answered.
func (in *Intake) tap(d message.Delivery, u message.Update) {
	m := inbound(u, d)
	aside := &message.Inbound{Update: m.Update, RequestID: m.RequestID, Arrived: m.Arrived, Progress: newProgress()}
	in.aside(func(ctx context.Context) {
		words, chosen := in.cfg.Handler.Tap(ctx, aside)
		if !chosen {
			d.Done(false)
			return
		}
		m.Update = words
		if !d.Envelope().Accepted && !in.admit(m) {
			d.Done(false)
			return
		}
		in.queue(m, "")
	})
}
