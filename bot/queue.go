package bot

import (
	"go.uber.org/zap"

	"brainbot/bot/store"
)

// queue holds one conversation's messages waiting to be answered; one
// goroutine drains it while it is non-empty, so they are answered one at a
// time, in order.
type queue struct {
	waiting []*incoming
	// accepted counts the messages waiting and the one being answered.
	accepted int
	// told: a message of the current burst was dropped and its sender told
	// so; the next ones dropped before the queue empties are not.
	told bool
}

// admit reports whether in may wait in its conversation's queue: at most
// Config.QueueSize messages wait besides the one being answered. A message
// beyond that is dropped here: it is confirmed but never journaled, so a
// restart does not replay it. The first one dropped in a burst gets the
// brain's busy text, the rest nothing, so a burst of fifteen messages is
// answered by a handful, not fifteen. Either way it gets its summary line.
func (m *Manager) admit(in *incoming) bool {
	m.mu.Lock()
	q := m.queues[in.conversation()]
	full := q != nil && q.accepted > m.cfg.QueueSize
	tell := full && !q.told
	if tell {
		q.told = true
	}
	m.mu.Unlock()
	switch {
	case !full:
		return true
	case tell:
		m.answerAside(in, func(r *request) {
			r.log.Info("conversation queue full: message dropped, sender told to wait", zap.Int("queue_size", m.cfg.QueueSize))
			r.say("busy", r.brain.Messages.Busy)
		})
	default:
		// No Telegram call: answered in the polling worker itself.
		m.pipeline.serveAside(m.workCtx, in, func(r *request) {
			r.log.Info("conversation queue full: message dropped", zap.Int("queue_size", m.cfg.QueueSize))
			r.drop("busy, not told")
		})
	}
	return false
}

// enqueue adds in to its conversation's queue and starts draining it.
func (m *Manager) enqueue(in *incoming) {
	key := in.conversation()
	m.mu.Lock()
	defer m.mu.Unlock()
	q, running := m.queues[key]
	if !running {
		q = &queue{}
		m.queues[key] = q
		m.work.Add(1)
		go m.drain(key, q)
	}
	q.waiting = append(q.waiting, in)
	q.accepted++
}

// drain answers key's messages until its queue is empty or the manager
// stops (what is left stays journaled for the next start).
func (m *Manager) drain(key store.Conversation, q *queue) {
	defer m.work.Done()
	for {
		m.mu.Lock()
		if len(q.waiting) == 0 || isClosed(m.stopping) {
			delete(m.queues, key)
			m.mu.Unlock()
			return
		}
		in := q.waiting[0]
		q.waiting = q.waiting[1:]
		m.mu.Unlock()
		m.pipeline.serve(m.workCtx, in)
		m.mu.Lock()
		q.accepted--
		m.mu.Unlock()
	}
}

// answerAside answers in with a reply that does not wait in its queue (a
// busy notice, a request to resend), in a goroutine of its own so the
// polling worker never waits on Telegram.
func (m *Manager) answerAside(in *incoming, answer func(*request)) {
	m.work.Add(1)
	go func() {
		defer m.work.Done()
		m.pipeline.serveAside(m.workCtx, in, answer)
	}()
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
