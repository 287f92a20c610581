package jetstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/state"
)

// UsageReport sums the usage records in the usage stream of the cluster
// at url that f selects, per bot (and user) and mode: for `brainbot usage`
// in a cluster, which joins none.
func UsageReport(ctx context.Context, url string, f state.UsageFilter) ([]state.UsageLine, error) {
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", Redact(url), err)
	}
	defer nc.Close()
	js, err := jsapi.New(nc)
	if err != nil {
		return nil, err
	}
	return usageReport(ctx, js, f)
}

// tally counts, in brainbot_daily, each user's messages per UTC day and
// what the requests cost, and keeps one record per request in the usage
// stream (in the spool while NATS cannot take it).
type tally struct {
	conn  *conn
	daily jsapi.KeyValue
	spool *spool // nil: no Config.SpoolDir
}

func day(t time.Time) string { return t.UTC().Format("20060102") }

// TakeDaily counts one message for the user today unless limit (> 0) is
// reached (then ok is false and nothing is counted).
func (t *tally) TakeDaily(ctx context.Context, bot string, user int64, limit int, now time.Time) (ok bool, resetAt time.Time, err error) {
	resetAt = state.NextReset(now)
	key := fmt.Sprintf("count.%s.%s.%d", day(now), keyPart(bot), user)
	err = t.conn.change(ctx, t.daily, key, func(old []byte, _ bool) ([]byte, bool) {
		n, _ := strconv.Atoi(string(old))
		if limit > 0 && n >= limit {
			ok = false
			return nil, false
		}
		ok = true
		return []byte(strconv.Itoa(n + 1)), true
	})
	if err != nil {
		return false, resetAt, fmt.Errorf("count daily message: %w", err)
	}
	return ok, resetAt, nil
}

// DailyCount is how many messages the user sent on now's UTC day.
func (t *tally) DailyCount(ctx context.Context, bot string, user int64, now time.Time) (int, error) {
	val, _, err := t.conn.get(ctx, t.daily, fmt.Sprintf("count.%s.%s.%d", day(now), keyPart(bot), user))
	n, _ := strconv.Atoi(string(val))
	return n, wrap("read daily count", err)
}

func spentKey(now time.Time, bot string, user int64) string {
	who := "all"
	if user > 0 {
		who = strconv.FormatInt(user, 10)
	}
	return fmt.Sprintf("spent.%s.%s.%s", day(now), keyPart(bot), who)
}

// SpentToday is what the bot's requests cost on now's UTC day; with
// user > 0, only that user's.
func (t *tally) SpentToday(ctx context.Context, bot string, user int64, now time.Time) (float64, error) {
	val, _, err := t.conn.get(ctx, t.daily, spentKey(now, bot, user))
	usd, _ := strconv.ParseFloat(string(val), 64)
	return usd, wrap("spent today", err)
}

// RecordUsage appends the request's record to the usage stream and adds
// its cost to the day's spending of the bot and of the user. A record
// NATS cannot take now is kept in the spool (Config.SpoolDir) and written
// when it is back.
func (t *tally) RecordUsage(ctx context.Context, u state.Usage) error {
	err := t.writeUsage(ctx, u)
	if !errors.Is(err, state.ErrUnavailable) || t.spool == nil {
		return err
	}
	if kerr := t.spool.keep(u); kerr != nil {
		return fmt.Errorf("%w (and could not keep it for later: %w)", err, kerr)
	}
	t.conn.log.Info("usage record kept until NATS is back", zap.String("request_id", u.RequestID), zap.Error(err))
	return nil
}

// writeUsage publishes u (once: its message id is the request, who and
// what, and the time) and adds its cost to the day's spending.
func (t *tally) writeUsage(ctx context.Context, u state.Usage) error {
	rec, err := json.Marshal(u)
	if err != nil {
		return err
	}
	msg := nats.NewMsg("brainbot.usage." + keyPart(u.Bot))
	msg.Data = rec
	msg.Header.Set(nats.MsgIdHdr, fmt.Sprintf("%s/%s/%d/%s/%s@%d", u.RequestID, u.Bot, u.User, u.Mode, u.Outcome, u.At.UnixNano()))
	err = t.conn.patiently(ctx, "record usage", func(ctx context.Context) error {
		_, err := t.conn.js.PublishMsg(ctx, msg)
		return err
	})
	if err != nil {
		return err
	}
	usd := u.ClaudeUSD + u.OpenAIUSD
	if usd == 0 {
		return nil
	}
	for _, user := range []int64{0, u.User} {
		err := t.conn.change(ctx, t.daily, spentKey(u.At, u.Bot, user), func(old []byte, _ bool) ([]byte, bool) {
			v, _ := strconv.ParseFloat(string(old), 64)
			return []byte(strconv.FormatFloat(v+usd, 'g', -1, 64)), true
		})
		if err != nil {
			return fmt.Errorf("record spending: %w", err)
		}
	}
	return nil
}

// UsageReport sums the usage records f selects, per bot (and user) and
// mode.
func (t *tally) UsageReport(ctx context.Context, f state.UsageFilter) ([]state.UsageLine, error) {
	return usageReport(ctx, t.conn.js, f)
}

func usageReport(ctx context.Context, js jsapi.JetStream, f state.UsageFilter) ([]state.UsageLine, error) {
	stream, err := js.Stream(ctx, UsageStream)
	if errors.Is(err, jsapi.ErrStreamNotFound) {
		return nil, nil // no instance has run yet
	}
	if err != nil {
		return nil, fmt.Errorf("usage stream: %w", err)
	}
	subject := "brainbot.usage.>"
	if f.Bot != "" {
		subject = "brainbot.usage." + keyPart(f.Bot)
	}
	type key struct {
		bot  string
		user int64
		mode string
	}
	sums := map[key]*state.UsageLine{}
	err = eachUsage(ctx, stream, jsapi.OrderedConsumerConfig{FilterSubjects: []string{subject},
		DeliverPolicy: jsapi.DeliverByStartTimePolicy, OptStartTime: &f.Since}, func(_ uint64, u state.Usage) {
		if f.Bot != "" && u.Bot != f.Bot || u.At.Before(f.Since) {
			return
		}
		k := key{bot: u.Bot, mode: u.Mode}
		if f.ByUser {
			k.user = u.User
		}
		l := sums[k]
		if l == nil {
			l = &state.UsageLine{Bot: k.bot, User: k.user, Mode: k.mode}
			sums[k] = l
		}
		l.Add(u.Line())
	})
	if err != nil {
		return nil, err
	}
	out := make([]state.UsageLine, 0, len(sums))
	for _, l := range sums {
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b state.UsageLine) int {
		return cmp.Or(cmp.Compare(a.Bot, b.Bot), cmp.Compare(a.User, b.User), cmp.Compare(a.Mode, b.Mode))
	})
	return out, nil
}

// eachUsage calls fn with each usage record of stream that the consumer
// cfg selects, in order, up to the last one stored when it began.
func eachUsage(ctx context.Context, stream jsapi.Stream, cfg jsapi.OrderedConsumerConfig, fn func(seq uint64, u state.Usage)) error {
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("usage stream: %w", err)
	}
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("usage stream: %w", err)
	}
	last := info.State.LastSeq
	for seen := uint64(0); seen < last; {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return err
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			meta, err := msg.Metadata()
			if err != nil {
				return err
			}
			seen = meta.Sequence.Stream
			var u state.Usage
			if json.Unmarshal(msg.Data(), &u) == nil {
				fn(seen, u)
			}
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if n == 0 {
			break // nothing more matches the filter
		}
	}
	return nil
}
