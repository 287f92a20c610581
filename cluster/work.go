package cluster

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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
	msg := nats.NewMsg(fmt.Sprintf("%s.%s.%d.%d", subjectPrefix, keyPart(env.Bot), env.Key.Chat, env.Key.Thread))
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

// Delivery is one update handed to this instance to answer. Exactly one
// of Done or Abandon must be called.
type Delivery struct {
	env       message.Envelope
	delivered uint64
	// progress is what earlier deliveries recorded of the work on it.
	progress progress

	w   *worker
	seq uint64
	msg jetstream.Msg
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
// (message.ErrSuperseded): after an outage longer than the ack wait the
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
	return message.ErrSuperseded
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
// whoever owns its partition then. A Nak'd update stays in the consumer's
// pending count until it is redelivered, so a new owner's handover still
// waits for it and order holds.
func (d *Delivery) Abandon() {
	if d.superseded {
		return
	}
	defer d.unlock()
	d.w.forget(d.seq)
	_ = d.msg.Nak() // if lost, the ack wait redelivers it
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
	c.stopWork, c.workDone = cancel, done
	c.mu.Unlock()
	c.heartbeat(ctx)
	go c.keepAlive()
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
			}
		}
	}()
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
	c.held = map[uint64]jetstream.Msg{}
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
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
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
		msgs := make([]jetstream.Msg, 0, len(c.held))
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
	cons jetstream.Consumer
	cc   jetstream.ConsumeContext

	// order serialises handing updates on, so a handover's buffer goes
	// out before anything received after it.
	order sync.Mutex

	mu sync.Mutex
	// held are the stream sequences this worker holds (handed on or
	// buffered).
	held      map[uint64]bool
	pin       string
	buffering bool
	buffer    []*Delivery
	stopped   bool
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
	w := &worker{c: c, p: p, cons: cons, held: map[uint64]bool{}, pin: "\x00"}
	w.cc, err = cons.Consume(w.receive, jetstream.PullPriorityGroup(group), jetstream.PullMaxMessages(64),
		jetstream.PullExpiry(max(time.Second, c.cfg.PinnedTTL/2)),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, jetstream.ErrPinIDMismatch) && !errors.Is(err, jetstream.ErrNoHeartbeat) {
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

func (w *worker) forget(seq uint64) {
	w.mu.Lock()
	delete(w.held, seq)
	w.mu.Unlock()
	w.c.heldMu.Lock()
	delete(w.c.held, seq)
	w.c.heldMu.Unlock()
}

// receive takes one message from the server.
func (w *worker) receive(msg jetstream.Msg) {
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
	if w.buffering {
		w.buffer = append(w.buffer, d)
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.deliver(d)
}

// handover runs when the partition became this worker's: it waits until
// every update pending on the partition's consumer is held here (the last
// owner's were acknowledged, or redelivered to us), then hands on the
// buffer in stream order.
func (w *worker) handover() {
	start := time.Now()
	for {
		time.Sleep(100 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		info, err := w.cons.Info(ctx)
		cancel()
		w.mu.Lock()
		if w.stopped {
			w.buffering = false
			w.mu.Unlock()
			return
		}
		caughtUp := err == nil && holdsAllPending(info, w.held)
		late := time.Since(start) > handoverMax
		w.mu.Unlock()
		if !caughtUp && !late {
			continue
		}
		if late {
			w.c.log.Warn("partition handover: updates of the last owner still pending; going on", zap.Int("partition", w.p))
		}
		w.order.Lock()
		w.mu.Lock()
		buf := w.buffer
		w.buffer, w.buffering = nil, false
		w.mu.Unlock()
		slices.SortFunc(buf, func(a, b *Delivery) int { return cmp.Compare(a.seq, b.seq) })
		w.c.log.Info("partition handed over", zap.Int("partition", w.p), zap.Int("updates", len(buf)),
			zap.Duration("waited_ms", time.Since(start)))
		for _, d := range buf {
			w.deliver(d)
		}
		w.order.Unlock()
		return
	}
}

// holdsAllPending reports whether every update ack-pending on the
// consumer when info was taken is one of held (the stream sequences a
// worker holds). Only those held at or below info's last delivered stream
// sequence count: an update delivered for the first time after info was
// taken is past that sequence and not in its count, and counting it would
// let a later update stand in for an earlier one the last owner still
// holds. Those counted were all pending then (redelivered ones too; a
// worker forgets an update before acknowledging it), so as many of them as
// were pending are all of them.
func holdsAllPending(info *jetstream.ConsumerInfo, held map[uint64]bool) bool {
	n := 0
	for seq := range held {
		if seq <= info.Delivered.Stream {
			n++
		}
	}
	return info.NumAckPending <= n
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
func envelopeOf(msg jetstream.Msg, meta *jetstream.MsgMetadata) message.Envelope {
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
