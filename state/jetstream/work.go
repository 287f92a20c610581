package jetstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// worker consumes one partition.
type worker struct {
	u    *updates
	p    int
	cons jsapi.Consumer
	cc   jsapi.ConsumeContext

	// order serialises handing updates on, so a handover's buffer goes
	// out before anything received after it.
	order sync.Mutex

	mu sync.Mutex
	// held are the stream sequences this worker holds (handed on or
	// buffered).
	held      map[uint64]bool
	pin       string
	buffering bool
	// blocked, while buffering, are the conversations (stored subjects)
	// whose updates wait in buffer behind one the last owner holds; nil
	// until the handover first looked: then all of them wait.
	blocked map[string]bool
	buffer  []*Delivery
	stopped bool
	// ended is closed once stop has returned: the worker pulls no more
	// and the partition is unpinned.
	ended   chan struct{}
	endOnce sync.Once

	// quit ends at stop: a handover waiting for the last owner's updates
	// stops looking. handovers is the handover running (one at a time,
	// started under mu while not stopped); stop waits for it, so none
	// outlives its worker.
	quit      context.Context
	endQuit   context.CancelFunc
	handovers sync.WaitGroup
}

// newWorker returns the worker of partition p, consuming cons once its
// cc is set.
func newWorker(u *updates, p int, cons jsapi.Consumer) *worker {
	quit, endQuit := context.WithCancel(context.Background())
	return &worker{u: u, p: p, cons: cons, held: map[uint64]bool{}, pin: "\x00", ended: make(chan struct{}),
		quit: quit, endQuit: endQuit}
}

// handoverMax bounds how long a new owner waits for the last owner's
// updates before it goes on anyway.
const handoverMax = time.Minute

