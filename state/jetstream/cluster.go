// Package jetstream is the backend of brainbot's state (package state) for
// several instances sharing their bots through NATS JetStream
// (BRAINBOT_NATS_URL). It uses JetStream's own means and
// invents no protocol of its own:
//
//   - Updates go into one stream, BRAINBOT_UPDATES, under
//     brainbot.in.<bot>.<chat>.<thread>; the stream's subject transform maps
//     each conversation to one of N partitions with partition(), and the
//     Nats-Msg-Id (bot and update id) drops an update published twice.
//   - Each partition has a durable pull consumer with the pinned-client
//     priority policy: the server lets one instance at a time consume it.
//     Instances announce themselves in a KV bucket with a TTL (membership)
//     and pull the partitions a rendezvous hash over the live members gives
//     them, which only balances the work; the pin keeps it exclusive.
//   - A partition changing hands waits until every message still pending on
//     its consumer is this instance's (the last owner's are acknowledged or
//     redelivered), then hands them on in stream order, so a conversation's
//     messages stay in order across a handover.
//   - Exactly one instance polls each bot: a lease in a KV bucket with a
//     TTL, created when absent and refreshed by revision.
//   - A message is acknowledged after its reply was sent; an "answered"
//     marker makes a redelivery of an answered message a no-op.
//
// Cluster, this instance's place among the others, is a facade over types
// that each keep one thing: conn (the connection, and outages waited out),
// updates (the log: stream, offsets, the partitions' workers, with claims
// on the updates held and each Delivery), marks (what the work on an
// update recorded) and convLocks (the conversations' locks), membership,
// and leases. State keeps the rest in KV (records, tally, buttonSets,
// panelRuns, memories, schedules), Transcripts the CLI's transcripts in an object store;
// Backend is all of it as a state.Backend.
package jetstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/state"
)

// Names of what brainbot keeps in JetStream.
const (
	Stream       = "BRAINBOT_UPDATES"
	UsageStream  = "BRAINBOT_USAGE"
	leaseBucket  = "brainbot_leases"
	memberBucket = "brainbot_members"
	answerBucket = "brainbot_answered"
	progBucket   = "brainbot_progress"
	stateBucket  = "brainbot_state"
	dailyBucket  = "brainbot_daily"
	objectBucket = "brainbot_transcripts"
	panelBucket  = "brainbot_panels"
	buttonBucket = "brainbot_buttons"
	notesBucket  = "brainbot_notes"
	schedBucket  = "brainbot_schedules"
	// panelTTL frees a chat whose panel run's instance died.
	panelTTL      = 15 * time.Minute
	subjectPrefix = "brainbot.in"
	partPrefix    = "brainbot.part"
	// group is the priority group every instance pulls in.
	group = "brainbot"
)

