package jetstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"brainbot/bot/message"
	"brainbot/state"

	"github.com/nats-io/nats.go"
	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Headers of a published update: the bot it came to, its id, and the
// bot's Telegram identity as its poller knew it.
const (
	botHeader        = "Brainbot-Bot"
	updateHeader     = "Brainbot-Update"
	meIDHeader       = "Brainbot-Me-Id"
	meUsernameHeader = "Brainbot-Me-Username"
	pinHeader        = "Nats-Pin-Id"
)

// Append stores an update in the stream (Publish), then records poller's
// offset: the poller confirms the update to Telegram only after.
func (c *Cluster) Append(ctx context.Context, poller string, env message.Envelope) error {
	if err := c.Publish(ctx, env); err != nil {
		return err
	}
	return c.setOffset(ctx, poller, env.UpdateID)
}

// Publish stores one Telegram update in the stream as received, under its
// conversation's subject; it returns once JetStream has stored it (or
// had it already: the message id is the bot and the update id).
func (c *Cluster) Publish(ctx context.Context, env message.Envelope) error {
	msg := nats.NewMsg(conversationSubject(env.Key))
	msg.Data = env.Raw
	msg.Header.Set(nats.MsgIdHdr, env.Bot+":"+strconv.FormatInt(env.UpdateID, 10))
	msg.Header.Set(botHeader, env.Bot)
	msg.Header.Set(updateHeader, strconv.FormatInt(env.UpdateID, 10))
	if env.Me.ID != 0 {
		msg.Header.Set(meIDHeader, strconv.FormatInt(env.Me.ID, 10))
		msg.Header.Set(meUsernameHeader, env.Me.Username)
	}
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("cluster: publish update %d of %s: %w", env.UpdateID, env.Bot, err)
	}
	return nil
}

// conversationSubject is where a conversation's updates are published;
// the stream files them under their partition (partitioning).
func conversationSubject(k message.Key) string {
	return fmt.Sprintf("%s.%s.%d.%d", subjectPrefix, keyPart(k.Bot), k.Chat, k.Thread)
}

// Delivery is one update handed to this instance to answer. Exactly one
// of Done or Abandon must be called.
type Delivery struct {
	env       message.Envelope
	delivered uint64
	// progress is what earlier deliveries recorded of the work on it.
	progress progress

	w   *worker
	seq uint64
	msg jsapi.Msg
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
	return d.w.c.recordProgress(ctx, d.env, func(p *progress) { p.Mode = mode })
}

// MarkAttempt records that work on the update starts now, unless it was
// answered already or a newer delivery's work started
// (state.ErrSuperseded): after an outage longer than the ack wait the
// server hands the updates an instance still holds to the partition's
// owner again, and only one of the two may answer.
func (d *Delivery) MarkAttempt(ctx context.Context, mode string) error {
	c := d.w.c
	if !d.locked {
		if err := c.lockConversation(ctx, d.env.Key); err != nil {
			return err
		}
		d.locked = true
	}
	_, answered, err := c.get(ctx, c.answered, answeredKey(d.env.Bot, d.env.UpdateID))
	if err != nil {
		return err
	}
	superseded := answered
	if !answered {
		err = c.recordProgress(ctx, d.env, func(p *progress) {
			if superseded = p.Delivery > d.delivered; !superseded {
				p.Mode, p.Attempts, p.Delivery = mode, p.Attempts+1, d.delivered
			}
		})
	}
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
		d.w.c.unlockConversation(d.env.Key)
	}
}

