// Package cluster lets several brainbot instances share their bots through
// NATS JetStream (BRAINBOT_NATS_URL). It uses JetStream's own means and
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
// State (sessions, toggles, counters, usage) lives in KV (state.go) and the
// CLI's session transcripts in an object store (transcripts.go).
package jetstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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
	// StartWait bounds how long Connect waits for NATS to answer and to
	// create what brainbot keeps there (default 1m).
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
	def(&c.PinnedTTL, 2*time.Second)
	def(&c.AckWait, 3*time.Second)
	def(&c.StartWait, time.Minute)
	def(&c.Patience, 20*time.Second)
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
}

// Cluster is this instance's connection to the others.
type Cluster struct {
	cfg Config
	nc  *nats.Conn
	js  jsapi.JetStream
	log *zap.Logger

	leases, members, answered, progress, state, daily, panels jsapi.KeyValue
	objects                                                   jsapi.ObjectStore
	stream                                                    jsapi.Stream
	health                                                    *health
	locks                                                     convLocks
	spool                                                     *spool
	stopBackground                                            context.CancelFunc
	// buttons: what the buttons under the bots' messages mean (buttons.go).
	buttons jsapi.KeyValue

	mu      sync.Mutex
	polled  map[string]bool // bots whose lease this instance holds
	ownRuns map[string]bool // panel runs this process runs
	owned   map[int]bool    // partitions this instance pulls
	workers map[int]*worker
	handle  func(*Delivery)
	// stopWork ends Work's loop, which closes workDone once it stopped
	// its workers.
	stopWork context.CancelFunc
	workDone chan struct{}
	// leaving is closed once Work's loop is told to stop.
	leaving <-chan struct{}

	heldMu sync.Mutex
	// held are the updates handed to this instance and not yet done, by
	// stream sequence: kept alive, handed back on Release.
	held      map[uint64]jsapi.Msg
	released  chan struct{}
	closeOnce sync.Once
}

