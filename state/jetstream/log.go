package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/message"
)

// updates is the bots' update log: the stream the pollers publish to,
// their offsets (in brainbot_state), and the partitions this instance
// consumes, a worker each, as the membership assigns them.
type updates struct {
	conn    *conn
	stream  jsapi.Stream
	offsets jsapi.KeyValue
	members *membership
	claims  *claims
	marks   *marks
	locks   *convLocks
	// dropLeases deletes the poller leases a member whose connection
	// closed holds (leases.dropHeldBy).
	dropLeases func(ctx context.Context, member string)
	// arrivals hears of the partitions taken from other instances.
	arrivals arrivals

	mu      sync.Mutex
	owned   map[int]bool // partitions this instance pulls
	workers map[int]*worker
	handle  func(*Delivery)
	// stopWork ends Work's loop, which closes workDone once it stopped
	// its workers.
	stopWork context.CancelFunc
	workDone chan struct{}
	// leaving is closed once Work's loop is told to stop.
	leaving <-chan struct{}
}

// Append stores an update in the stream (Publish), then records poller's
// offset: the poller confirms the update to Telegram only after. A
// scheduled message has no poller.
func (u *updates) Append(ctx context.Context, poller string, env message.Envelope) error {
	if err := u.Publish(ctx, env); err != nil || env.Scheduled != nil {
		return err
	}
	return u.setOffset(ctx, poller, env.UpdateID)
}

// Publish stores one Telegram update in the stream as received, under its
// conversation's subject; it returns once JetStream has stored it (or
// had it already: the message id is the bot and the update id).
//
// A scheduled message (env.Scheduled) is stored as JSON, its message id
// the bot and its id: one appended again within the stream's duplicate
// window (10 minutes), by this instance or another, is dropped by the
// server; one appended later than that, once the first was answered, is
// handed over and superseded at once (its answered mark, kept a day).
func (u *updates) Publish(ctx context.Context, env message.Envelope) error {
	msg := nats.NewMsg(conversationSubject(env.Key))
	msg.Data = env.Raw
	msg.Header.Set(nats.MsgIdHdr, env.Bot+":"+strconv.FormatInt(env.UpdateID, 10))
	msg.Header.Set(botHeader, env.Bot)
	msg.Header.Set(updateHeader, strconv.FormatInt(env.UpdateID, 10))
	if env.Me.ID != 0 {
		msg.Header.Set(meIDHeader, strconv.FormatInt(env.Me.ID, 10))
		msg.Header.Set(meUsernameHeader, env.Me.Username)
	}
	what := fmt.Sprintf("update %d", env.UpdateID)
	if sch := env.Scheduled; sch != nil {
		msg.Data, _ = json.Marshal(sch) // plain fields: cannot fail
		msg.Header.Set(nats.MsgIdHdr, env.Bot+":sched:"+sch.ID)
		msg.Header.Del(updateHeader)
		msg.Header.Set(scheduledHeader, strconv.FormatInt(sch.User, 10))
		what = "scheduled message " + sch.ID
	}
	if _, err := u.conn.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("cluster: publish %s of %s: %w", what, env.Bot, err)
	}
	return nil
}

// conversationSubject is where a conversation's updates are published;
// the stream files them under their partition (partitioning).
func conversationSubject(k message.Key) string {
	return fmt.Sprintf("%s.%s.%d.%d", subjectPrefix, keyPart(k.Bot), k.Chat, k.Thread)
}

func offsetKey(poller string) string { return "offset." + keyPart(poller) }

// Offset is the last update id the poller stored (0 if none).
func (u *updates) Offset(ctx context.Context, poller string) (int64, error) {
	val, found, err := u.conn.get(ctx, u.offsets, offsetKey(poller))
	if err != nil || !found {
		return 0, wrap("read update offset", err)
	}
	return strconv.ParseInt(string(val), 10, 64)
}

// setOffset records that the poller stored updateID (never moving back).
func (u *updates) setOffset(ctx context.Context, poller string, updateID int64) error {
	err := u.conn.change(ctx, u.offsets, offsetKey(poller), func(old []byte, _ bool) ([]byte, bool) {
		if n, _ := strconv.ParseInt(string(old), 10, 64); n >= updateID {
			return nil, false
		}
		return []byte(strconv.FormatInt(updateID, 10)), true
	})
	if err != nil {
		return fmt.Errorf("save update offset: %w", err)
	}
	return nil
}

// Consume is Work for the bots' intake.
func (u *updates) Consume(ctx context.Context, handle func(message.Delivery)) {
	u.Work(ctx, func(d *Delivery) { handle(d) })
}

