package bot

// Many instances, one set of bots (BRAINBOT_NATS_URL). The bot package
// knows nothing of NATS: it needs what these interfaces say, and
// cmd/brainbot hands it package cluster's implementations. Without a
// Cluster in Config everything here is idle and the bots run as one
// process always did.
//
// With one, a runner connects every bot (its client sends the replies of
// the conversations this instance answers) but polls Telegram only while
// it holds the bot's lease; each update it polls is published, and
// confirmed to Telegram only once published. Updates come back through
// Cluster.Work, for the conversations this instance owns, in order, and
// take the path a polled update takes in a single process (accept), with
// the delivery in place of the journal entry: it is acknowledged when the
// message is answered (finish), handed back when shutdown cut it short.

import (
	"context"
	"net/http"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/message"
	"brainbot/bot/store"
	"brainbot/bot/telegram"
)

// Store is the state the bots keep: *store.Store (SQLite, one process) or
// the cluster's shared state.
type Store interface {
	Session(ctx context.Context, c store.Conversation) (store.Session, bool, error)
	UseSession(ctx context.Context, c store.Conversation, id string, now time.Time) error
	ResetSession(ctx context.Context, c store.Conversation, now time.Time) (string, error)
	Voice(ctx context.Context, bot string, user int64) (on, set bool, err error)
	SetVoice(ctx context.Context, bot string, user int64, on bool) error
	TakeDaily(ctx context.Context, bot string, user int64, limit int, now time.Time) (bool, time.Time, error)
	SpentToday(ctx context.Context, bot string, user int64, now time.Time) (float64, error)
	RecordUsage(ctx context.Context, u store.Usage) error
	Journal(ctx context.Context, e store.Entry, poller string, updateID int64) (int64, error)
	Charged(ctx context.Context, id int64, mode string) error
	Attempt(ctx context.Context, id int64, mode string) error
	Done(ctx context.Context, id int64) error
	Pending(ctx context.Context, bot string) ([]store.Entry, error)
	Offset(ctx context.Context, poller string) (int64, error)
	SetOffset(ctx context.Context, poller string, updateID int64) error
	Prune(ctx context.Context, now time.Time, r store.Retention) (store.Pruned, error)
	DailyCount(ctx context.Context, bot string, user int64, now time.Time) (int, error)
	StartPanel(ctx context.Context, r store.PanelRun) error
	SavePanel(ctx context.Context, id string, run []byte, finished bool, now time.Time) error
	RunningPanels(ctx context.Context) ([]store.PanelRun, error)
}

// Cluster shares the bots with other instances.
type Cluster interface {
	// Lease runs poll while this instance is the one polling bot, until
	// ctx ends; poll's context ends when the lease is lost.
	Lease(ctx context.Context, bot string, poll func(ctx context.Context))
	// Publish stores an update; it returns once it is stored.
	Publish(ctx context.Context, bot string, chat int64, thread int, updateID int64, update []byte) error
	// Work hands this instance the updates of the conversations it owns,
	// in order per conversation, until ctx ends. handle must not block.
	Work(ctx context.Context, handle func(Delivery))
}

// Delivery is one update to answer.
type Delivery interface {
	BotID() string
	Update() []byte
	// Redelivered: handed out before (another instance may have begun it).
	Redelivered() bool
	// Done: answered (or needing no answer). Abandon: hand it back.
	Done(answered bool)
	Abandon()
}

// Transcripts moves the CLI's session transcripts between instances.
type Transcripts interface {
	// Restore brings the stored transcript here; changed: the local copy
	// was stale or missing.
	Restore(ctx context.Context, bot, session string) (changed bool, err error)
	Save(ctx context.Context, bot, session string) error
}

// publish stores env for whichever instance owns its conversation,
// retrying until it is stored or ctx ends (false), then records the
// offset.
func (r *runner) publish(ctx context.Context, env message.Envelope) bool {
	// At most 10s apart: polling waits for it.
	retry := &backoff{min: r.m.cfg.RetryMin, max: 10 * time.Second, next: r.m.cfg.RetryMin}
	for {
		err := r.m.cfg.Cluster.Publish(ctx, env.Bot, env.Key.Chat, env.Key.Thread, env.UpdateID, env.Raw)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return false
		}
		r.log.Warn("could not publish the update; retrying", zap.Int64("update_id", env.UpdateID), zap.Error(err))
		if !retry.wait(ctx) {
			return false
		}
	}
	r.confirm(env.UpdateID, nil)
	return true
}

// deliver takes an update of a conversation this instance owns into the
// bot's intake, as if polled here.
func (m *Manager) deliver(d Delivery) {
	env := message.Envelope{Bot: d.BotID(), Raw: d.Update(), Received: time.Now()}
	env.UpdateID, env.Key, _ = telegram.KeyOf(env.Bot, env.Raw)
	// A bot connects at start; wait for it rather than hand the update back
	// to a server that would hand it to us again.
	for range 300 {
		m.mu.Lock()
		r, brainHere := m.bots[d.BotID()], m.brains[d.BotID()] != nil
		m.mu.Unlock()
		switch {
		case isClosed(m.stopping):
			d.Abandon()
			return
		case r == nil && !brainHere:
			m.log.Warn("update for a bot this instance does not run; dropped (do all instances have the same brains?)",
				zap.String("bot", d.BotID()), zap.Int64("update_id", env.UpdateID))
			d.Done(false)
			return
		case r != nil:
			if client, me := r.current(); client != nil {
				env.Me = me
				r.contain(stageDelivery, env, d, func() bool {
					r.accept(env, d)
					return true
				})
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.Abandon()
}

// WebhookHandler serves Telegram's webhook calls, POST <path>/<bot id>: a
// call without the bot's secret token is refused (401) and stores
// nothing; an update is answered 200 once stored in the cluster's stream.
func (m *Manager) WebhookHandler() http.Handler {
	token := func(id string) (string, bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		r := m.bots[id]
		if r == nil {
			return "", false
		}
		return r.token, true
	}
	return telegram.WebhookHandler(token, func(ctx context.Context, env message.Envelope) error {
		return m.cfg.Cluster.Publish(ctx, env.Bot, env.Key.Chat, env.Key.Thread, env.UpdateID, env.Raw)
	}, m.log)
}