// Config says how to join the cluster. Zero durations take the defaults
// noted.
type Config struct {
	// URL is BRAINBOT_NATS_URL (comma-separated server URLs).
	URL string
	// Partitions is how many partitions the conversations are spread over
	// (default 16). Every instance must use the same number.
	Partitions int
	// Instance names this instance (unique among the live ones).
	Instance string
	// LeaseTTL is how long a bot's poller lease lasts unrefreshed: how
	// soon another instance takes over polling (default 3s).
	LeaseTTL time.Duration
	// MemberTTL is how long an instance stays a member without a
	// heartbeat (default 2s; it beats five times as often).
	MemberTTL time.Duration
	// ReturnWait is how long, after an outage of NATS, the members of
	// the spread before it keep their partitions while they come back
	// (default three member TTLs): the heartbeats expired with the
	// outage, and a member slower to reconnect than this one is not dead.
	ReturnWait time.Duration
	// PinnedTTL is how long a partition stays pinned to an instance that
	// stopped pulling (default 2s; it pulls every second).
	PinnedTTL time.Duration
	// AckWait is how long a message may go without a sign of work before
	// it is redelivered (default 3s; the holder signals five times as
	// often, so only a process stalled for 2.4s loses its claim, and then
	// its conversation's lock keeps a second instance from answering it
	// too). A dead instance's messages wait this long before they are
	// answered elsewhere.
	AckWait time.Duration
	// Replicas is the replication of the streams and buckets (default 1;
	// 3 on a three-node cluster).
	Replicas int
	// WaitForNATS has Connect wait, until its context ends, while no
	// NATS server can be reached (an instance started before NATS, after
	// a reboot); without it an unreachable NATS fails Connect at once.
	WaitForNATS bool
	// StartWait bounds how long Connect, once NATS is reached, waits for
	// JetStream to create what brainbot keeps there (default 1m).
	StartWait time.Duration
	// Patience is how long a call to the shared state is tried again
	// while NATS is unavailable before the message waiting on it is
	// handed back to its log (default 20s).
	Patience time.Duration
	// SpoolDir keeps the usage records NATS could not take until it is
	// back ("": they are lost with an outage that outlasts Patience).
	SpoolDir string
	Log      *zap.Logger
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Partitions <= 0 {
		c.Partitions = 16
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	def(&c.LeaseTTL, 3*time.Second)
	def(&c.MemberTTL, 2*time.Second)
	def(&c.ReturnWait, 3*c.MemberTTL)
	def(&c.PinnedTTL, 2*time.Second)
	def(&c.AckWait, 3*time.Second)
	def(&c.StartWait, time.Minute)
	def(&c.Patience, 20*time.Second)
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
}

// Cluster is this instance's place among the others: a facade over the
// connection (conn), the update log (updates) and the poller leases
// (leases), with the shared state (State) and the transcripts
// (Transcripts) beside them.
type Cluster struct {
	*conn
	*updates
	*leases
	state *State
	// objects and stateKV keep the transcripts and their records, for
	// Transcripts.
	objects jsapi.ObjectStore
	stateKV jsapi.KeyValue
	// stopBackground stops writing the spooled usage records.
	stopBackground context.CancelFunc
}

// Connect connects to NATS and makes sure the stream, consumers, buckets
// and object store exist (any instance may be first). While NATS cannot
// be reached it waits for it until ctx ends; what NATS refuses for good
// is a Refusal.
func Connect(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg.defaults()
	if cfg.Instance == "" {
		return nil, errors.New("cluster: Config.Instance is empty")
	}
	h := &health{log: cfg.Log}
	closed := make(chan struct{})
	opts := append([]nats.Option{nats.Name("brainbot " + cfg.Instance), nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(reconnectDelay), nats.Timeout(5 * time.Second),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if !nc.IsClosed() { // closed by Close: a stop, not an outage
				h.failed("connection", cmp.Or(err, nats.ErrDisconnected))
			}
		})}, clientLog(cfg.Log)...)
	nc, err := dial(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := checkServerVersion(nc.ConnectedServerVersion()); err != nil {
		nc.Close()
		return nil, &Refusal{fmt.Errorf("cluster: NATS at %s: %w", Redact(cfg.URL), err)}
	}
	js, err := jsapi.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	cn := &conn{cfg: cfg, nc: nc, js: js, log: cfg.Log, health: h, closed: closed}
	b, err := cn.ensure(ctx)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c := assemble(cn, b)
	bg, stop := context.WithCancel(context.Background())
	c.stopBackground = stop
	if cfg.SpoolDir != "" {
		sp, err := newSpool(cfg.SpoolDir, cfg.Log)
		if err != nil {
			stop()
			nc.Close()
			return nil, err
		}
		c.state.tally.spool = sp
		go sp.run(bg, spoolInterval, func(ctx context.Context, u state.Usage) error {
			ctx, cancel := context.WithTimeout(ctx, 2*attemptTimeout)
			defer cancel()
			return c.state.writeUsage(ctx, u)
		})
	}
	return c, nil
}

// reconnectDelay is how long the client waits before it tries the NATS
// servers again after its rounds-th round of them failed: hardly at all
// the first time, so that a dropped connection to a server that is up
// comes back long before the others take this instance for gone
// (presence.absentFor); half a second and a random tenth after that,
// as nats.ReconnectWait would, so that instances back from an outage
// do not all knock at once.
func reconnectDelay(rounds int) time.Duration {
	if rounds <= 1 {
		return 20 * time.Millisecond
	}
	return 500*time.Millisecond + rand.N(100*time.Millisecond)
}

// assemble gives each part of the cluster the buckets it keeps and the
// parts it asks.
func assemble(cn *conn, b buckets) *Cluster {
	members := &membership{conn: cn, kv: b.members, awaited: map[string]*awaitedMember{}}
	u := &updates{conn: cn, stream: b.stream, offsets: b.state, members: members,
		claims: newClaims(cn.cfg.AckWait),
		marks:  &marks{conn: cn, answered: b.answered, progress: b.progress},
		locks:  &convLocks{conn: cn, kv: b.progress, members: members, held: map[string]*convLock{}},
		owned:  map[int]bool{}}
	l := &leases{conn: cn, kv: b.leases, members: members, polled: map[string]bool{}}
	u.dropLeases = l.dropHeldBy
	return &Cluster{
		conn:    cn,
		updates: u,
		leases:  l,
		state: &State{
			records:    &records{conn: cn, kv: b.state, updates: u},
			tally:      &tally{conn: cn, daily: b.daily},
			buttonSets: &buttonSets{conn: cn, kv: b.buttons},
			memories:   &memories{conn: cn, kv: b.notes},
			schedules:  &schedules{conn: cn, kv: b.schedules},
			panelRuns:  &panelRuns{conn: cn, kv: b.panels, members: members, ownRuns: map[string]bool{}},
		},
		objects: b.objects,
		stateKV: b.state,
	}
}

// spoolInterval is how often kept usage records are tried again.
const spoolInterval = 2 * time.Second

