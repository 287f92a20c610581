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
package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/bot/store"
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
	// heartbeat (default 3s).
	MemberTTL time.Duration
	// PinnedTTL is how long a partition stays pinned to an instance that
	// stopped pulling (default 3s).
	PinnedTTL time.Duration
	// AckWait is how long a message may go without a sign of work before
	// it is redelivered (default 10s; the holder signals five times as
	// often, so only a process stalled for 8s loses its claim). A dead
	// instance's messages wait this long before they are answered
	// elsewhere.
	AckWait time.Duration
	// Replicas is the replication of the streams and buckets (default 1;
	// 3 on a three-node cluster).
	Replicas int
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
	def(&c.MemberTTL, 3*time.Second)
	def(&c.PinnedTTL, 3*time.Second)
	def(&c.AckWait, 10*time.Second)
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
}

// Cluster is this instance's connection to the others.
type Cluster struct {
	cfg Config
	nc  *nats.Conn
	js  jetstream.JetStream
	log *zap.Logger

	leases, members, answered, progress, state, daily, panels jetstream.KeyValue
	objects                                                   jetstream.ObjectStore
	stream                                                    jetstream.Stream
	// buttons: what the buttons under the bots' messages mean (buttons.go).
	buttons jetstream.KeyValue

	mu      sync.Mutex
	polled  map[string]bool // bots whose lease this instance holds
	owned   map[int]bool    // partitions this instance pulls
	workers map[int]*worker
	handle  func(*Delivery)
	// stopWork ends Work's loop, which closes workDone once it stopped
	// its workers.
	stopWork context.CancelFunc
	workDone chan struct{}

	heldMu sync.Mutex
	// held are the updates handed to this instance and not yet done, by
	// stream sequence: kept alive, handed back on Release.
	held      map[uint64]jetstream.Msg
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
	nc, err := nats.Connect(cfg.URL, nats.Name("brainbot "+cfg.Instance), nats.MaxReconnects(-1),
		nats.ReconnectWait(500*time.Millisecond), nats.Timeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("cluster: connect to %s: %w", Redact(cfg.URL), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c := &Cluster{cfg: cfg, nc: nc, js: js, log: cfg.Log, polled: map[string]bool{}, owned: map[int]bool{},
		held: map[uint64]jetstream.Msg{}, released: make(chan struct{})}
	if err := c.ensure(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// Close closes the connection.
func (c *Cluster) Close() { c.nc.Close() }

// Instance is this instance's name.
func (c *Cluster) Instance() string { return c.cfg.Instance }

// Partitions is the number of partitions.
func (c *Cluster) Partitions() int { return c.cfg.Partitions }

// Check reports whether NATS is connected and JetStream answers (for
// readiness and doctor).
func (c *Cluster) Check(ctx context.Context) error {
	if !c.nc.IsConnected() {
		return fmt.Errorf("not connected to NATS (%s)", c.nc.Status())
	}
	if _, err := c.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("JetStream: %w", err)
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
	js, err := jetstream.New(nc)
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

func (c *Cluster) ensure(ctx context.Context) error {
	n := c.cfg.Partitions
	stream, err := c.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        Stream,
		Description: "brainbot: Telegram updates, by conversation partition",
		Subjects:    []string{subjectPrefix + ".>"},
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source:      subjectPrefix + ".*.*.*",
			Destination: fmt.Sprintf("%s.{{partition(%d,1,2,3)}}.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}", partPrefix, n),
		},
		Retention:  jetstream.WorkQueuePolicy,
		Storage:    jetstream.FileStorage,
		Replicas:   c.cfg.Replicas,
		Duplicates: 10 * time.Minute,
		MaxAge:     7 * 24 * time.Hour,
	})
	if err != nil {
		return fmt.Errorf("cluster: stream %s: %w", Stream, err)
	}
	c.stream = stream
	for p := range n {
		if _, err := stream.CreateOrUpdateConsumer(ctx, c.consumerConfig(p)); err != nil {
			return fmt.Errorf("cluster: consumer of partition %d: %w", p, err)
		}
	}
	if _, err := c.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        UsageStream,
		Description: "brainbot: one record per request that ran the model",
		Subjects:    []string{"brainbot.usage.>"},
		Storage:     jetstream.FileStorage,
		Replicas:    c.cfg.Replicas,
		MaxAge:      90 * 24 * time.Hour,
	}); err != nil {
		return fmt.Errorf("cluster: stream %s: %w", UsageStream, err)
	}
	kv := func(name, what string, ttl time.Duration) (jetstream.KeyValue, error) {
		b, err := c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: name, Description: what, TTL: ttl, Replicas: c.cfg.Replicas, Storage: jetstream.FileStorage,
		})
		if err != nil {
			return nil, fmt.Errorf("cluster: bucket %s: %w", name, err)
		}
		return b, nil
	}
	if c.leases, err = kv(leaseBucket, "brainbot: which instance polls each bot", c.cfg.LeaseTTL); err != nil {
		return err
	}
	if c.members, err = kv(memberBucket, "brainbot: live instances", c.cfg.MemberTTL); err != nil {
		return err
	}
	if c.answered, err = kv(answerBucket, "brainbot: updates answered", 24*time.Hour); err != nil {
		return err
	}
	if c.progress, err = kv(progBucket, "brainbot: the work on updates not answered yet (charged, attempts)", 24*time.Hour); err != nil {
		return err
	}
	if c.state, err = kv(stateBucket, "brainbot: sessions, voice toggles, update offsets", 0); err != nil {
		return err
	}
	if c.daily, err = kv(dailyBucket, "brainbot: daily message counters and spending", 48*time.Hour); err != nil {
		return err
	}
	if c.panels, err = kv(panelBucket, "brainbot: panel runs and the chats they run in", panelTTL); err != nil {
		return err
	}
	if c.buttons, err = kv(buttonBucket, "brainbot: what the buttons under the bots' messages mean", store.MaxButtonsAge); err != nil {
		return err
	}
	c.objects, err = c.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: objectBucket, Description: "brainbot: Claude CLI session transcripts", Replicas: c.cfg.Replicas,
		Storage: jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("cluster: object store %s: %w", objectBucket, err)
	}
	return nil
}

func consumerName(p int) string { return fmt.Sprintf("partition-%d", p) }

func (c *Cluster) consumerConfig(p int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        consumerName(p),
		Description:    fmt.Sprintf("brainbot: conversations of partition %d", p),
		FilterSubject:  fmt.Sprintf("%s.%d.>", partPrefix, p),
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        c.cfg.AckWait,
		MaxDeliver:     -1,
		MaxAckPending:  10000,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
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
}

// Status reports the bots polled, the partitions owned and the NATS
// connection.
func (c *Cluster) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{Instance: c.cfg.Instance, Connected: c.nc.IsConnected(), Reconnects: c.nc.Stats().Reconnects}
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
