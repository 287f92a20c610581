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
	"encoding/json"
	"net/http"
	"strings"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"go.uber.org/zap"

	"brainbot/bot/store"
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

// serveShared connects the bot and polls it while this instance holds its
// lease, until ctx ends.
func (r *runner) serveShared(ctx context.Context) error {
	client, err := tgbot.New(r.token,
		tgbot.WithServerURL(strings.TrimRight(r.m.cfg.APIURL, "/")),
		tgbot.WithSkipGetMe(),
		tgbot.WithHTTPClient(r.m.cfg.PollTimeout, &http.Client{Timeout: r.m.cfg.PollTimeout + 15*time.Second}),
	)
	if err != nil {
		return err
	}
	me, err := r.connect(ctx, client)
	if err != nil {
		return err
	}
	r.log.Info("telegram bot connected", zap.String("username", me.username))
	if r.m.cfg.WebhookURL != "" {
		r.setWebhook(ctx, client)
		<-ctx.Done()
		return nil
	}
	r.m.cfg.Cluster.Lease(ctx, r.id, func(ctx context.Context) {
		r.polling.Store(true)
		defer r.polling.Store(false)
		retry := r.retries()
		for {
			err := r.pollShared(ctx)
			if ctx.Err() != nil {
				return
			}
			r.log.Error("telegram polling stopped; retrying", zap.String("cause", describeTelegramError(err)),
				zap.Error(err), zap.Duration("retry_in", retry.next))
			if !retry.wait(ctx) {
				return
			}
		}
	})
	return nil
}

// pollShared long-polls from the shared offset and publishes each update;
// the gate confirms an update to Telegram only after it is published.
func (r *runner) pollShared(ctx context.Context) error {
	offset, err := r.m.cfg.Store.Offset(ctx, r.poller())
	if err != nil {
		return err
	}
	lp, err := r.newLongPoll(ctx, offset, func(ctx context.Context, u *models.Update) bool {
		// Not confirmed unless published: the next poller gets it again.
		return r.publish(ctx, u)
	})
	if err != nil {
		return err
	}
	defer lp.stop()
	// Telegram answers getUpdates only without a webhook (one may be left
	// from webhook mode).
	if _, err := lp.client.DeleteWebhook(ctx, &tgbot.DeleteWebhookParams{}); err != nil {
		return err
	}
	r.log.Info("telegram bot polling", zap.String("username", r.username()))
	return lp.run(ctx)
}

func (r *runner) username() string {
	_, me := r.current()
	return me.username
}

// publish stores u for whichever instance owns its conversation, retrying
// until it is stored or ctx ends (false), then records the offset.
func (r *runner) publish(ctx context.Context, u *models.Update) bool {
	data, err := json.Marshal(u)
	if err != nil {
		r.log.Error("update not encodable; skipped", zap.Int64("update_id", u.ID), zap.Error(err))
		r.confirm(u.ID, nil)
		return true
	}
	var chat int64
	thread := 0
	if msg := u.Message; msg != nil {
		chat = msg.Chat.ID
		if isGroup(msg.Chat) && msg.IsTopicMessage {
			thread = msg.MessageThreadID
		}
	}
	// At most 10s apart: polling waits for it.
	retry := &backoff{min: r.m.cfg.RetryMin, max: 10 * time.Second, next: r.m.cfg.RetryMin}
	for {
		err := r.m.cfg.Cluster.Publish(ctx, r.id, chat, thread, u.ID, data)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return false
		}
		r.log.Warn("could not publish the update; retrying", zap.Int64("update_id", u.ID), zap.Error(err))
		if !retry.wait(ctx) {
			return false
		}
	}
	r.confirm(u.ID, nil)
	return true
}

// deliver takes an update of a conversation this instance owns into the
// bot's intake, as if polled here.
func (m *Manager) deliver(d Delivery) {
	var u models.Update
	if err := json.Unmarshal(d.Update(), &u); err != nil {
		m.log.Error("shared update not decodable; dropped", zap.String("bot", d.BotID()), zap.Error(err))
		d.Done(false)
		return
	}
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
				zap.String("bot", d.BotID()), zap.Int64("update_id", u.ID))
			d.Done(false)
			return
		case r != nil:
			if client, _ := r.current(); client != nil {
				r.contain(stageDelivery, &u, d, func() bool {
					r.accept(&u, d)
					return true
				})
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.Abandon()
}
