package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/state"
)

// buckets are the handles of what brainbot keeps in JetStream, as ensure
// made sure they exist.
type buckets struct {
	stream                                                                               jsapi.Stream
	leases, members, answered, progress, state, daily, panels, buttons, notes, schedules jsapi.KeyValue
	objects                                                                              jsapi.ObjectStore
}

// ensure creates or updates the streams, consumers, buckets and object
// store, each as one step: any instance may be first, or several at once.
// A step the servers do not answer in time (a fresh cluster electing its
// leaders, busy with the others' steps) is tried again, until
// Config.StartWait from the start.
func (c *conn) ensure(ctx context.Context) (buckets, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartWait)
	defer cancel()
	var b buckets
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
		b.stream = stream
		return err
	})
	for p := range n {
		if err == nil {
			err = step(fmt.Sprintf("consumer of partition %d", p), func(ctx context.Context) error {
				_, err := b.stream.CreateOrUpdateConsumer(ctx, consumerConfig(c.cfg, p))
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
	kv(&b.leases, leaseBucket, "brainbot: which instance polls each bot", c.cfg.LeaseTTL)
	kv(&b.members, memberBucket, "brainbot: live instances", c.cfg.MemberTTL)
	kv(&b.answered, answerBucket, "brainbot: updates answered", 24*time.Hour)
	kv(&b.progress, progBucket, "brainbot: the work on updates not answered yet (charged, attempts)", 24*time.Hour)
	kv(&b.state, stateBucket, "brainbot: sessions, voice toggles, update offsets", 0)
	kv(&b.daily, dailyBucket, "brainbot: daily message counters and spending", 48*time.Hour)
	kv(&b.panels, panelBucket, "brainbot: panel runs and the chats they run in", panelTTL)
	kv(&b.buttons, buttonBucket, "brainbot: what the buttons under the bots' messages mean", state.MaxButtonsAge)
	// Kept until the user drops them or is forgotten: no age.
	kv(&b.notes, notesBucket, "brainbot: the notes personas keep about users", 0)
	// Reminders until they fire or are cancelled, contacts until the user
	// is forgotten: no age.
	kv(&b.schedules, schedBucket, "brainbot: reminders, and what check-ins go by", 0)
	if err == nil {
		err = step("object store "+objectBucket, func(ctx context.Context) error {
			cfg := jsapi.ObjectStoreConfig{
				Bucket: objectBucket, Description: "brainbot: Claude CLI session transcripts", Replicas: c.cfg.Replicas,
				Storage: jsapi.FileStorage,
			}
			var err error
			b.objects, err = c.js.CreateObjectStore(ctx, cfg)
			if errors.Is(err, jsapi.ErrBucketExists) {
				b.objects, err = c.js.CreateOrUpdateObjectStore(ctx, cfg)
			}
			return err
		})
	}
	return b, err
}

// createOrUpdateStream creates the stream, or updates it where its
// configuration differs (another replication, an older release). Create
// comes first: on a fresh cluster every instance starting at once creates
// the same streams, and creating one with the same configuration is
// idempotent, where updating one still being created waits on its
// leader.
func (c *conn) createOrUpdateStream(ctx context.Context, cfg jsapi.StreamConfig) (jsapi.Stream, error) {
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
// trying again after an error that may pass: until then the servers may
// be electing a leader, or answering another instance that creates the
// same. A refusal that no retry changes (permanent) ends it at once. The
// first failure is logged, so an admin whose NATS does not answer sees
// why the start waits; the error returned is the servers' last word, not
// the deadline that cut the last try.
func (c *conn) creating(ctx context.Context, what string, do func(ctx context.Context) error) error {
	wait := 100 * time.Millisecond
	var last error
	for tries := 1; ; tries++ {
		actx, cancel := context.WithTimeout(ctx, creatingTimeout)
		err := do(actx)
		cancel()
		if err == nil {
			return nil
		}
		if permanent(err) {
			return &Refusal{fmt.Errorf("cluster: NATS JetStream at %s refused to create %s: %w", Redact(c.cfg.URL), what, err)}
		}
		if last == nil || !errors.Is(err, context.DeadlineExceeded) {
			last = err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cluster: NATS JetStream at %s did not create %s within %v (%d tries): %w",
				Redact(c.cfg.URL), what, c.cfg.StartWait, tries, last)
		}
		if tries == 1 {
			c.log.Warn("waiting for NATS JetStream: could not create "+what+" yet; trying again",
				zap.Duration("for_up_to_ms", c.cfg.StartWait), zap.Error(err))
		}
		sleep(ctx, wait)
		wait = min(2*wait, 2*time.Second)
	}
}

// passingCodes are the JetStream API errors, other than 503, that a
// cluster still forming gives: peers not known yet, a leader not elected.
var passingCodes = []jsapi.ErrorCode{
	10005, // no suitable peers for placement
	10007, // JetStream cluster not assigned to this server
	10009, // JetStream cluster can not handle request
	10044, // server is not a member of the cluster
	10202, // cluster member change is in progress
	10059, // stream not found: another instance's creation not applied yet
	10014, // consumer not found: likewise
}

// permanent reports whether err is a refusal that trying again does not
// change: the server lacks a feature (the client found it dropped from
// the answer), or JetStream refused the configuration itself.
func permanent(err error) bool {
	var apiErr *jsapi.APIError
	switch {
	case errors.Is(err, jsapi.ErrStreamSubjectTransformNotSupported), errors.Is(err, jsapi.ErrStreamSourceSubjectTransformNotSupported),
		errors.Is(err, jsapi.ErrStreamSourceNotSupported), errors.Is(err, jsapi.ErrConsumerMultipleFilterSubjectsNotSupported),
		errors.Is(err, jsapi.ErrLimitMarkerTTLNotSupported):
		return true
	case unavailable(err):
		return false
	case errors.As(err, &apiErr):
		return !slices.Contains(passingCodes, apiErr.ErrorCode)
	}
	return false
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

func consumerConfig(cfg Config, p int) jsapi.ConsumerConfig {
	return jsapi.ConsumerConfig{
		Durable:        consumerName(p),
		Description:    fmt.Sprintf("brainbot: conversations of partition %d", p),
		FilterSubject:  partitionSubjects(p),
		AckPolicy:      jsapi.AckExplicitPolicy,
		AckWait:        cfg.AckWait,
		MaxDeliver:     -1,
		MaxAckPending:  10000,
		DeliverPolicy:  jsapi.DeliverAllPolicy,
		PriorityPolicy: jsapi.PriorityPolicyPinned,
		PinnedTTL:      cfg.PinnedTTL,
		PriorityGroups: []string{group},
	}
}
