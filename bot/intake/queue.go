package intake

import (
	"context"

	"go.uber.org/zap"

	"brainbot/message"
)

// queue holds one conversation's messages waiting to be answered; one
// goroutine drains it while it is non-empty, so they are answered one at a
// time, in order.
type queue struct {
	waiting []*message.Inbound
	// running is the message being answered (nil between messages).
	running *message.Inbound
	// accepted counts the messages waiting and the one being answered.
	accepted int
	// told: a message of the current burst was dropped and its sender told
	// so; the next ones dropped before the queue empties are not.
	told bool
}

// takeAll takes the messages waiting in q out of it (in.mu held).
func (q *queue) takeAll() []*message.Inbound {
	waiting := q.waiting
	q.waiting = nil
	q.accepted -= len(waiting)
	return waiting
}

// admit reports whether m may wait in its conversation's queue: at most
// Config.QueueSize messages wait besides the one being answered. A message
// beyond that is dropped here: its delivery is done, so a restart does not
// meet it again. The first one dropped in a burst gets the brain's busy
// text, the rest nothing, so a burst of fifteen messages is answered by a
// handful, not fifteen. Either way it gets its summary line.
func (in *Intake) admit(m *message.Inbound) bool {
	in.mu.Lock()
	q := in.queues[m.Key]
	full := q != nil && q.accepted > in.cfg.QueueSize
	tell := full && !q.told
	if tell {
		q.told = true
	}
	in.mu.Unlock()
	if !full {
		return true
	}
	aside := &message.Inbound{Update: m.Update, RequestID: m.RequestID, Arrived: m.Arrived, Progress: newProgress()}
	if tell {
		in.aside(func(ctx context.Context) { in.cfg.Handler.Busy(ctx, aside, true) })
	} else {
		// No Telegram call: answered in the log's callback itself.
		in.cfg.Handler.Busy(in.cfg.Ctx, aside, false)
	}
	return false
}

// enqueue adds m to its conversation's queue and starts draining it.
func (in *Intake) enqueue(m *message.Inbound) {
	in.mu.Lock()
	defer in.mu.Unlock()
	q, running := in.queues[m.Key]
	if !running {
		q = &queue{}
		in.queues[m.Key] = q
		in.cfg.Work.Add(1)
		go in.drain(m.Key, q)
	}
	q.waiting = append(q.waiting, m)
	q.accepted++
}

// drain answers key's messages until its queue is empty or the intake
// stops: what is left then goes back to its log, for the next start or
// another instance. A message whose work already started twice (each
// attempt cut short by a crash or a shutdown) is not tried a third time:
// its sender is asked to send it again.
func (in *Intake) drain(key message.Key, q *queue) {
	defer in.cfg.Work.Done()
	for {
		in.mu.Lock()
		if len(q.waiting) == 0 || isClosed(in.cfg.Stopping) {
			left := q.waiting
			delete(in.queues, key)
			in.mu.Unlock()
			for _, m := range left {
				m.Progress.Finish(true)
			}
			return
		}
		m := q.waiting[0]
		q.waiting = q.waiting[1:]
		q.running = m
		if p, ok := m.Progress.(*progress); ok {
			p.behind = func() []*message.Inbound { return in.takeWaiting(q, m) }
		}
		in.mu.Unlock()
		if m.Progress.Attempts() >= 2 {
			logger(in.cfg.Log, m).Warn("journaled message failed after a restart already: asking the user to resend")
			in.cfg.Handler.Resend(in.cfg.Ctx, m)
		} else {
			in.cfg.Handler.Serve(in.cfg.Ctx, m)
		}
		in.mu.Lock()
		q.accepted--
		q.running = nil
		in.mu.Unlock()
	}
}

// takeWaiting takes the messages waiting in q behind m, which is handed
// back to its log: they go back with it, so that none is answered before
// it. Its conversation's album still arriving goes after them: left, it
// would be queued ahead of m when m comes back (an album open when a
// message comes is answered first).
func (in *Intake) takeWaiting(q *queue, m *message.Inbound) []*message.Inbound {
	var albums []*message.Inbound
	// Albums first: one closing meanwhile is in the queue, taken next.
	in.albums.take(func(key message.Key) bool { return key == m.Key }, func(al *message.Inbound) { albums = append(albums, al) })
	in.mu.Lock()
	behind := append(q.takeAll(), albums...)
	in.mu.Unlock()
	if len(behind) > 0 {
		logger(in.cfg.Log, m).Info("message handed back: the ones waiting behind it in its conversation go back with it, to keep their order",
			zap.Int("behind", len(behind)))
	}
	return behind
}

// DropWaiting drops the messages waiting in user's conversations with
// bot ("": every bot; message.Key.User), behind the one each answers
// (which runs on), and those of albums still gathering: done with,
// unanswered, for the user was forgotten, and /forget promises that the
// messages not answered yet go. It returns how many went.
func (in *Intake) DropWaiting(bot string, user int64) int {
	mine := func(key message.Key) bool { return key.IsUsers(bot, user) }
	unanswered := func(m *message.Inbound) { m.Progress.Finish(false) }
	// Albums first: one closing meanwhile is in its queue, emptied next.
	n := in.albums.take(mine, unanswered)
	in.mu.Lock()
	var dropped []*message.Inbound
	for key, q := range in.queues {
		if mine(key) {
			dropped = append(dropped, q.takeAll()...)
		}
	}
	in.mu.Unlock()
	for _, m := range dropped {
		unanswered(m)
	}
	return n + len(dropped)
}