// Work makes this instance a member and consumes the partitions assigned
// to it, handing each update to handle in stream order per partition.
// handle must not block: it queues the work. Pulling stops when ctx ends;
// updates held then keep their claim (work in progress) until Release.
func (u *updates) Work(ctx context.Context, handle func(*Delivery)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	u.mu.Lock()
	u.handle = handle
	if u.workers == nil {
		u.workers = map[int]*worker{}
	}
	u.stopWork, u.workDone, u.leaving = cancel, done, ctx.Done()
	u.mu.Unlock()
	u.answerPresence(ctx)
	u.members.heartbeat(ctx)
	beating := u.members.keepBeating(ctx)
	go u.claims.keepAlive()
	left := u.members.watchLeaving(ctx)
	go func() {
		defer close(done)
		tick := time.NewTicker(u.conn.cfg.MemberTTL / 5)
		defer tick.Stop()
		for {
			if ctx.Err() != nil {
				<-beating // no beat after drain deleted this member's key
				u.rebalance(nil, true)
				u.members.drain(u.claims.released)
				return
			}
			want, ok := u.members.assigned(ctx)
			if !ok {
				want = u.ownedList() // keeping the partitions
			}
			u.rebalance(want, false)
			select {
			case <-ctx.Done():
			case <-tick.C:
			case <-left:
			}
		}
	}()
}

// Release hands back every update still held (the server redelivers them
// to the partitions' next owners at once) and leaves the membership. Call
// it after the work stopped (the updates handed on are answered or
// abandoned); it ends Work's loop itself and waits until every worker
// stopped pulling before it hands anything back.
func (u *updates) Release() {
	// The workers must have stopped before the held updates go back: one
	// still pulling (the work loop may be stopping it right now) would be
	// handed them again, and hold them unkept until the ack wait.
	u.mu.Lock()
	stopWork, workDone := u.stopWork, u.workDone
	u.mu.Unlock()
	if stopWork != nil {
		stopWork()
		<-workDone
	}
	u.mu.Lock()
	workers := u.workers
	u.workers = nil
	u.mu.Unlock()
	for _, w := range workers {
		w.stop()
		w.settle()
	}
	u.claims.handBack()
	u.members.leave()
}

func (u *updates) ownedList() []int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Collect(maps.Keys(u.owned))
}

// rebalance starts pulling the partitions in want and stops the others;
// final: for good (Release comes next).
func (u *updates) rebalance(want []int, final bool) {
	u.mu.Lock()
	var stop []*worker
	for p, w := range u.workers {
		if !slices.Contains(want, p) {
			stop = append(stop, w)
			delete(u.workers, p)
			delete(u.owned, p)
		}
	}
	var start []int
	for _, p := range want {
		if u.workers != nil && u.workers[p] == nil {
			start = append(start, p)
		}
	}
	u.mu.Unlock()
	for _, w := range stop {
		w.stop()
		if final {
			w.settle()
		}
		u.conn.log.Info("partition released", zap.Int("partition", w.p))
	}
	var taken []int
	for _, p := range start {
		w, err := u.startWorker(p)
		if err != nil {
			u.conn.log.Warn("could not consume a partition", zap.Int("partition", p), zap.Error(err))
			continue
		}
		u.mu.Lock()
		if u.workers == nil { // released meanwhile
			u.mu.Unlock()
			w.stop()
			continue
		}
		u.workers[p] = w
		u.owned[p] = true
		u.mu.Unlock()
		u.conn.log.Info("partition taken", zap.Int("partition", p))
		taken = append(taken, p)
	}
	u.arrivals.took(taken)
}

func (u *updates) startWorker(p int) (*worker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := u.stream.Consumer(ctx, consumerName(p))
	if err != nil {
		return nil, err
	}
	w := newWorker(u, p, cons)
	w.cc, err = cons.Consume(w.receive, jsapi.PullPriorityGroup(group), jsapi.PullMaxMessages(64),
		jsapi.PullExpiry(max(time.Second, u.conn.cfg.PinnedTTL/2)),
		jsapi.ConsumeErrHandler(func(_ jsapi.ConsumeContext, err error) {
			if !errors.Is(err, jsapi.ErrPinIDMismatch) && !errors.Is(err, jsapi.ErrNoHeartbeat) {
				u.conn.log.Debug("partition consumer", zap.Int("partition", p), zap.Error(err))
			}
		}))
	if err != nil {
		return nil, err
	}
	return w, nil
}

// handler is what Work hands the updates to.
func (u *updates) handler() func(*Delivery) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.handle
}

// leavingNow reports whether Work's loop was told to stop: this instance
// leaves.
func (u *updates) leavingNow() bool {
	u.mu.Lock()
	leaving := u.leaving
	u.mu.Unlock()
	select {
	case <-leaving:
		return true
	default:
		return false
	}
}
