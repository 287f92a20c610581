package bot

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"go.uber.org/zap"
)

// runner is one bot's Telegram client: it (re)connects with backoff and
// long-polls until stopped.
type runner struct {
	m     *Manager
	id    string
	token string // never logged
	log   *zap.Logger

	mu      sync.Mutex
	ctx     context.Context // nil until run starts and after stop
	cancel  context.CancelFunc
	stopped bool
	client  *tgbot.Bot
	me      self
	// lastPoll is when Telegram last answered getUpdates (unix ns; 0:
	// never).
	lastPoll atomic.Int64
	// polling: this instance polls the bot (always, without a cluster).
	polling atomic.Bool
	// albums gathers the messages of each album into one.
	albums *albums
	// registered is the command list and description Telegram has, as
	// JSON; registering serialises registrations.
	registered  string
	registering sync.Mutex
}

func (m *Manager) newRunner(id, token string) *runner {
	return &runner{m: m, id: id, token: token, log: m.log.With(zap.String("bot", id)), albums: newAlbums(m.enqueue, &m.work)}
}

// stop ends the runner's polling; requests it already accepted go on.
func (r *runner) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	r.ctx = nil
	if r.cancel != nil {
		r.cancel()
	}
}

// errPollStopped says why a polling session ended early.
var errPollStopped = errors.New("polling stopped")

func (r *runner) run(parent context.Context) {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(parent)
	r.ctx, r.cancel = ctx, cancel
	r.mu.Unlock()
	defer cancel()

	retry := r.retries()
	for {
		started := time.Now()
		err := r.serve(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > r.m.cfg.RetryMax {
			retry.reset() // it ran fine for a while: a new problem
		}
		r.log.Error("telegram bot not running; retrying", zap.String("cause", describeTelegramError(err)),
			zap.Error(err), zap.Duration("retry_in", retry.next))
		if !retry.wait(ctx) {
			return
		}
	}
}

// backoff is the wait between retries of a call to Telegram or NATS: it
// starts at Config.RetryMin and doubles up to max.
type backoff struct {
	min, max, next time.Duration
}

// retries is the runner's backoff, up to Config.RetryMax.
func (r *runner) retries() *backoff {
	return &backoff{min: r.m.cfg.RetryMin, max: r.m.cfg.RetryMax, next: r.m.cfg.RetryMin}
}

// wait sleeps for the next wait, then doubles it; false when ctx ended
// first.
func (b *backoff) wait(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(b.next):
	}
	b.next = min(2*b.next, b.max)
	return true
}

// reset starts the waits again from the first.
func (b *backoff) reset() { b.next = b.min }

// describeTelegramError explains the failures an admin must act on.
func describeTelegramError(err error) string {
	switch {
	case errors.Is(err, tgbot.ErrorUnauthorized):
		return "token rejected by Telegram (401): check the brain's token"
	case errors.Is(err, tgbot.ErrorConflict):
		return "another process polls this token (409): stop it or use another token"
	}
	return "telegram unreachable"
}

// serve connects, replays the journal once per process, and long-polls
// until ctx ends (nil) or Telegram rejects the token or reports a second
// poller (the error).
func (r *runner) serve(ctx context.Context) error {
	if r.m.cfg.Cluster != nil {
		return r.serveShared(ctx)
	}
	offset, err := r.m.cfg.Store.Offset(ctx, r.poller())
	if err != nil {
		return err
	}
	// The handler only journals and enqueues.
	lp, err := r.newLongPoll(ctx, offset, func(_ context.Context, u *models.Update) bool {
		r.accept(u, nil)
		return true
	})
	if err != nil {
		return err
	}
	defer lp.stop()
	me, err := r.connect(ctx, lp.client)
	if err != nil {
		return err
	}
	r.polling.Store(true)
	if r.m.takeReplay(r.id) {
		r.m.replay(ctx, r)
	}
	r.log.Info("telegram bot polling", zap.String("username", me.username))
	return lp.run(ctx)
}

// connect asks Telegram who the bot is (getMe) and makes client the one
// replies go out through.
func (r *runner) connect(ctx context.Context, client *tgbot.Bot) (self, error) {
	me, err := client.GetMe(ctx)
	if err != nil {
		return self{}, err
	}
	// Telegram answered: the bot is connected before its first long poll
	// returns, which may take PollTimeout when nobody writes.
	r.polled()
	who := self{id: me.ID, username: me.Username}
	r.mu.Lock()
	r.client, r.me = client, who
	r.mu.Unlock()
	r.brainChanged()
	return who, nil
}

// longPoll is a bot's getUpdates client: updates reach its handler one at
// a time, in order, and each is confirmed to Telegram (through the confirm
// gate) only once the handler is done with it.
type longPoll struct {
	client *tgbot.Bot
	ctx    context.Context
	stop   context.CancelFunc

	mu    sync.Mutex
	fatal error // why polling stopped: token rejected, or a second poller
}