// Done acknowledges the update: answered marks it so that a redelivery
// (if the acknowledgement is lost) is not answered again.
func (d *Delivery) Done(answered bool) {
	if d.superseded {
		return // the newer delivery's
	}
	defer d.unlock() // once the update is marked answered
	c := d.w.c
	ctx := context.Background() // within Config.Patience: an outage pauses the conversation here
	bot, id := d.env.Bot, d.env.UpdateID
	if answered {
		err := c.patiently(ctx, "mark answered", func(ctx context.Context) error {
			_, err := c.answered.Put(ctx, answeredKey(bot, id), []byte(c.cfg.Instance))
			return err
		})
		if err != nil {
			c.log.Warn("could not mark the update answered", zap.String("bot", bot), zap.Int64("update_id", id), zap.Error(err))
		}
	}
	msg := d.msg
	c.heldMu.Lock()
	if newest, ok := c.held[d.seq]; ok {
		msg = newest
	}
	c.heldMu.Unlock()
	// Forgotten before it is acknowledged: a handover counting what its
	// worker holds against the consumer's ack-pending count may count an
	// update short (it waits a round), never one the server no longer has.
	d.w.forget(d.seq)
	if err := c.patiently(ctx, "acknowledge", msg.DoubleAck); err != nil {
		c.log.Warn("could not acknowledge the update; it may be redelivered", zap.String("bot", bot),
			zap.Int64("update_id", id), zap.Error(err))
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

func answeredKey(bot string, update int64) string {
	return keyPart(bot) + "." + strconv.FormatInt(update, 10)
}

// Consume is Work for the bots' intake.
func (c *Cluster) Consume(ctx context.Context, handle func(message.Delivery)) {
	c.Work(ctx, func(d *Delivery) { handle(d) })
}

// Work makes this instance a member and consumes the partitions assigned
// to it, handing each update to handle in stream order per partition.
// handle must not block: it queues the work. Pulling stops when ctx ends;
// updates held then keep their claim (work in progress) until Release.
func (c *Cluster) Work(ctx context.Context, handle func(*Delivery)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	c.mu.Lock()
	c.handle = handle
	if c.workers == nil {
		c.workers = map[int]*worker{}
	}
	c.stopWork, c.workDone, c.leaving = cancel, done, ctx.Done()
	c.mu.Unlock()
	c.heartbeat(ctx)
	go c.keepAlive()
	left := c.watchLeaving(ctx)
	go func() {
		defer close(done)
		tick := time.NewTicker(c.cfg.MemberTTL / 5)
		defer tick.Stop()
		for {
			if ctx.Err() != nil {
				c.rebalance(nil, true)
				c.drain()
				return
			}
			c.heartbeat(ctx)
			c.rebalance(c.assigned(ctx), false)
			select {
			case <-ctx.Done():
			case <-tick.C:
			case <-left:
			}
		}
	}()
}

// watchLeaving signals when an instance leaves the membership on its own
// (a graceful stop deletes its key): its partitions are taken at once,
// not at the next tick. Ticks still find the ones that expired.
func (c *Cluster) watchLeaving(ctx context.Context) <-chan struct{} {
	left := make(chan struct{}, 1)
	w, err := c.members.WatchAll(ctx, jsapi.UpdatesOnly(), jsapi.MetaOnly())
	if err != nil {
		return left // the ticks alone
	}
	go func() {
		defer w.Stop()
		for e := range w.Updates() {
			if e == nil || e.Operation() == jsapi.KeyValuePut {
				continue
			}
			select {
			case left <- struct{}{}:
			default:
			}
		}
	}()
	return left
}

// Release hands back every update still held (the server redelivers them
// to the partitions' next owners at once) and leaves the membership. Call
// it after the work stopped (the updates handed on are answered or
// abandoned); it ends Work's loop itself and waits until every worker
// stopped pulling before it hands anything back.
func (c *Cluster) Release() {
	// The workers must have stopped before the held updates go back: one
	// still pulling (the work loop may be stopping it right now) would be
	// handed them again, and hold them unkept until the ack wait.
	c.mu.Lock()
	stopWork, workDone := c.stopWork, c.workDone
	c.mu.Unlock()
	if stopWork != nil {
		stopWork()
		<-workDone
	}
	c.mu.Lock()
	workers := c.workers
	c.workers = nil
	c.mu.Unlock()
	for _, w := range workers {
		w.stop()
		w.settle()
	}
	c.heldMu.Lock()
	held := c.held
	c.held = map[uint64]jsapi.Msg{}
	c.heldMu.Unlock()
	for _, m := range held {
		_ = m.Nak()
	}
	c.closeOnce.Do(func() { close(c.released) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = c.members.Delete(ctx, keyPart(c.cfg.Instance))
	_ = c.members.Delete(ctx, drainingPrefix+keyPart(c.cfg.Instance))
}

// drainingPrefix marks, in brainbot_members, an instance that stopped
// pulling and finishes its work: the others take its partitions at once,
// and leave its conversations' locks to it until Release.
const drainingPrefix = "draining."

// drain leaves the membership for the draining mark, kept until Release,
// so that the partitions go to the others at once (a SIGTERM stalls no
// conversation for more than the rebalance tick) while the work still
// running here keeps its conversations.
func (c *Cluster) drain() {
	beat := func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.MemberTTL/3)
		defer cancel()
		_, _ = c.members.Put(ctx, drainingPrefix+keyPart(c.cfg.Instance), []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	}
	beat()
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.MemberTTL/3)
	_ = c.members.Delete(ctx, keyPart(c.cfg.Instance))
	cancel()
	go func() {
		tick := time.NewTicker(c.cfg.MemberTTL / 5)
		defer tick.Stop()
		for {
			select {
			case <-c.released:
				return
			case <-tick.C:
				beat()
			}
		}
	}()
}

func (c *Cluster) heartbeat(ctx context.Context) {
	hctx, cancel := context.WithTimeout(ctx, c.cfg.MemberTTL/3)
	defer cancel()
	_, err := c.members.Put(hctx, keyPart(c.cfg.Instance), []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	switch {
	case err == nil:
		c.health.answered() // an outage ends here on an idle instance
	case ctx.Err() != nil:
	case unavailable(err):
		c.health.failed("membership heartbeat", err)
	default:
		c.log.Warn("membership heartbeat failed", zap.Error(err))
	}
}

// assigned returns the partitions the live members give this instance.
func (c *Cluster) assigned(ctx context.Context) []int {
	lctx, cancel := context.WithTimeout(ctx, c.cfg.MemberTTL/2)
	defer cancel()
	keys, err := c.members.Keys(lctx)
	if err != nil && !errors.Is(err, jsapi.ErrNoKeysFound) {
		if ctx.Err() == nil && !unavailable(err) {
			c.log.Warn("could not list the members; keeping the partitions", zap.Error(err))
		}
		return c.ownedList()
	}
	members := slices.DeleteFunc(keys, func(k string) bool { return strings.HasPrefix(k, drainingPrefix) })
	return Assign(members, keyPart(c.cfg.Instance), c.cfg.Partitions)
}

func (c *Cluster) ownedList() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for p := range c.owned {
		out = append(out, p)
	}
	return out
}

// rebalance starts pulling the partitions in want and stops the others;
// final: for good (Release comes next).
func (c *Cluster) rebalance(want []int, final bool) {
	c.mu.Lock()
	var stop []*worker
	for p, w := range c.workers {
		if !slices.Contains(want, p) {
			stop = append(stop, w)
			delete(c.workers, p)
			delete(c.owned, p)
		}
	}
	var start []int
	for _, p := range want {
		if c.workers != nil && c.workers[p] == nil {
			start = append(start, p)
		}
	}
	c.mu.Unlock()
	for _, w := range stop {
		w.stop()
		if final {
			w.settle()
		}
		c.log.Info("partition released", zap.Int("partition", w.p))
	}
	for _, p := range start {
		w, err := c.startWorker(p)
		if err != nil {
			c.log.Warn("could not consume a partition", zap.Int("partition", p), zap.Error(err))
			continue
		}
		c.mu.Lock()
		if c.workers == nil { // released meanwhile
			c.mu.Unlock()
			w.stop()
			continue
		}
		c.workers[p] = w
		c.owned[p] = true
		c.mu.Unlock()
		c.log.Info("partition taken", zap.Int("partition", p))
	}
}

// keepAlive tells the server, five times per AckWait, that the updates
// this instance holds are being worked on, until Release.
func (c *Cluster) keepAlive() {
	tick := time.NewTicker(c.cfg.AckWait / 5)
	defer tick.Stop()
	for {
		select {
		case <-c.released:
			return
		case <-tick.C:
		}
		c.heldMu.Lock()
		msgs := make([]jsapi.Msg, 0, len(c.held))
		for _, m := range c.held {
			msgs = append(msgs, m)
		}
		c.heldMu.Unlock()
		for _, m := range msgs {
			_ = m.InProgress() // a lost one is redelivered: answered-dedupe
		}
	}
}

// worker consumes one partition.
type worker struct {
	c    *Cluster
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
}

// handoverMax bounds how long a new owner waits for the last owner's
// updates before it goes on anyway.
const handoverMax = time.Minute

func (c *Cluster) startWorker(p int) (*worker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := c.stream.Consumer(ctx, consumerName(p))
	if err != nil {
		return nil, err
	}
	w := &worker{c: c, p: p, cons: cons, held: map[uint64]bool{}, pin: "\x00", ended: make(chan struct{})}
	w.cc, err = cons.Consume(w.receive, jsapi.PullPriorityGroup(group), jsapi.PullMaxMessages(64),
		jsapi.PullExpiry(max(time.Second, c.cfg.PinnedTTL/2)),
		jsapi.ConsumeErrHandler(func(_ jsapi.ConsumeContext, err error) {
			if !errors.Is(err, jsapi.ErrPinIDMismatch) && !errors.Is(err, jsapi.ErrNoHeartbeat) {
				c.log.Debug("partition consumer", zap.Int("partition", p), zap.Error(err))
			}
		}))
	if err != nil {
		return nil, err
	}
	return w, nil
}

// stop ends pulling, gives up what was buffered and not handed on, and
// unpins the partition so the next owner is pinned at once. A receive
// from then on hands its message back.
func (w *worker) stop() {
	w.cc.Stop()
	w.mu.Lock()
	w.stopped = true
	buf := w.buffer
	w.buffer = nil
	w.mu.Unlock()
	for _, d := range buf {
		d.Abandon()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = w.c.stream.UnpinConsumer(ctx, consumerName(w.p), group)
	w.endOnce.Do(func() { close(w.ended) })
}

// ending reports whether the worker stopped or is about to: this
// instance leaves.
func (w *worker) ending() bool {
	w.mu.Lock()
	stopped := w.stopped
	w.mu.Unlock()
	w.c.mu.Lock()
	leaving := w.c.leaving
	w.c.mu.Unlock()
	select {
	case <-leaving:
		return true
	default:
		return stopped
	}
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
	w.c.heldMu.Lock()
	msg, ok := w.c.held[seq]
	delete(w.c.held, seq)
	w.c.heldMu.Unlock()
	w.forget(seq)
	return msg, ok
}

func (w *worker) forget(seq uint64) {
	w.mu.Lock()
	delete(w.held, seq)
	w.mu.Unlock()
	w.c.heldMu.Lock()
	delete(w.c.held, seq)
	w.c.heldMu.Unlock()
}

// receive takes one message from the server.
func (w *worker) receive(msg jsapi.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		w.c.log.Warn("message without metadata", zap.Error(err))
		_ = msg.Term()
		return
	}
	seq := meta.Sequence.Stream
	d := &Delivery{env: envelopeOf(msg, meta), delivered: meta.NumDelivered, w: w, seq: seq, msg: msg}
	w.order.Lock()
	defer w.order.Unlock()
	w.mu.Lock()
	w.c.heldMu.Lock()
	_, heldHere := w.c.held[seq]
	if heldHere {
		// Keep alive and acknowledge through the newest delivery.
		w.c.held[seq] = msg
	}
	if heldHere || w.stopped {
		// Redelivered while this instance still holds it (a late
		// keep-alive; maybe by a worker of an earlier turn of ownership):
		// not to be handed on again. Or received after we stopped: handed
		// back.
		w.c.heldMu.Unlock()
		w.mu.Unlock()
		if !heldHere {
			_ = msg.Nak()
		}
		return
	}
	w.held[seq] = true
	w.c.held[seq] = msg
	w.c.heldMu.Unlock()
	if pin := msg.Headers().Get(pinHeader); pin != w.pin {
		w.pin = pin
		if !w.buffering {
			w.buffering = true
			go w.handover()
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
			time.Sleep(100 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
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
			w.c.log.Warn("partition handover: updates of the last owner still pending; going on", zap.Int("partition", w.p))
			blocked = map[string]bool{}
		}
		if w.handOn(blocked) {
			w.c.log.Info("partition handed over", zap.Int("partition", w.p), zap.Duration("waited_ms", time.Since(start)))
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
		m, err := w.c.stream.GetMsg(ctx, seq, jsapi.WithGetMsgSubject(partitionSubjects(w.p)))
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
// answered.
func (w *worker) deliver(d *Delivery) {
	c := w.c
	if d.delivered > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.answered.Get(ctx, answeredKey(d.env.Bot, d.env.UpdateID))
		if err == nil {
			cancel()
			c.log.Info("redelivered update was answered already", zap.String("bot", d.env.Bot), zap.Int64("update_id", d.env.UpdateID))
			d.Done(false)
			return
		}
		d.progress = c.readProgress(ctx, d.env)
		cancel()
	}
	c.mu.Lock()
	handle := c.handle
	c.mu.Unlock()
	handle(d)
}

// envelopeOf is the update msg holds, as its poller stored it. The
// conversation is the subject's (brainbot.part.<n>.<bot>.<chat>.<thread>);
// an update published by an earlier release has no identity.
func envelopeOf(msg jsapi.Msg, meta *jsapi.MsgMetadata) message.Envelope {
	h := msg.Headers()
	env := message.Envelope{Bot: h.Get(botHeader), Raw: msg.Data(), Received: meta.Timestamp}
	env.UpdateID, _ = strconv.ParseInt(h.Get(updateHeader), 10, 64)
	env.Me.ID, _ = strconv.ParseInt(h.Get(meIDHeader), 10, 64)
	env.Me.Username = h.Get(meUsernameHeader)
	env.Key.Bot = env.Bot
	if tokens := strings.Split(msg.Subject(), "."); len(tokens) == 6 {
		env.Key.Chat, _ = strconv.ParseInt(tokens[4], 10, 64)
		env.Key.Thread, _ = strconv.Atoi(tokens[5])
	}
	return env
}