// Close stops writing kept records and closes the connection. It returns
// once the connection's last callbacks have run: nothing is logged of it
// after.
func (c *Cluster) Close() {
	c.stopBackground()
	c.nc.Close()
	<-c.closed
}

// clientLog routes what the NATS client would otherwise write to stderr
// on its own (its errors without a call to return them to: a slow
// consumer, a write to a reset connection, a consumer gone inactive), and
// its reconnections, through log: every line is one of brainbot's.
func clientLog(log *zap.Logger) []nats.Option {
	return []nats.Option{
		nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
			fields := []zap.Field{zap.String("server", nc.ConnectedUrlRedacted()), zap.Error(err)}
			if sub != nil {
				fields = append(fields, zap.String("subject", sub.Subject))
			}
			log.Warn("NATS client error", fields...)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS reconnected", zap.String("server", nc.ConnectedUrlRedacted()),
				zap.Uint64("reconnects", nc.Stats().Reconnects))
		}),
	}
}

// Instance is this instance's name.
func (c *Cluster) Instance() string { return c.cfg.Instance }

// Partitions is the number of partitions.
func (c *Cluster) Partitions() int { return c.cfg.Partitions }

// State returns the shared state.
func (c *Cluster) State() *State { return c.state }

// ServerInfo is what Ping learns of NATS.
type ServerInfo struct {
	// Version is the version of the nats-server that answered.
	Version string
	// Cluster is the NATS cluster's name, "" for a single server.
	Cluster string
	// Servers counts the servers the client knows of: 1 for a single
	// server, the cluster's members (as their INFO lists them) else.
	Servers int
}

// Ping connects to url and checks the server's version and JetStream, for
// `brainbot doctor` and run's preflight. A server that cannot be reached
// is an error; what no retry changes (credentials, a server too old,
// JetStream off) is a Refusal.
func Ping(ctx context.Context, url string) (ServerInfo, error) {
	// Its errors come back from the calls: none is written to stderr.
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		err = fmt.Errorf("connect to %s: %w", Redact(url), err)
		if refusedConnect(err) {
			return ServerInfo{}, &Refusal{err}
		}
		return ServerInfo{}, err
	}
	defer nc.Close()
	info := ServerInfo{Version: nc.ConnectedServerVersion(), Cluster: nc.ConnectedClusterName(), Servers: 1}
	if info.Cluster != "" {
		info.Servers = max(1, len(nc.Servers()))
	}
	if err := checkServerVersion(info.Version); err != nil {
		return info, &Refusal{fmt.Errorf("NATS at %s: %w", Redact(url), err)}
	}
	js, err := jsapi.New(nc)
	if err != nil {
		return info, err
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		err = fmt.Errorf("JetStream at %s: %w", Redact(url), err)
		if errors.Is(err, jsapi.ErrJetStreamNotEnabled) || errors.Is(err, jsapi.ErrJetStreamNotEnabledForAccount) {
			return info, &Refusal{err}
		}
		return info, err
	}
	return info, nil
}

// Redact drops credentials from NATS URLs, for messages.
func Redact(u string) string {
	var out []string
	for _, one := range strings.Split(u, ",") {
		if at := strings.LastIndex(one, "@"); at >= 0 {
			scheme, _, ok := strings.Cut(one, "://")
			if ok {
				one = scheme + "://***@" + one[at+1:]
			} else {
				one = "***@" + one[at+1:]
			}
		}
		out = append(out, one)
	}
	return strings.Join(out, ",")
}

// Status is what this instance does for the cluster, for /readyz and
// /metrics.
type Status struct {
	Instance   string
	Polled     []string // bots this instance polls
	Partitions []int    // partitions this instance consumes
	// Connected says whether this instance is connected to NATS now, and
	// Reconnects how often it has had to connect again since it started.
	Connected  bool
	Reconnects uint64
	// UnavailableSince is when JetStream stopped answering this
	// instance's calls (zero: it answers), UnavailableOp the call and
	// UnavailableErr the error of the last one; Outages counts the
	// outages since the start.
	UnavailableSince time.Time
	UnavailableOp    string
	UnavailableErr   error
	Outages          uint64
}

// Members lists the instances sharing the partitions, named as Assign
// takes them (each one's partitions are Assign(members, it, Partitions)):
// the live ones and, right after an outage, the ones not back yet.
func (c *Cluster) Members(ctx context.Context) ([]string, error) {
	members, err := c.updates.members.view(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the members: %w", err)
	}
	return members, nil
}

// Status reports the bots polled, the partitions owned and the NATS
// connection.
func (c *Cluster) Status() Status {
	s := c.conn.status()
	s.Polled = c.leases.list()
	s.Partitions = c.ownedList()
	return s
}

// keyPart makes s usable in a KV key or a subject token: letters, digits,
// '-' and '_' stay; everything else becomes '_'.
func keyPart(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}