// newLongPoll makes the bot's polling client, starting at offset. handle
// gets every decodable update (undecodable ones are skipped and told);
// false leaves the update unconfirmed, for polling to stop.
func (r *runner) newLongPoll(ctx context.Context, offset int64, handle func(context.Context, *models.Update) bool) (*longPoll, error) {
	lp := &longPoll{}
	lp.ctx, lp.stop = context.WithCancel(ctx)
	gate := newConfirmGate(&http.Client{Timeout: r.m.cfg.PollTimeout + 15*time.Second}, r.polled)
	client, err := tgbot.New(r.token,
		tgbot.WithServerURL(strings.TrimRight(r.m.cfg.APIURL, "/")),
		tgbot.WithSkipGetMe(), // called by the caller, under its context and retry
		tgbot.WithHTTPClient(r.m.cfg.PollTimeout, gate),
		tgbot.WithInitialOffset(offset),
		// The handler must stay fast; running it in the polling worker
		// keeps updates in order.
		tgbot.WithNotAsyncHandlers(),
		tgbot.WithDefaultHandler(func(_ context.Context, _ *tgbot.Bot, u *models.Update) {
			handled := r.contain(stageIntake, u, nil, func() bool {
				if bad, ok := gate.takeUndecodable(u.ID); ok {
					r.skipUndecodable(u.ID, bad)
					return true
				}
				return handle(lp.ctx, u)
			})
			if handled {
				gate.handled(u.ID)
			}
		}),
		tgbot.WithErrorsHandler(func(err error) {
			if errors.Is(err, tgbot.ErrorUnauthorized) || errors.Is(err, tgbot.ErrorConflict) {
				lp.mu.Lock()
				lp.fatal = err
				lp.mu.Unlock()
				lp.stop()
				return
			}
			r.log.Warn("telegram polling error", zap.Error(err))
		}),
	)
	if err != nil {
		lp.stop()
		return nil, err
	}
	lp.client = client
	return lp, nil
}

// run long-polls until ctx (newLongPoll's) ends (nil) or Telegram rejects
// the token or reports a second poller (the error).
func (lp *longPoll) run(ctx context.Context) error {
	defer lp.stop()
	lp.client.Start(lp.ctx)
	lp.mu.Lock()
	defer lp.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return nil
	case lp.fatal != nil:
		return lp.fatal
	}
	return errPollStopped
}

// polled records that Telegram answered the bot just now (getMe, or a
// getUpdates call).
func (r *runner) polled() {
	now := time.Now()
	r.lastPoll.Store(now.UnixNano())
	r.m.cfg.Metrics.LastPoll.WithLabelValues(r.id).Set(float64(now.Unix()))
}

// poller names this brain's Telegram bot for the update offset: the
// number before the token's colon is the bot's public id, and update ids
// count per Telegram bot.
func (r *runner) poller() string {
	botNumber, _, _ := strings.Cut(r.token, ":")
	return r.id + "@" + botNumber
}

// current returns the client and the bot's Telegram identity once
// connected.
func (r *runner) current() (*tgbot.Bot, self) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.client, r.me
}

// brainChanged registers the brain's command list and description with
// Telegram, in the background: a failing Bot API must never hold up
// polling. It is counted with the pollers, so Run does not return while it
// still talks to Telegram.
func (r *runner) brainChanged() {
	r.mu.Lock()
	ctx := r.ctx
	connected := r.client != nil
	r.mu.Unlock()
	if ctx == nil || !connected {
		return
	}
	r.m.pollers.Add(1)
	go func() {
		defer r.m.pollers.Done()
		r.register(ctx)
	}()
}

// register sets the bot's command list and description unless Telegram
// already has them, retrying with backoff until it succeeds, Telegram
// refuses them for good, or ctx ends.
func (r *runner) register(ctx context.Context) {
	r.registering.Lock() // one registration at a time, the newest brain last
	defer r.registering.Unlock()
	b := r.m.brain(r.id)
	client, _ := r.current()
	if b == nil || client == nil {
		return
	}
	cmds := commandList(b, r.m.pipeline.panels.onPanel(r.id))
	key, _ := json.Marshal([]any{cmds, b.Description})
	r.mu.Lock()
	same := r.registered == string(key)
	r.mu.Unlock()
	if same {
		return
	}
	retry := r.retries()
	for {
		err := r.m.pipeline.caller.retry(ctx, "setMyCommands", func(ctx context.Context) error {
			if _, err := client.SetMyCommands(ctx, &tgbot.SetMyCommandsParams{Commands: cmds}); err != nil {
				return err
			}
			_, err := client.SetMyDescription(ctx, &tgbot.SetMyDescriptionParams{Description: b.Description})
			return err
		})
		if err == nil {
			r.mu.Lock()
			r.registered = string(key)
			r.mu.Unlock()
			return
		}
		if ctx.Err() != nil {
			return
		}
		if isPermanent(err) {
			r.log.Warn("Telegram refused the command list or description", zap.Error(err))
			return
		}
		r.log.Warn("could not register the command list and description; retrying", zap.Error(err), zap.Duration("retry_in", retry.next))
		if !retry.wait(ctx) {
			return
		}
	}
}