// Connect connects to NATS and makes sure the stream, consumers, buckets
// and object store exist (any instance may be first).
func Connect(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg.defaults()
	if cfg.Instance == "" {
		return nil, errors.New("cluster: Config.Instance is empty")
	}
	h := &health{log: cfg.Log}
	nc, err := nats.Connect(cfg.URL, nats.Name("brainbot "+cfg.Instance), nats.MaxReconnects(-1),
		nats.ReconnectWait(500*time.Millisecond), nats.Timeout(5*time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { h.failed("connection", cmp.Or(err, nats.ErrDisconnected)) }))
	if err != nil {
		return nil, fmt.Errorf("cluster: connect to %s: %w", Redact(cfg.URL), err)
	}
	js, err := jsapi.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c := &Cluster{cfg: cfg, nc: nc, js: js, log: cfg.Log, polled: map[string]bool{}, owned: map[int]bool{}, ownRuns: map[string]bool{},
		held: map[uint64]jsapi.Msg{}, released: make(chan struct{}), health: h,
		locks: convLocks{held: map[string]*convLock{}}}
	if err := c.ensure(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	bg, stop := context.WithCancel(context.Background())
	c.stopBackground = stop
	if cfg.SpoolDir != "" {
		if c.spool, err = newSpool(cfg.SpoolDir, cfg.Log); err != nil {
			stop()
			nc.Close()
			return nil, err
		}
		go c.spool.run(bg, spoolInterval, func(ctx context.Context, u state.Usage) error {
			ctx, cancel := context.WithTimeout(ctx, 2*attemptTimeout)
			defer cancel()
			return c.writeUsage(ctx, u)
		})
	}
	return c, nil
}

// spoolInterval is how often kept usage records are tried again.
const spoolInterval = 2 * time.Second

// Close stops writing kept records and closes the connection.
func (c *Cluster) Close() {
	c.stopBackground()
	c.nc.Close()
}

// Instance is this instance's name.
func (c *Cluster) Instance() string { return c.cfg.Instance }

// Partitions is the number of partitions.
func (c *Cluster) Partitions() int { return c.cfg.Partitions }

// Check reports whether NATS is connected and JetStream answers (for
// readiness and doctor).
func (c *Cluster) Check(ctx context.Context) error {
	if !c.nc.IsConnected() {
		c.health.failed("check NATS", nats.ErrDisconnected)
		return fmt.Errorf("not connected to NATS (%s): messages wait for it", c.nc.Status())
	}
	if _, err := c.js.AccountInfo(ctx); err != nil {
		c.health.failed("check JetStream", err)
		return fmt.Errorf("NATS JetStream does not answer (messages wait for it): %w", err)
	}
	// A stream or bucket may still be without its quorum: the calls that
	// meet that say so, and the heartbeat says when it is over.
	if st := c.health.outage(); !st.UnavailableSince.IsZero() {
		return fmt.Errorf("NATS JetStream unavailable for %v (%s: %v): messages wait for it",
			time.Since(st.UnavailableSince).Round(time.Second), st.UnavailableOp, st.UnavailableErr)
	}
	return nil
}

// Ping connects to url and checks JetStream, for `brainbot doctor`.
func Ping(ctx context.Context, url string) error {
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", Redact(url), err)
	}
	defer nc.Close()
	js, err := jsapi.New(nc)
	if err != nil {
		return err
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("JetStream at %s: %w", Redact(url), err)
	}
	return nil
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

// ensure creates or updates the streams, consumers, buckets and object
// store, each as one step: any instance may be first, or several at once.
// A step the servers do not answer in time (a fresh cluster electing its
// leaders, busy with the others' steps) is tried again, until
// Config.StartWait from the start.
func (c *Cluster) ensure(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartWait)
	defer cancel()
	n := c.cfg.Partitions
	step := func(what string, do func(ctx context.Context) error) error { return c.creating(ctx, what, do) }
	err := step("stream "+Stream, func(ctx context.Context) error {
		stream, err := c.createOrUpdateStream(ctx, jsapi.StreamConfig{
			Name:             Stream,
			Description:      "brainbot: Telegram updates, by conversation partition",
			Subjects:         []string{subjectPrefix + ".>"},
			SubjectTransform: partitioning(n),
			Retention:        jsapi.WorkQueuePolicy,
			Storage:          jsapi.FileStorage,
			Replicas:         c.cfg.Replicas,
			Duplicates:       10 * time.Minute,
			MaxAge:           7 * 24 * time.Hour,
		})
		c.stream = stream
		return err
	})
	for p := range n {
		if err == nil {
			err = step(fmt.Sprintf("consumer of partition %d", p), func(ctx context.Context) error {
				_, err := c.stream.CreateOrUpdateConsumer(ctx, c.consumerConfig(p))
				return err
			})
		}
	}
	if err == nil {
		err = step("stream "+UsageStream, func(ctx context.Context) error {
			_, err := c.createOrUpdateStream(ctx, jsapi.StreamConfig{
				Name:        UsageStream,
				Description: "brainbot: one record per request that ran the model",
				Subjects:    []string{"brainbot.usage.>"},
				Storage:     jsapi.FileStorage,
				Replicas:    c.cfg.Replicas,
				MaxAge:      90 * 24 * time.Hour,
				// A record kept while NATS was away and written when it
				// came back may be written twice: the second is dropped.
				Duplicates: time.Hour,
			})
			return err
		})
	}
	kv := func(into *jsapi.KeyValue, name, what string, ttl time.Duration) {
		if err != nil {
			return
		}
		err = step("bucket "+name, func(ctx context.Context) error {
			cfg := jsapi.KeyValueConfig{
				Bucket: name, Description: what, TTL: ttl, Replicas: c.cfg.Replicas, Storage: jsapi.FileStorage,
			}
			b, err := c.js.CreateKeyValue(ctx, cfg)
			if errors.Is(err, jsapi.ErrBucketExists) {
				b, err = c.js.CreateOrUpdateKeyValue(ctx, cfg) // another replication, an older release
			}
			*into = b
			return err
		})
	}
	kv(&c.leases, leaseBucket, "brainbot: which instance polls each bot", c.cfg.LeaseTTL)
	kv(&c.members, memberBucket, "brainbot: live instances", c.cfg.MemberTTL)
	kv(&c.answered, answerBucket, "brainbot: updates answered", 24*time.Hour)
	kv(&c.progress, progBucket, "brainbot: the work on updates not answered yet (charged, attempts)", 24*time.Hour)
	kv(&c.state, stateBucket, "brainbot: sessions, voice toggles, update offsets", 0)
	kv(&c.daily, dailyBucket, "brainbot: daily message counters and spending", 48*time.Hour)
	kv(&c.panels, panelBucket, "brainbot: panel runs and the chats they run in", panelTTL)
	kv(&c.buttons, buttonBucket, "brainbot: what the buttons under the bots' messages mean", state.MaxButtonsAge)
	if err == nil {
		err = step("object store "+objectBucket, func(ctx context.Context) error {
			cfg := jsapi.ObjectStoreConfig{
				Bucket: objectBucket, Description: "brainbot: Claude CLI session transcripts", Replicas: c.cfg.Replicas,
				Storage: jsapi.FileStorage,
			}
			var err error
			c.objects, err = c.js.CreateObjectStore(ctx, cfg)
			if errors.Is(err, jsapi.ErrBucketExists) {
				c.objects, err = c.js.CreateOrUpdateObjectStore(ctx, cfg)
			}
			return err
		})
	}
	return err
}

