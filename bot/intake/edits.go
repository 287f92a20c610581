package intake

import (
	"context"
	"slices"

	"go.uber.org/zap"

	"brainbot/message"
)

// edit takes an edited message in. Still waiting in its queue, it is
// answered as edited, in its place. Being answered now, its turn is
// stopped (the conversation sends nothing of it) and the edited version
// is answered next. Answered already, or never seen, it is not answered
// again (people fix typos): a debug line, nothing else. An edit handed
// out before (a restart, another instance) was taken in then: its
// original is gone, so it is answered as the message it now is.
func (in *Intake) edit(d message.Delivery, u message.Update) {
	log := in.cfg.Log.With(zap.String("bot", u.Key.Bot), zap.Int64("chat", u.Key.Chat), zap.Int("message_id", u.MessageID))
	u.Kind = message.Written // answered as the message it is now
	if u.Command != "" || !in.wants(u) {
		log.Debug("edited message not answered: no message for the bot now")
		in.finish(d)
		return
	}
	m := inbound(u, d)
	in.mu.Lock()
	q := in.queues[u.Key]
	if q != nil && replaceWaiting(q, m) {
		in.mu.Unlock()
		log.Debug("edited message answered as edited: it was still waiting")
		return
	}
	if q != nil && sameMessage(q.running, m) && !q.running.Superseded.Load() && !q.running.Progress.(*progress).done.Load() {
		old := q.running
		old.Superseded.Store(true)
		q.waiting = slices.Insert(q.waiting, 0, m)
		q.accepted++
		in.mu.Unlock()
		log.Info("message edited while answered: its turn is stopped and the edited version answered")
		stop := &message.Inbound{Update: u, RequestID: old.RequestID, Arrived: m.Arrived, Progress: newProgress()}
		stop.Kind = message.Edited
		in.aside(func(ctx context.Context) { in.cfg.Handler.Stop(ctx, stop) })
		return
	}
	in.mu.Unlock()
	if d.Redelivered() {
		in.queue(m, "")
		return
	}
	log.Debug("edited message not answered again: answered already, or never seen")
	in.finish(d)
}

// replaceWaiting puts m in the place of the message of q it edits, which
// keeps its deliveries with m's; false when none waits.
func replaceWaiting(q *queue, m *message.Inbound) bool {
	for i, w := range q.waiting {
		if sameMessage(w, m) && w.Album == "" {
			m.Progress.(*progress).join(w.Progress)
			q.waiting[i] = m
			return true
		}
	}
	return false
}

// sameMessage reports whether edited is an edit of m.
func sameMessage(m, edited *message.Inbound) bool {
	return m != nil && m.MessageID == edited.MessageID && m.Sender == edited.Sender
}
