package jetstream

import (
	"context"
	"strconv"
	"strings"

	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/message"
	"brainbot/state"
)

// Headers of a published update: the bot it came to, its id, and the
// bot's Telegram identity as its poller knew it.
const (
	botHeader        = "Brainbot-Bot"
	updateHeader     = "Brainbot-Update"
	meIDHeader       = "Brainbot-Me-Id"
	meUsernameHeader = "Brainbot-Me-Username"
	// scheduledHeader marks a scheduled message (its data the
	// message.Scheduled) and names its user, for a forget.
	scheduledHeader = "Brainbot-Scheduled"
	pinHeader       = "Nats-Pin-Id"
)

// Delivery is one update handed to this instance to answer. Exactly one
// of Done or Abandon must be called. Its marks (charged, attempt,
// answered) go to marks, its conversation's lock to locks.
type Delivery struct {
	env       message.Envelope
	delivered uint64
	// progress is what earlier deliveries recorded of the work on it.
	progress progress

	marks *marks
	locks *convLocks
	w     *worker
	seq   uint64
	msg   jsapi.Msg
	// superseded: MarkAttempt found a newer delivery answering it;
	// locked: MarkAttempt took the conversation's lock.
	superseded, locked bool
}

// Envelope is the update as the poller stored it.
func (d *Delivery) Envelope() message.Envelope { return d.env }

// Redelivered reports whether the update was handed out before.
func (d *Delivery) Redelivered() bool { return d.delivered > 1 }

// Attempts is how often work on the update started before.
func (d *Delivery) Attempts() int { return d.progress.Attempts }

// Charged: an earlier delivery counted the update against its sender's
// daily limit.
func (d *Delivery) Charged() bool { return d.progress.Mode != "" }

// MarkCharged records that the update was counted against the daily
// limit, to be answered in mode.
func (d *Delivery) MarkCharged(ctx context.Context, mode string) error {
	return d.marks.charge(ctx, d.env, mode)
}

// MarkAttempt records that work on the update starts now, unless it was
// answered already or a newer delivery's work started
// (state.ErrSuperseded): after an outage longer than the ack wait the
// server hands the updates an instance still holds to the partition's
// owner again, and only one of the two may answer.
func (d *Delivery) MarkAttempt(ctx context.Context, mode string) error {
	if !d.locked {
		if err := d.locks.lock(ctx, d.env.Key); err != nil {
			return err
		}
		d.locked = true
	}
	superseded, err := d.marks.attempt(ctx, d.env, d.delivered, mode)
	if err != nil || !superseded {
		return err
	}
	d.superseded = true
	d.w.forget(d.seq)
	d.unlock()
	return state.ErrSuperseded
}

// unlock releases the conversation's lock if this delivery took it.
func (d *Delivery) unlock() {
	if d.locked {
		d.locked = false
		d.locks.unlock(d.env.Key)
	}
}

// Done acknowledges the update: answered marks it so that a redelivery
// (if the acknowledgement is lost) is not answered again.
func (d *Delivery) Done(answered bool) {
	if d.superseded {
		return // the newer delivery's
	}
	defer d.unlock() // once the update is marked answered
	if answered {
		d.marks.answer(d.env) // within Config.Patience: an outage pauses the conversation here
	}
	msg := d.w.u.claims.newest(d.seq, d.msg)
	// Forgotten before it is acknowledged: a handover counting what its
	// worker holds against the consumer's ack-pending count may count an
	// update short (it waits a round), never one the server no longer has.
	d.w.forget(d.seq)
	c := d.w.u.conn
	if err := c.patiently(context.Background(), "acknowledge", msg.DoubleAck); err != nil {
		c.log.Warn("could not acknowledge the update; it may be redelivered", zap.String("bot", d.env.Bot),
			zap.Int64("update_id", d.env.UpdateID), zap.Error(err))
	}
}

// Abandon hands the update back: the server redelivers it at once to
// whoever owns its partition then. A Nak'd update stays pending on the
// consumer until it is redelivered, so a new owner's handover still
// waits for it and its conversation's order holds.
//
// A worker that is stopping (this instance leaves, or the partition
// moves) may still be pinned, with pull requests the server fills: a Nak
// then would redeliver the update into a pull nobody reads any more, and
// it would wait out the ack wait there. So the update stays held (kept
// alive) until its worker stopped pulling and unpinned the partition,
// and goes back then.
func (d *Delivery) Abandon() {
	if d.superseded {
		return
	}
	defer d.unlock()
	w := d.w
	if !w.ending() {
		w.forget(d.seq)
		_ = d.msg.Nak() // if lost, the ack wait redelivers it
		return
	}
	go func() {
		<-w.ended
		if msg, ok := w.take(d.seq); ok { // else Release handed it back
			_ = msg.Nak()
		}
	}()
}

// envelopeOf is the update msg holds, as its poller stored it. The
// conversation is the subject's (brainbot.part.<n>.<bot>.<chat>.<thread>);
// an update published by an earlier release has no identity. A scheduled
// message has no update: its data is the message.Scheduled.
func envelopeOf(msg jsapi.Msg, meta *jsapi.MsgMetadata) message.Envelope {
	h := msg.Headers()
	env := message.Envelope{Bot: h.Get(botHeader), Raw: msg.Data(), Received: meta.Timestamp}
	env.UpdateID, _ = strconv.ParseInt(h.Get(updateHeader), 10, 64)
	env.Me.ID, _ = strconv.ParseInt(h.Get(meIDHeader), 10, 64)
	env.Me.Username = h.Get(meUsernameHeader)
	env.Key.Bot = env.Bot
	if env.Scheduled = scheduledOf(h, env.Raw); env.Scheduled != nil {
		env.Raw = nil
	}
	if tokens := strings.Split(msg.Subject(), "."); len(tokens) == 6 {
		env.Key.Chat, _ = strconv.ParseInt(tokens[4], 10, 64)
		env.Key.Thread, _ = strconv.Atoi(tokens[5])
	}
	return env
}