// createOrUpdateStream creates the stream, or updates it where its
// configuration differs (another replication, an older release). Create
// comes first: on a fresh cluster every instance starting at once creates
// the same streams, and creating one with the same configuration is
// idempotent, where updating one still being created waits on its
// leader.
func (c *Cluster) createOrUpdateStream(ctx context.Context, cfg jsapi.StreamConfig) (jsapi.Stream, error) {
	s, err := c.js.CreateStream(ctx, cfg)
	if errors.Is(err, jsapi.ErrStreamNameAlreadyInUse) {
		return c.js.UpdateStream(ctx, cfg)
	}
	return s, err
}

// creatingTimeout bounds one try of a creation step: on a fresh
// three-node cluster, with other instances creating at once, JetStream
// may take seconds to answer one.
const creatingTimeout = 10 * time.Second

// creating runs the creation step what until it succeeds or ctx ends,
// trying again after any error: until then the servers may be electing a
// leader, or answering another instance that creates the same. The first
// failure is logged, so an admin whose NATS does not answer sees why the
// start waits.
func (c *Cluster) creating(ctx context.Context, what string, do func(ctx context.Context) error) error {
	wait := 100 * time.Millisecond
	for tries := 1; ; tries++ {
		actx, cancel := context.WithTimeout(ctx, creatingTimeout)
		err := do(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cluster: NATS JetStream at %s did not create %s within %v (%d tries): %w",
				Redact(c.cfg.URL), what, c.cfg.StartWait, tries, err)
		}
		if tries == 1 {
			c.log.Warn("waiting for NATS JetStream: could not create "+what+" yet; trying again",
				zap.Duration("for_up_to", c.cfg.StartWait), zap.Error(err))
		}
		sleep(ctx, wait)
		wait = min(2*wait, 2*time.Second)
	}
}

func consumerName(p int) string { return fmt.Sprintf("partition-%d", p) }

// partitioning is how the stream files an update published under
// brainbot.in.<bot>.<chat>.<thread> into one of n partitions: by a hash
// of the conversation, so a conversation's updates share a partition.
func partitioning(n int) *jsapi.SubjectTransformConfig {
	return &jsapi.SubjectTransformConfig{
		Source:      subjectPrefix + ".*.*.*",
		Destination: fmt.Sprintf("%s.{{partition(%d,1,2,3)}}.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}", partPrefix, n),
	}
}

// partitionSubjects are the stored subjects of partition p's updates.
func partitionSubjects(p int) string { return fmt.Sprintf("%s.%d.>", partPrefix, p) }

func (c *Cluster) consumerConfig(p int) jsapi.ConsumerConfig {
	return jsapi.ConsumerConfig{
		Durable:        consumerName(p),
		Description:    fmt.Sprintf("brainbot: conversations of partition %d", p),
		FilterSubject:  partitionSubjects(p),
		AckPolicy:      jsapi.AckExplicitPolicy,
		AckWait:        c.cfg.AckWait,
		MaxDeliver:     -1,
		MaxAckPending:  10000,
		DeliverPolicy:  jsapi.DeliverAllPolicy,
		PriorityPolicy: jsapi.PriorityPolicyPinned,
		PinnedTTL:      c.cfg.PinnedTTL,
		PriorityGroups: []string{group},
	}
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

// Status reports the bots polled, the partitions owned and the NATS
// connection.
func (c *Cluster) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.health.outage()
	s.Instance, s.Connected, s.Reconnects = c.cfg.Instance, c.nc.IsConnected(), c.nc.Stats().Reconnects
	for b := range c.polled {
		s.Polled = append(s.Polled, b)
	}
	for p := range c.owned {
		s.Partitions = append(s.Partitions, p)
	}
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
