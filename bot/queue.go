package bot

import (
	"go.uber.org/zap"

	"brainbot/bot/store"
)

// queue holds one conversation's messages; one goroutine drains it while
// it is non-empty.
type queue struct {
	waiting []*incoming
	// accepted counts messages waiting or being answered.
	accepted int
}

// enqueue adds in to its conversation's queue, or answers busy at once
// when the queue is full.
func (m *Manager) enqueue(in *incoming) {
	key := in.conversation()
	m.mu.Lock()
	q, running := m.queues[key]
	if running && q.accepted >= m.cfg.QueueSize {
		m.mu.Unlock()
		m.answerAside(in, func(r *request) {
			r.log.Info("user queue full: told the user to wait", zap.Int("queue_size", m.cfg.QueueSize))
			r.say("busy", r.brain.Messages.Busy)
		})
		return
	}
	if !running {
		q = &queue{}
		m.queues[key] = q
	}
	q.waiting = append(q.waiting, in)
	q.accepted++
	if !running {
		m.work.Add(1)
		go m.drain(key, q)
	}
	m.mu.Unlock()
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
