package jetstream

// A member killed (SIGKILL, a crash, its machine gone) is found by the
// connection NATS closed for it, in half a second, rather than by its
// heartbeat expiring (a member TTL) and its poller lease after it (a
// lease TTL): its conversations wait that much less for another instance
// to take them.

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// presenceSubject is where each member answers while its connection to
// NATS is open (presenceSubject + its key): for one whose connection
// closed, the server says at once that no one answers.
const presenceSubject = "brainbot.presence."

// presenceMark ends the heartbeat of a member that answers on
// presenceSubject. A member without it (an older brainbot, during a
// rolling upgrade) is never asked: its heartbeat's TTL alone tells.
const presenceMark = " presence"

// presence asks the members whether their connection is open, and finds
// the ones whose connection closed.
type presence struct {
	conn *conn
	kv   jsapi.KeyValue // brainbot_members
}

// answer makes this instance answer on its presence subject, until its
// connection closes.
func (p *presence) answer() error {
	_, err := p.conn.nc.Subscribe(presenceSubject+keyPart(p.conn.cfg.Instance), func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		return err
	}
	return p.conn.nc.Flush()
}

// absentFor is how long a member's connection must stay closed for it to
// be taken for gone: two rounds of asks, longer than a client takes to
// reconnect after a dropped connection (reconnectDelay: a moment), far
// shorter than its heartbeat's TTL. Every message of the member's
// conversations waits this long after a kill.
func (p *presence) absentFor() time.Duration { return p.conn.cfg.MemberTTL / 4 }

// watch asks every marked member other than this one, each eighth of a
// member TTL, whether it is there, and calls gone with the member and the
// revision of its last heartbeat once no one has answered for it for
// absentFor. It asks nothing while this instance's NATS has not answered
// for the return wait: after an outage every member reconnects at its own
// pace, and one not back yet is awaited (membership.view).
func (p *presence) watch(ctx context.Context, gone func(member string, rev uint64, absent time.Duration)) {
	w, err := p.kv.WatchAll(ctx)
	if err != nil {
		p.conn.log.Warn("cannot watch the members' heartbeats: a killed member is found by its heartbeat's expiry alone", zap.Error(err))
		return
	}
	defer w.Stop()
	marked := map[string]uint64{} // member: revision of its last marked heartbeat
	absent := map[string]time.Time{}
	tick := time.NewTicker(p.conn.cfg.MemberTTL / 8)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e != nil {
				follow(marked, e, keyPart(p.conn.cfg.Instance))
			}
		case <-tick.C:
			if !p.conn.health.quiet(p.conn.cfg.ReturnWait) {
				clear(absent)
				continue
			}
			p.ask(ctx, marked, absent)
			for member, since := range absent {
				if time.Since(since) >= p.absentFor() {
					gone(member, marked[member], time.Since(since))
					delete(marked, member)
					delete(absent, member)
				}
			}
		}
	}
}

// follow keeps, in marked, the members whose last heartbeat carries the
// presence mark (but me), from one entry of the members bucket.
func follow(marked map[string]uint64, e jsapi.KeyValueEntry, me string) {
	member := e.Key()
	switch {
	case member == me || strings.HasPrefix(member, drainingPrefix):
	case e.Operation() == jsapi.KeyValuePut && strings.HasSuffix(string(e.Value()), presenceMark):
		marked[member] = e.Revision()
	default:
		delete(marked, member)
	}
}

// ask asks each member in marked at once, and keeps in absent since when
// each member with a closed connection has had it closed. A member that
// answered, or was too slow to tell, leaves absent, and so does one no
// longer marked: its heartbeat was deleted (it left, or another instance
// expelled it first) and there is no revision of it left to expel.
func (p *presence) ask(ctx context.Context, marked map[string]uint64, absent map[string]time.Time) {
	maps.DeleteFunc(absent, func(member string, _ time.Time) bool { _, ok := marked[member]; return !ok })
	var mu sync.Mutex
	var asks sync.WaitGroup
	now := time.Now()
	for member := range marked {
		asks.Go(func() {
			actx, cancel := context.WithTimeout(ctx, p.conn.cfg.MemberTTL/4)
			defer cancel()
			_, err := p.conn.nc.RequestWithContext(actx, presenceSubject+member, nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case !errors.Is(err, nats.ErrNoResponders):
				delete(absent, member)
			case absent[member].IsZero():
				absent[member] = now
			}
		})
	}
	asks.Wait()
}

// answerPresence makes this instance answer on its presence subject and
// watches the others' (Work): a member whose connection closed is
// expelled, and its partitions and bots go to the others at once.
func (u *updates) answerPresence(ctx context.Context) {
	p := &presence{conn: u.conn, kv: u.members.kv}
	if err := p.answer(); err != nil {
		u.conn.log.Warn("cannot answer on the presence subject: if this instance is killed, the others find it by its heartbeat's expiry alone", zap.Error(err))
	}
	go p.watch(ctx, func(member string, rev uint64, absent time.Duration) { u.expelGone(ctx, member, rev, absent) })
}

// expelGone takes member, whose connection closed, out of the membership:
// its partitions are unpinned (their next owners pull at once, not a
// pinned TTL after its last pull) and its poller leases deleted (the
// instance each is given to takes it at once).
func (u *updates) expelGone(ctx context.Context, member string, rev uint64, absent time.Duration) {
	parts, expelled := u.members.expel(ctx, member, rev)
	if !expelled {
		return
	}
	u.conn.log.Warn("member gone: its connection to NATS closed; its partitions and bots go to the others",
		zap.String("member", member), zap.Duration("closed_ms", absent), zap.Ints("partitions", parts))
	uctx, cancel := context.WithTimeout(ctx, u.conn.cfg.MemberTTL)
	defer cancel()
	for _, p := range parts {
		_ = u.stream.UnpinConsumer(uctx, consumerName(p), group) // not pinned any more: nothing to do
	}
	u.dropLeases(uctx, member)
}