// stop ends pulling, gives up what was buffered and not handed on, and
// unpins the partition so the next owner is pinned at once; it returns
// once the handover, if one was running, has ended. A receive from then
// on hands its message back.
func (w *worker) stop() {
	w.cc.Stop()
	w.mu.Lock()
	w.stopped = true
	buf := w.buffer
	w.buffer = nil
	w.mu.Unlock()
	w.endQuit()
	for _, d := range buf {
		d.Abandon()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = w.u.stream.UnpinConsumer(ctx, consumerName(w.p), group)
	w.endOnce.Do(func() { close(w.ended) })
	w.handovers.Wait()
}

// ending reports whether the worker stopped or is about to: this
// instance leaves.
func (w *worker) ending() bool {
	w.mu.Lock()
	stopped := w.stopped
	w.mu.Unlock()
	return stopped || w.u.leavingNow()
}

// settle waits, after stop, until what the worker was handing on when it
// stopped (a receive, a handover's buffer) is handed on: held, so Release
// hands it back. It waits on handle, which may take a while to queue an
// update, so only a worker stopped for good is waited for.
func (w *worker) settle() {
	w.order.Lock()
	//lint:ignore SA2001 waiting for the holder is the point
	w.order.Unlock()
}

// take forgets the update at seq and returns its newest delivery, if
// this instance still held it.
func (w *worker) take(seq uint64) (jsapi.Msg, bool) {
	msg, ok := w.u.claims.take(seq)
	w.forget(seq)
	return msg, ok
}

func (w *worker) forget(seq uint64) {
	w.mu.Lock()
	delete(w.held, seq)
	w.mu.Unlock()
	w.u.claims.take(seq)
}

// receive takes one message from the server.
func (w *worker) receive(msg jsapi.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		w.u.conn.log.Warn("message without metadata", zap.Error(err))
		_ = msg.Term()
		return
	}
	seq := meta.Sequence.Stream
	d := &Delivery{env: envelopeOf(msg, meta), delivered: meta.NumDelivered, marks: w.u.marks, locks: w.u.locks,
		w: w, seq: seq, msg: msg}
	w.order.Lock()
	defer w.order.Unlock()
	w.mu.Lock()
	// Held already: kept alive and acknowledged through the newest
	// delivery from now on.
	heldHere := w.u.claims.claim(seq, msg, !w.stopped)
	if heldHere || w.stopped {
		// Redelivered while this instance still holds it (a late
		// keep-alive; maybe by a worker of an earlier turn of ownership):
		// not to be handed on again. Or received after we stopped: handed
		// back.
		w.mu.Unlock()
		if !heldHere {
			_ = msg.Nak()
		}
		return
	}
	w.held[seq] = true
	if pin := msg.Headers().Get(pinHeader); pin != w.pin {
		w.pin = pin
		if !w.buffering {
			w.buffering = true
			w.handovers.Go(w.handover)
		}
	}
	if w.buffering && (w.blocked == nil || w.blocked[msg.Subject()]) {
		w.buffer = append(w.buffer, d)
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.deliver(d)
}

// handover runs when the partition became this worker's. Updates keep
// their order per conversation: one whose conversation has an earlier
// update pending at the last owner (being answered there, or held by an
// instance that died) waits in the buffer until that update is
// acknowledged or redelivered here; the others' are handed on at once, so
// a killed instance's idle conversations do not wait the ack wait of its
// busy ones. Each round it looks again and hands on, in stream order, what
// no longer waits.
func (w *worker) handover() {
	start := time.Now()
	for round := 0; ; round++ {
		if round > 0 {
			select {
			case <-w.quit.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		ctx, cancel := context.WithTimeout(w.quit, 2*time.Second)
		blocked, err := w.pendingElsewhere(ctx)
		cancel()
		w.mu.Lock()
		if w.stopped {
			w.buffering, w.blocked = false, nil
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		late := time.Since(start) > handoverMax
		if err != nil && !late {
			continue // everything waits while it cannot be told what may go
		}
		if late {
			w.u.conn.log.Warn("partition handover: updates of the last owner still pending; going on", zap.Int("partition", w.p))
			blocked = map[string]bool{}
		}
		if w.handOn(blocked) {
			w.u.conn.log.Info("partition handed over", zap.Int("partition", w.p), zap.Duration("waited_ms", time.Since(start)))
			return
		}
	}
}

// handOn hands on, in stream order, the buffered updates whose
// conversation is not blocked, and keeps the rest buffered; it reports
// whether the handover is over (nothing blocked any more).
func (w *worker) handOn(blocked map[string]bool) (over bool) {
	w.order.Lock()
	defer w.order.Unlock()
	w.mu.Lock()
	var ready []*Delivery
	w.buffer = slices.DeleteFunc(w.buffer, func(d *Delivery) bool {
		if blocked[d.msg.Subject()] {
			return false
		}
		ready = append(ready, d)
		return true
	})
	over = len(blocked) == 0
	w.blocked = blocked
	if over {
		w.buffering, w.blocked = false, nil
	}
	w.mu.Unlock()
	slices.SortFunc(ready, func(a, b *Delivery) int { return cmp.Compare(a.seq, b.seq) })
	for _, d := range ready {
		w.deliver(d)
	}
	return over
}

// scanMax bounds how many pending updates a handover looks at in a
// round; past it, the whole partition waits as if each of them were held
// elsewhere.
const scanMax = 1000

// pendingElsewhere returns the conversations (stored subjects) of the
// partition with an update that was delivered and is not held here: still
// held by the last owner (or in flight back to the stream). The stream is
// a work queue, so an update still in it at or below the consumer's last
// delivered sequence is unacknowledged; above its ack floor is where they
// are.
func (w *worker) pendingElsewhere(ctx context.Context) (map[string]bool, error) {
	info, err := w.cons.Info(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for seq, n := info.AckFloor.Stream+1, 0; seq <= info.Delivered.Stream; n++ {
		if n == scanMax {
			return nil, fmt.Errorf("more than %d updates pending", scanMax)
		}
		m, err := w.u.stream.GetMsg(ctx, seq, jsapi.WithGetMsgSubject(partitionSubjects(w.p)))
		if errors.Is(err, jsapi.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		if m.Sequence > info.Delivered.Stream {
			break
		}
		seq = m.Sequence + 1
		w.mu.Lock()
		here := w.held[m.Sequence]
		w.mu.Unlock()
		if !here {
			out[m.Subject] = true
		}
	}
	return out, nil
}

// deliver hands d on, unless it is a redelivery of an update already
// answered, or a scheduled message answered already (appended again
// past the stream's duplicate window, by a scheduler cut short).
func (w *worker) deliver(d *Delivery) {
	if d.delivered > 1 || d.env.Scheduled != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if w.u.marks.wasAnswered(ctx, d.env) {
			cancel()
			if sch := d.env.Scheduled; sch != nil {
				w.u.conn.log.Info("scheduled message was answered already", zap.String("bot", d.env.Bot), zap.String("scheduled", sch.ID))
			} else {
				w.u.conn.log.Info("redelivered update was answered already", zap.String("bot", d.env.Bot), zap.Int64("update_id", d.env.UpdateID))
			}
			d.Done(false)
			return
		}
		d.progress = w.u.marks.read(ctx, d.env)
		cancel()
	}
	w.u.handler()(d)
}
