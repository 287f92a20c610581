package bot

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/conversation"
	"brainbot/bot/telegram"
	"brainbot/message"
	"brainbot/state"
)

// runner is one bot's Telegram client: it (re)connects with backoff and
// long-polls (or sets its webhook) until stopped.
type runner struct {
	m     *Manager
	id    string
	token string // never logged
	log   *zap.Logger

	mu      sync.Mutex
	ctx     context.Context // nil until run starts and after stop
	cancel  context.CancelFunc
	stopped bool
	client  *telegram.Client
	me      message.Identity
	// lastPoll is when Telegram last answered getUpdates (unix ns; 0:
	// never).
	lastPoll atomic.Int64
	// rejected: Telegram refused the token since it last answered; the
	// bot is not ready until it answers again.
	rejected atomic.Bool
	// polling: this instance polls the bot (always, without a cluster).
	polling atomic.Bool
	// registered is the command list and description Telegram has, as
	// JSON; registering serialises registrations.
	registered  string
	registering sync.Mutex
}

func (m *Manager) newRunner(id, token string) *runner {
	return &runner{m: m, id: id, token: token, log: m.log.With(zap.String("bot", id))}
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
		r.failed(err)
		r.log.Error("telegram bot not running; retrying", zap.String("cause", cause(err)),
			zap.Error(err), zap.Duration("retry_in_ms", retry.next))
		if !retry.wait(ctx) {
			return
		}
	}
}

// cause names what an admin must look at for err: the state's backend
// when it is unavailable (the offset, say), else Telegram's side.
func cause(err error) string {
	if why := state.Cause(err); why != "" {
		return why
	}
	return telegram.Describe(err)
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

// serve connects and takes the bot's updates in until ctx ends (nil) or
// Telegram rejects the token or reports a second poller (the error): by
// its webhook, or by polling while this instance holds the bot's lease
// (at once, unless instances share the bot).
func (r *runner) serve(ctx context.Context) error {
	client, err := r.m.transport.Client(r.id, r.token, r.log)
	if err != nil {
		return err
	}
	me, err := client.Connect(ctx)
	if err != nil {
		return err
	}
	r.connected(client, me)
	r.log.Info("telegram bot connected", zap.String("username", me.Username))
	switch {
	case r.m.cfg.WebhookURL != "":
		r.setWebhook(ctx, client)
		<-ctx.Done()
		return nil
	}
	return r.m.cfg.State.Lease(ctx, r.id, func(ctx context.Context) error { return r.poll(ctx, client) })
}

// poll long-polls from the stored offset; each update is confirmed to
// Telegram only once it is stored.
func (r *runner) poll(ctx context.Context, client *telegram.Client) error {
	offset, err := r.m.cfg.State.Offset(ctx, r.poller())
	if err != nil {
		return err
	}
	r.polling.Store(true)
	defer r.polling.Store(false)
	r.log.Info("telegram bot polling", zap.String("username", r.identity().Username))
	return client.Poll(ctx, offset, r.polled, func(ctx context.Context, id int64, raw []byte) bool {
		env := message.Envelope{Bot: r.id, Me: r.identity(), UpdateID: id, Raw: raw, Received: time.Now()}
		_, env.Key, _ = telegram.KeyOf(r.id, raw)
		return r.store(ctx, env) == nil
	})
}

// store takes env in: into the log, with the poller's offset, retrying
// until it is stored or ctx ends (polling waits meanwhile, so the update
// stays unconfirmed and Telegram keeps it).
func (r *runner) store(ctx context.Context, env message.Envelope) error {
	// At most 10s apart: polling waits for it.
	retry := &backoff{min: r.m.cfg.RetryMin, max: 10 * time.Second, next: r.m.cfg.RetryMin}
	for {
		err := r.m.intake.Take(env, func() error { return r.m.cfg.State.Append(ctx, r.poller(), env) })
		if err == nil || ctx.Err() != nil {
			return err
		}
		r.log.Warn("could not store the update; retrying", zap.Int64("update_id", env.UpdateID), zap.Error(err))
		if !retry.wait(ctx) {
			return ctx.Err()
		}
	}
}

// connected makes client the one replies go out through, and registers
// the bot's commands.
func (r *runner) connected(client *telegram.Client, me message.Identity) {
	// Telegram answered: the bot is connected before its first long poll
	// returns, which may take PollTimeout when nobody writes.
	r.polled()
	r.mu.Lock()
	r.client, r.me = client, me
	r.mu.Unlock()
	r.m.connected(r.id, client, me)
	r.brainChanged()
}

// setWebhook tells Telegram where to post the bot's updates, retrying
// until it is done or ctx ends.
func (r *runner) setWebhook(ctx context.Context, client *telegram.Client) {
	url := r.m.webhookURL(r.id)
	retry := r.retries()
	for {
		err := client.SetWebhook(ctx, url)
		if err == nil {
			r.log.Info("telegram webhook set", zap.String("url", url))
			return
		}
		if ctx.Err() != nil {
			return
		}
		r.log.Error("could not set the webhook; retrying", zap.Error(err), zap.Duration("retry_in_ms", retry.next))
		if !retry.wait(ctx) {
			return
		}
	}
}

// polled records that Telegram answered the bot just now (getMe, or a
// getUpdates call).
func (r *runner) polled() {
	now := time.Now()
	if r.rejected.Swap(false) {
		r.m.keepSpares(r.id) // its spares again
	}
	r.lastPoll.Store(now.UnixNano())
	r.m.cfg.Metrics.LastPoll.WithLabelValues(r.id).Set(float64(now.Unix()))
}

// failed notes why the bot stopped: a token Telegram refused makes it
// not ready at once, rather than when its last answer grows old, and
// ends its spares: no message can come for it.
func (r *runner) failed(err error) {
	if telegram.TokenRejected(err) && !r.rejected.Swap(true) {
		r.m.keepSpares(r.id)
	}
}

// poller names this brain's Telegram bot for the update offset: the
// number before the token's colon is the bot's public id, and update ids
// count per Telegram bot.
func (r *runner) poller() string { return r.id + "@" + telegram.BotNumber(r.token) }

// current returns the client and the bot's Telegram identity once
// connected.
func (r *runner) current() (*telegram.Client, message.Identity) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.client, r.me
}

func (r *runner) identity() message.Identity {
	_, me := r.current()
	return me
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
	cmds := conversation.Commands(b, r.m.panels.OnPanel(r.id))
	key, _ := json.Marshal([]any{cmds, b.Description})
	r.mu.Lock()
	same := r.registered == string(key)
	r.mu.Unlock()
	if same {
		return
	}
	retry := r.retries()
	for {
		err := client.Register(ctx, cmds, b.Description)
		if err == nil {
			r.mu.Lock()
			r.registered = string(key)
			r.mu.Unlock()
			return
		}
		if ctx.Err() != nil {
			return
		}
		if telegram.IsPermanent(err) {
			r.log.Warn("Telegram refused the command list or description", zap.Error(err))
			return
		}
		r.log.Warn("could not register the command list and description; retrying", zap.Error(err), zap.Duration("retry_in_ms", retry.next))
		if !retry.wait(ctx) {
			return
		}
	}
}
