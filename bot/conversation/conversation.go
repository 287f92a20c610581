// Package conversation is the pipeline of one message, from its
// conversation's queue to the one reply: access, commands, the daily
// limit and spending caps, files in (refused, or fetched and read), the
// reply mode, the Claude request and its two-turn flow, sessions and
// their transcripts, the reply through the chat's outbox, the usage
// record, the one summary line and the metrics.
//
// It reaches everything through ports declared here (ports.go): the
// outbox of a chat and the files a bot received (the transport), the
// state kept between messages, the agent (the Claude driver), and each
// message's progress (its log's deliveries). It imports neither the
// Telegram library nor NATS, and does not know which log runs.
//
// The path of one message, top to bottom: Serve decides what kind of
// answer the message gets; converse runs it through Claude; the outcome
// methods of request at the end send the one reply. Every path starts in
// begin and ends in the deferred finish, so each message finishes its
// deliveries and writes its summary line exactly once, whatever happens
// in between.
package conversation

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/contain"
	"brainbot/claude"
	"brainbot/message"
	"brainbot/metrics"
	"brainbot/output"
	"brainbot/pricing"
	"brainbot/state"
	"brainbot/sysprompt"
	"brainbot/toolspec"
)

// Config is what a pipeline needs. Every field but Transcriber, Speaker,
// Warmer and OnSecret is required.
type Config struct {
	// DataDir is BRAINBOT_DATA: the generated files are organised below it.
	DataDir string
	State   State
	Agent   Agent
	Chats   Chats
	// Brain returns the brain a bot had last (nil if it never had one): a
	// message taken in is answered with it even if the brain was removed
	// meanwhile.
	Brain func(bot string) *brain.Brain
	// Transcriber turns voice into text; nil (no OpenAI key) answers voice
	// messages with the brain's messages.text_only.
	Transcriber Transcriber
	// Speaker reads answers aloud (buttons.read_aloud); nil (no OpenAI
	// key): no 🔊 buttons.
	Speaker Speaker
	// FileAfterTurn sends a voice note or picture after the model's turn
	// two is over; by default it goes out as soon as the tool reports it
	// (claude.Request.OnFile).
	FileAfterTurn bool
	// MaxClaude caps concurrent Claude requests over all bots;
	// MaxWaitingPerBot and MaxWait bound one bot's requests waiting for
	// one (see bot.Config).
	MaxClaude, MaxWaitingPerBot int
	MaxWait                     time.Duration
	// QueueSize is the intake's, for the log of a message it turned away.
	QueueSize int
	// Panels run /panel. They stand on the pipeline's panel port
	// (PanelPort), so the caller makes them after New: it passes
	// something that reaches them once made, as it does for Chats.
	Panels Panels
	// Queues hold the messages waiting for the pipeline (the intake's),
	// which hand them to it: a forget drops the forgotten user's.
	Queues Queues
	// Warmer starts the Agent's processes ahead of messages (nil: the
	// Agent warms none). Spares is how many each bot keeps started ahead
	// of its new conversations; 0: none (BRAINBOT_SPARES).
	Warmer Warmer
	Spares int
	// Stopping is closed when no new Claude request may start.
	Stopping <-chan struct{}
	// LookupEnv resolves the references of brains' MCP servers, whose
	// values go to OnSecret (may be nil) before anything else.
	LookupEnv func(string) (string, bool)
	OnSecret  func(string)
	Now       func() time.Time
	Metrics   *metrics.Metrics
	Log       *zap.Logger
}

// Pipeline answers messages: everything between a conversation's queue
// and the reply. One pipeline serves every bot; a message's own state
// lives in its request.
type Pipeline struct {
	cfg    Config
	store  State
	claude Agent
	warmer Warmer // nil: none
	log    *zap.Logger
	// slots are the Claude requests allowed to run at once.
	slots   *slots
	budgets budgetWarnings
	// purse holds what the answers under way may cost (reserve.go).
	purse   *purse
	unset   unsetWarnings
	media   media
	panels  Panels
	queues  Queues
	answers answers
}

// New makes a pipeline.
func New(cfg Config) *Pipeline {
	return &Pipeline{
		cfg:    cfg,
		store:  cfg.State,
		claude: cfg.Agent,
		warmer: cfg.Warmer,
		log:    cfg.Log,
		panels: cfg.Panels,
		queues: cfg.Queues,
		slots: newSlots(cfg.MaxClaude, cfg.MaxWaitingPerBot, cfg.MaxWait, cfg.Metrics.ClaudeRunning,
			cfg.Metrics.ClaudeWaiting),
		media: media{transcriber: cfg.Transcriber, fetch: cfg.Chats.Fetch},
		purse: newPurse(cfg.Metrics),
	}
}

// request is one message's trip through the pipeline. It is owned by the
// one goroutine that serves it.
type request struct {
	ctx   context.Context
	in    *message.Inbound
	brain *brain.Brain // nil if the bot never had one
	log   *zap.Logger
	out   Outbox // the chat the answer goes to
	p     *Pipeline
	sum   summary
	// attach are the message's files as the model gets them (media.read).
	attach []claude.Attachment
	// keep: shutdown cut the request short; its deliveries go back to
	// their log, so it is answered later.
	keep bool
	// writing is the answer being written (nil until Claude is asked).
	writing *answer
	// allow is what the spending caps gave the answer (reserve.go),
	// released once its cost is recorded.
	allow allowance
}

// Serve answers one message from its conversation's queue.
func (p *Pipeline) Serve(ctx context.Context, in *message.Inbound) {
	r := p.begin(ctx, in)
	defer r.finish()
	defer r.contain()
	b := r.brain
	p.wrote(r)
	switch {
	case b == nil:
		r.drop("dropped")
	case in.Scheduled != nil:
		p.writeFirst(r)
	case in.ForOtherBot:
		r.drop("ignored")
	case !allowed(b, in.Sender):
		r.log.Info("user not allowed")
		r.notice("denied", b.Messages.Denied)
	case p.media.refused(r):
	case in.Command == "panel":
		p.startPanel(r)
	case in.Command == "forget":
		p.offerForget(r)
	case in.Command == "memory" && b.Memory.Enabled:
		p.showMemory(r)
	case in.Command == "reminders" && b.Reminders.Enabled:
		p.showReminders(r)
	case in.Command == "checkins" && b.CheckIns.Enabled:
		p.checkInsCommand(r)
	case in.Command != "":
		r.say("command", p.command(r))
	default:
		p.converse(r)
	}
}

// Busy answers a message its conversation's queue has no room for: told
// to wait (the first of a burst), or only recorded.
func (p *Pipeline) Busy(ctx context.Context, in *message.Inbound, tell bool) {
	p.serveAside(ctx, in, func(r *request) {
		if !tell {
			r.log.Info("conversation queue full: message dropped", zap.Int("queue_size", p.cfg.QueueSize))
			r.drop("busy, not told")
			return
		}
		r.log.Info("conversation queue full: message dropped, sender told to wait", zap.Int("queue_size", p.cfg.QueueSize))
		r.notice("busy", r.brain.Messages.Busy)
	})
}

// Stop answers /stop or a stop button beside the queue.
func (p *Pipeline) Stop(ctx context.Context, in *message.Inbound) { p.serveAside(ctx, in, p.stop) }

// Unreadable tells a message's sender it could not be read.
func (p *Pipeline) Unreadable(ctx context.Context, in *message.Inbound) {
	p.serveAside(ctx, in, func(r *request) { r.say("unreadable", r.brain.Messages.Unreadable) })
}

// Resend asks the sender of a message whose work started twice already
// (each time cut short) to send it again, unless it was answered
// meanwhile (in a cluster: an instance still at work on it when the
// server handed it out again).
func (p *Pipeline) Resend(ctx context.Context, in *message.Inbound) {
	p.serveAside(ctx, in, func(r *request) {
		if r.markAttempt() {
			r.notice("resend asked", ResendText)
		}
	})
}

// serveAside answers a message with answer, outside its queue.
func (p *Pipeline) serveAside(ctx context.Context, in *message.Inbound, answer func(*request)) {
	r := p.begin(ctx, in)
	defer r.finish()
	defer r.contain()
	if r.brain == nil {
		r.drop("dropped")
		return
	}
	answer(r)
}

func (p *Pipeline) begin(ctx context.Context, in *message.Inbound) *request {
	log := p.log.With(zap.String("request_id", in.RequestID), zap.String("bot", in.Key.Bot),
		zap.Int64("user", in.Sender), zap.Int64("chat", in.Key.Chat))
	return &request{
		ctx:   ctx,
		in:    in,
		brain: p.cfg.Brain(in.Key.Bot),
		log:   log,
		out:   outbox(p.cfg.Chats, in, log),
		p:     p,
		sum:   summary{outcome: "ok"},
	}
}

// converse runs the message through Claude and sends the reply.
func (p *Pipeline) converse(r *request) {
	mode, ok := p.admitAnswer(r)
	if !ok || !p.waitForSlot(r) {
		return
	}
	// Given back after the answer, or by a panic on the way.
	releaseSlot := sync.OnceFunc(p.slots.release)
	defer releaseSlot()
	if r.superseded(nil) {
		return
	}
	// Only now does work start: a message that never got this far is
	// replayed after a restart as if new, never met with "please resend".
	if !r.markAttempt() {
		return
	}
	r.sum.queueWait = time.Since(r.in.Arrived)
	// The status shows while the request runs, until the reply is out;
	// not while it waits, so a crowd waiting for Claude does not flood
	// Telegram with chat actions.
	stopAction := sync.OnceFunc(r.out.KeepAction(r.ctx, chatAction(mode)))
	defer stopAction()
	// ⏹ under a group's streamed answer: attached before the stream takes it.
	closeStop := p.offerStop(r, mode)
	st, onText := p.showProgress(r, mode)
	if st != nil {
		defer st.Cancel() // if a panic skips its Finish
	}
	r.writing = p.answers.open(r.in.Key, r.in.Sender, st)
	defer p.answers.end(r.writing)
	finishStream := func() {
		// Stopped before the final reply, which replaces what it showed.
		if st != nil {
			if firstShown := st.Finish(); !firstShown.IsZero() {
				r.sum.firstText = firstShown.Sub(r.in.Arrived)
			}
		}
	}
	var onFile func(*claude.Result)
	sent := false
	if mode != claude.Text && !p.cfg.FileAfterTurn {
		onFile = func(res *claude.Result) {
			sent = p.sendFile(r, res, func() { finishStream(); stopAction() })
		}
	}
	res, expired, err := p.ask(r, onText, onFile)
	closeStop()
	finishStream()
	releaseSlot()
	r.countToolCalls(res)
	r.sum.noteClaude(res)
	r.sum.ranClaude = true
	r.sum.openAI += openAICost(r.brain, mode, res, r.allow.speechBound())
	if !sent && r.superseded(res) {
		return
	}
	if expired && (err == nil || sent) {
		// Told once, with an answer: the new session is stored, so this
		// will not recur. A failure gets only the error message (never two
		// replies); the loss is told with the next answer if its session
		// was not kept.
		r.out.Text(r.ctx, r.brain.Messages.Expired, false)
	}
	p.settle(r, mode, res, err, sent, st != nil)
}

// admitAnswer lets the message on to Claude: its questions closed, within
// the caps and the daily limit (counted once, however often it is
// replayed), its files read, its mode chosen and its cost reserved. false:
// the message has had its reply.
func (p *Pipeline) admitAnswer(r *request) (claude.Mode, bool) {
	if r.in.Scheduled == nil { // what came due answers no question
		p.closeQuestions(r)
	}
	if !p.withinBudget(r) || !r.in.Progress.Charged() && !p.takeDaily(r) || !p.media.read(r) {
		return 0, false
	}
	mode, err := p.mode(r)
	if err != nil {
		r.fail("mode", err)
		return 0, false
	}
	if mode, err = p.reserveAnswer(r, mode); err != nil {
		return 0, false
	}
	r.sum.mode = mode
	// The daily limit has counted the message: a replay must not again.
	r.record("charge", r.in.Progress.MarkCharged)
	if p.warmer != nil {
		p.warmer.Expect(r.in.Key.String())
	}
	return mode, true
}

// settle gives the message the one reply its answer calls for: err is
// the answer's (ask), sent that its file went out as the tool made it,
// streamed that a draft showed the text as it came.
func (p *Pipeline) settle(r *request, mode claude.Mode, res *claude.Result, err error, sent, streamed bool) {
	switch {
	case errors.Is(err, errForgotten):
		r.sum.outcome = "forgotten" // nothing of it kept, nothing sent
	case sent && err != nil:
		// The answer is out; only the model's closing words are lost.
		r.log.Warn("turn two ended badly after its file was sent", zap.Error(err))
	case sent: // answered as soon as the tool reported the file (sendFile)
	case errors.Is(err, state.ErrUnavailable):
		r.fail("state", err) // handed back: answered once the store is back
	case errors.Is(err, claude.ErrInterrupted) && mode != claude.Text:
		p.dropStopped(r, res)
	case errors.Is(err, claude.ErrInterrupted) && r.writing.Pressed() && res != nil:
		r.keepPartial(res.Text)
	case errors.Is(err, claude.ErrInterrupted):
		r.sum.outcome = "stopped" // the /stop reply or the tap's notice told the user
		r.keepStopped(res, streamed)
	case err != nil && mode == claude.Speech && res != nil && res.Answered && res.Text != "" && r.ctx.Err() == nil && !errors.Is(err, claude.ErrBounded):
		// The words are there, only the voice failed. Not for a failed
		// turn 1, whose text is the CLI's error, nor for a request stopped
		// at a bound: the brain's owner said "no further".
		r.speechFailed("speech failed; sending the text reply instead", "claude", err, res.Text)
	case err != nil:
		r.fail("claude", err)
	case mode == claude.Text || askedQuestion(res):
		r.replyAnswer(res)
	default:
		paths, err := p.organize(r, res)
		r.replyFile(res, paths, err)
	}
}

// stop interrupts the turn the conversation's CLI is running (/stop, or a
// stop button: pressStop); after /stop the interrupted request ends
// without a reply of its own.
func (p *Pipeline) stop(r *request) {
	switch {
	case r.in.Kind == message.StopPressed:
		p.pressStop(r)
	case r.in.Kind == message.Edited:
		p.supersede(r)
	case !allowed(r.brain, r.in.Sender):
		r.log.Info("user not allowed")
		r.notice("denied", r.brain.Messages.Denied)
	case !p.stopsOwn(r):
	case p.claude.Interrupt(r.in.Key.String()):
		r.log.Info("turn stopped by /stop")
		p.cfg.Metrics.Stops.WithLabelValues(r.in.Key.Bot, "command").Inc()
		r.say("command", "Stopped. What next?")
	default:
		r.say("command", "There is nothing to stop.")
	}
}

// allowed reports whether access.allowed_users lets user talk to the bot.
func allowed(b *brain.Brain, user int64) bool {
	return len(b.Access.AllowedUsers) == 0 || slices.Contains(b.Access.AllowedUsers, user)
}

// openAICost prices the speech or image a request produced (0 when it
// produced none: a failed tool call is not billed by OpenAI), and the
// speech spoken while the model wrote, file or not. maxChars is the
// speech's bound (0: none): the tool spoke no more of the text.
func openAICost(b *brain.Brain, mode claude.Mode, res *claude.Result, maxChars int) float64 {
	if res == nil {
		return 0
	}
	var usd float64
	switch {
	case mode == claude.Speech && res.SpokenChars > 0:
		// Spoken while the model wrote: billed whether or not a file came
		// of it (a stop, a failure).
		usd, _ = pricing.Speech(b.TTS.Model, res.SpokenChars)
	case res.FilePath == "":
	case mode == claude.Speech:
		chars := utf8.RuneCountInString(res.Text)
		if maxChars > 0 {
			chars = min(chars, maxChars)
		}
		usd, _ = pricing.Speech(b.TTS.Model, chars)
	case mode == claude.Image:
		usd, _ = pricing.Image(b.Image.Model, b.Image.Size, b.Image.Quality)
	}
	return usd
}

// waitForSlot waits for the request's turn to run a Claude request; false
// means it was answered instead (too many waiting) or shutdown came first.
// A guest request waits as its caller's.
func (p *Pipeline) waitForSlot(r *request) bool {
	var caller int64
	if r.in.Guest != nil {
		caller = r.in.Sender
	}
	// Its place in line is its age: a message redelivered from an
	// instance that died goes before those that came here since.
	since := r.in.Received
	if since.IsZero() {
		since = r.in.Arrived
	}
	err := p.slots.acquire(r.ctx, r.in.Key.Bot, caller, since, p.startCost(r), p.cfg.Stopping)
	switch {
	case err == nil:
		return true
	case errors.Is(err, errNoSlot):
		r.log.Info("too many requests waiting for Claude: told the user to try again", zap.Error(err))
		r.notice("busy", r.brain.Messages.Busy)
	default:
		r.interrupted()
	}
	return false
}

// startCost is what starting the request's turn costs, for its place in
// its bot's line: a conversation whose process is warm goes before the
// cold ones that came shortly before it (its turn is a tenth of their
// start), and so does a new one while its bot has spares ready. A new
// one is one without a stored session, read only then; a guest answer is
// of another shape than the bot's own spares.
func (p *Pipeline) startCost(r *request) cost {
	switch {
	case p.warmer == nil:
		return cost{}
	case p.warmer.HasProcess(r.in.Key.String()):
		return cost{warm: true}
	case r.in.Guest != nil:
		return cost{}
	}
	n := p.warmer.ReadySpares(r.in.Key.Bot)
	if n == 0 {
		return cost{}
	}
	if _, stored, err := p.store.Session(r.ctx, r.in.Key); err != nil || stored {
		return cost{} // an error is told when ask reads it again
	}
	return cost{spares: n}
}

// record records a step of the request with its deliveries.
func (r *request) record(step string, mark func(context.Context, string) error) {
	if err := mark(r.ctx, r.sum.mode.String()); err != nil {
		r.log.Warn("could not journal the "+step, zap.Error(err))
	}
}

// markAttempt records that work on the message starts; false: another
// instance answers it (state.ErrSuperseded), and this one says nothing.
func (r *request) markAttempt() bool {
	err := r.in.Progress.MarkAttempt(r.ctx, r.sum.mode.String())
	switch {
	case errors.Is(err, state.ErrSuperseded):
		r.log.Info("message answered through a newer delivery; left to it", zap.Error(err))
		r.drop("superseded")
		return false
	case err != nil:
		// Unjournaled, a second attempt would not know it is one and send
		// the message again to a session that has it: handed back.
		r.fail("attempt", handBack(err))
		return false
	}
	return true
}

// takeDaily counts the message against the user's daily limit; false
// means the request has been answered (limit reached, or an error).
func (p *Pipeline) takeDaily(r *request) bool {
	ok, resetAt, err := p.store.TakeDaily(r.ctx, r.in.Key.Bot, r.in.Sender, r.brain.Limits.PerUserPerDay, p.cfg.Now())
	switch {
	case err != nil:
		r.fail("limit", err)
	case !ok:
		r.notice("limited", r.brain.Messages.LimitText(resetAt.Sub(p.cfg.Now())))
	}
	return err == nil && ok
}

// mode decides the reply kind: image when the brain can draw and the message
// asks for a picture, else speech when voice replies are on for the user,
// else text.
func (p *Pipeline) mode(r *request) (claude.Mode, error) {
	if r.in.Guest != nil {
		return claude.Text, nil // a guest answer is text
	}
	if r.brain.Image.Enabled && asksForImage(r.in.Text, r.brain.Image.Keywords) {
		return claude.Image, nil
	}
	if repliesInVoice(r.brain, r.in) {
		return claude.Speech, nil
	}
	on, err := p.voiceOn(r)
	if err != nil {
		return claude.Text, err
	}
	if on {
		return claude.Speech, nil
	}
	return claude.Text, nil
}

// voiceOn is the user's voice-reply setting: the brain's default
// (tts.enabled), or the user's own choice where the brain lets users
// toggle (tts.user_toggle), so a brain can also start with voice off.
func (p *Pipeline) voiceOn(r *request) (bool, error) {
	if !r.brain.TTS.UserToggle {
		return r.brain.TTS.Enabled, nil
	}
	on, set, err := p.store.Voice(r.ctx, r.in.Key.Bot, r.in.Sender)
	if err != nil || !set {
		return r.brain.TTS.Enabled, err
	}
	return on, nil
}

// ask runs the request in the conversation's session, starting a new
// session when there is none or the stored one is gone (expired reports
// the latter).
func (p *Pipeline) ask(r *request, onText func(string), onFile func(*claude.Result)) (res *claude.Result, expired bool, err error) {
	sess, ok, err := p.store.Session(r.ctx, r.in.Key)
	if err != nil {
		return nil, false, err
	}
	creq := p.claudeRequest(r, r.sum.mode)
	if err := p.withSchedule(r, &creq); err != nil {
		return nil, false, err
	}
	creq.OnText, creq.OnFile = onText, onFile
	// Without a session the driver names one: a new conversation (or the
	// first message after /reset) is served by a spare when one is ready.
	creq.SessionID, creq.Resume = sess.ID, ok
	withReply := creq.Context
	if creq.Context, err = p.withNotes(r, withReply, !ok); err != nil {
		return nil, false, err
	}
	// An earlier attempt may have sent the message to the session: the
	// driver keeps one copy of it there.
	creq.MessageID, creq.Retry = r.in.RequestID, r.in.Progress.Attempts() > 0
	if ok {
		// A process still warm here from earlier has not seen the turns
		// answered elsewhere since: it ends before the newer copy lands.
		release := func() { p.claude.End(r.in.Key.String()) }
		if err := p.store.Restore(r.ctx, r.in.Key.Bot, sess.ID, release); err != nil {
			return nil, false, fmt.Errorf("restore the session's transcript: %w", err)
		}
	}
	res, err = p.claude.Run(r.ctx, creq)
	if err != nil && creq.Resume && errors.Is(err, claude.ErrSessionNotFound) {
		r.log.Warn("stored session is gone; starting a new one", zap.String("lost_session", creq.SessionID))
		expired = true
		creq.SessionID, creq.Resume = "", false
		// The new session starts with the notes, as after /reset.
		if creq.Context, err = p.withNotes(r, withReply, true); err != nil {
			return nil, expired, err
		}
		res, err = p.claude.Run(r.ctx, creq)
	}
	// Keep the session the CLI reported (for a new conversation, the one
	// the driver named), or the resumed one once a request succeeded. A
	// CLI that failed before reporting one never created it: storing it
	// would make the next message's resume fail as a "lost" session.
	if res != nil && (res.SessionID != "" || err == nil && creq.SessionID != "") {
		if serr := p.keepSession(r, cmp.Or(res.SessionID, creq.SessionID)); serr != nil {
			return res, expired, serr
		}
	}
	return res, expired, err
}

// keepSession stores the session and its transcript before the answer
// goes out, so the conversation's next message, on any instance, goes on
// with all of it. A session or a transcript the store did not keep
// (a cluster that cannot reach NATS for now, or that holds a newer copy
// stored elsewhere meanwhile) hands the message back unanswered: an
// answer whose turn would be forgotten is not sent. The local copy with
// the turn, and the warm CLI holding it, are forgotten: the next attempt
// starts from the stored copy.
//
// The session of a user forgotten while the answer was written is not
// stored: its turn goes from this machine too (errForgotten).
func (p *Pipeline) keepSession(r *request, id string) error {
	if a := r.writing; a != nil {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.forgotten {
			p.discardSession(r.in.Key, id)
			return errForgotten
		}
	}
	if err := p.storeSession(r, id); err != nil {
		return err
	}
	if r.writing != nil {
		r.writing.kept = true
	}
	return nil
}

// storeSession stores the session's transcript and then the session.
func (p *Pipeline) storeSession(r *request, id string) error {
	ctx := context.WithoutCancel(r.ctx)
	if err := p.store.Save(ctx, r.in.Key.Bot, id); err != nil {
		p.store.Forget(r.in.Key.Bot, id)
		p.claude.End(r.in.Key.String())
		return fmt.Errorf("store the session's transcript: %w", handBack(err))
	}
	if err := p.store.UseSession(ctx, r.in.Key, id, p.cfg.Now()); err != nil {
		// Whatever the store refused for (NATS away, SQLite locked past
		// its busy timeout, a full disk), the answer waits for its session.
		return fmt.Errorf("save the session: %w", handBack(err))
	}
	return nil
}

// errNotStored is a write the store refused (SQLite locked past its busy
// timeout, a full disk) where the message must wait for it: as when the
// cluster's store is unavailable, the message is handed back.
var errNotStored = fmt.Errorf("not stored, %w", state.ErrUnavailable)

// handBack makes a store's error one that hands the message back.
func handBack(err error) error {
	if errors.Is(err, state.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", errNotStored, err)
}

// claudeRequest is what the driver needs from the brain and the message.
func (p *Pipeline) claudeRequest(r *request, mode claude.Mode) claude.Request {
	b := r.brain
	req := p.conversationRequest(b, r.in.Key.Bot, sysprompt.Facts{UserFirstName: r.in.FirstName, UserLanguage: r.in.Language,
		ChatType: r.in.ChatType}, r.log)
	req.Prompt, req.Mode, req.Attachments = prompt(r.in), mode, r.attach
	req.Context = replyContext(r.in)
	req.Notes = notesScope(r)
	if r.in.Guest != nil {
		req.Questions = false // a guest answer is one article: no buttons to tap under it
	}
	req.Conversation = r.in.Key.String()
	req.FilePrefix = output.Prefix(r.in.Key.Bot, r.in.Sender, time.Now())
	req.Speech = toolspec.SpeechSettings{Voice: b.TTS.Voice, Speed: b.TTS.Speed, Model: b.TTS.Model, Format: b.TTS.Format,
		MaxChars: r.allow.speechBound()}
	req.Image = toolspec.ImageSettings{Model: b.Image.Model, Size: b.Image.Size, Quality: b.Image.Quality, Style: b.Image.Style}
	return req
}

// conversationRequest is what every request of bot's conversations is
// started with, from its brain b: the one place it is made, for a message
// (claudeRequest) and for the spares started ahead of one (KeepSpares),
// so that a spare always fits.
func (p *Pipeline) conversationRequest(b *brain.Brain, bot string, facts sysprompt.Facts, log *zap.Logger) claude.Request {
	req := p.baseRequest(b, bot, "", facts, log)
	req.MaxTurns = b.Claude.MaxTurns
	req.Questions = b.Buttons.Questions // the question tool is in the MCP config, fixed at the spawn
	// So are the memory tools, and the schedule's beside them; whose notes
	// and reminders they keep is each request's.
	req.Memory = b.Memory.Enabled || b.Reminders.Enabled || b.CheckIns.Enabled
	p.brainTools(b, bot, log, &req)
	req.AllowedTools = append(req.AllowedTools, memoryTools(b)...)
	return req
}

// baseRequest is the one place a Claude request is made from a brain: a
// text request of bot (brain b) for prompt, with the brain's system prompt
// and its variables (facts about the message; the brain's are filled in
// here), model and bounds. The pipeline and panels add what theirs need.
func (p *Pipeline) baseRequest(b *brain.Brain, bot, prompt string, facts sysprompt.Facts, log *zap.Logger) claude.Request {
	facts.BotName, facts.Now, facts.Location = b.Name, p.cfg.Now(), b.Location()
	return claude.Request{
		Mode:              claude.Text,
		Prompt:            prompt,
		SystemPrompt:      b.SystemPrompt,
		PromptVars:        facts.Vars(),
		Model:             b.Claude.Model,
		BotID:             bot,
		MaxBudgetUSD:      b.Claude.MaxBudgetUSD,
		InactivityTimeout: b.Claude.Timeout.D(),
		Log:               log,
	}
}

// sendFile sends the voice note or picture of res as soon as the tool
// reported it, while the model still writes its closing words (Run
// returns after them, with the request's cost). done ends what showed
// while it was made. It reports whether the request is answered; not
// when its message was edited meanwhile (nothing is sent) or its session
// cannot be stored, which the request's end then tells.
func (p *Pipeline) sendFile(r *request, res *claude.Result, done func()) bool {
	if r.in.Superseded.Load() {
		return false // dropped with the file once the turn is over
	}
	// Stored before the answer goes out, as every answer's (keepSession).
	if err := p.keepSession(r, res.SessionID); err != nil {
		if !errors.Is(err, errForgotten) {
			r.log.Warn("session not stored; the file waits for the end of the turn", zap.Error(err))
		}
		return false
	}
	done()
	paths, err := p.organize(r, res)
	r.replyFile(res, paths, err)
	return true
}

// organize finds the file the tool wrote (the files, for a voice answer
// longer than one note), moves each under <kind>-output/bot-<id>/user-<uid>/
// and writes its sidecar.
func (p *Pipeline) organize(r *request, res *claude.Result) ([]string, error) {
	kind := output.Audio
	if r.sum.mode == claude.Image {
		kind = output.Image
	}
	start := time.Now()
	defer func() { r.sum.locate = time.Since(start) }()
	reported := res.FilePaths
	if len(reported) == 0 {
		reported = []string{res.FilePath}
	}
	var paths []string
	for _, file := range reported {
		path, err := output.Locate(filepath.Join(p.cfg.DataDir, kind.Dir()), res.FilePrefix, res.FileExt, file)
		if err == nil && slices.Contains(paths, path) {
			err = fmt.Errorf("output: %s reported twice or not found", file) // never a note twice, nor one missing
		}
		if err != nil {
			return nil, err
		}
		paths = append(paths, path)
	}
	for i, path := range paths {
		organised, err := output.Organize(p.cfg.DataDir, path, kind, r.in.Key.Bot, r.in.Sender)
		if err != nil {
			return nil, err
		}
		r.writeSidecar(res, organised)
		paths[i] = organised
	}
	return paths, nil
}

// The outcomes. Each sends at most the one reply and sets the summary's
// outcome; none finishes the request (serve's deferred finish does).

// say answers with one plain message that needs no model.
func (r *request) say(outcome, text string) {
	r.answer(outcome, func() error { return r.out.Text(r.ctx, text, false) })
}

// answer sends a reply that needs no model with send.
func (r *request) answer(outcome string, send func() error) {
	r.sum.outcome = outcome
	if err := r.timeSend(send); err != nil && !errors.Is(err, message.ErrBlocked) {
		r.sum.outcome = "failed"
	}
}

// notice answers with one plain message meant for the sender only: in a
// group only they see it (limits, access, busy...).
func (r *request) notice(outcome, text string) {
	if r.in.Scheduled != nil {
		r.unwritten(outcome)
		return
	}
	r.answer(outcome, func() error { return r.out.Notice(r.ctx, text, r.in.Sender) })
}

// replyText sends Claude's text, split and formatted.
func (r *request) replyText(text string) {
	if text == "" {
		r.fail("reply", errors.New("empty reply"))
		return
	}
	err := r.timeSend(func() error {
		if r.brain.Rich != brain.RichOff {
			if sent, err := r.out.Rich(r.ctx, text, r.brain.Rich == brain.RichAlways); sent {
				return err
			}
		}
		return r.out.Text(r.ctx, text, true)
	})
	switch {
	case errors.Is(err, message.ErrBlocked):
		r.sum.outcome = "blocked"
	case err != nil:
		r.fail("send", err)
	}
}

// replyFile sends the generated voice note or image found at paths (a
// voice answer longer than one note: each, in order; and the text too when
// the brain asks, or when the note holds only part of it). Speech that cannot be sent as a file falls back to its
// text.
func (r *request) replyFile(res *claude.Result, paths []string, located error) {
	speechText := ""
	textToo := r.brain.Image.SendTextToo
	if r.sum.mode == claude.Speech {
		// A note cut short (tts.max_chars, a spending cap) is followed by
		// all of the answer: the user can read what they did not hear.
		speechText, textToo = res.Text, r.brain.TTS.SendTextToo || r.spokenInPart(res.Text)
	}
	if located != nil {
		if speechText != "" {
			r.speechFailed("voice file not found; sending the text reply instead", "locate", located, speechText)
			return
		}
		r.fail("locate", located)
		return
	}
	sent := 0
	err := r.timeSend(func() error {
		for i, path := range paths {
			place := func() {}
			if i == len(paths)-1 {
				place = r.attachCheckIn()
			}
			if err := r.out.File(r.ctx, fileKind(r.sum.mode), path); err != nil {
				return err
			}
			place()
			sent++
		}
		return nil
	})
	switch {
	case errors.Is(err, message.ErrBlocked):
		r.sum.outcome = "blocked"
		return
	case err != nil && sent > 0:
		// The first notes are out: the text now would say it all twice.
		r.fail("send", fmt.Errorf("voice note %d of %d: %w", sent+1, len(paths), err))
		return
	case err != nil && speechText != "":
		r.speechFailed("voice message not sent; sending the text reply instead", "send", err, speechText)
		return
	case err != nil:
		r.fail("send", err)
		return
	}
	if textToo && res.Text != "" {
		if err := r.out.Text(r.ctx, res.Text, true); err != nil && !errors.Is(err, message.ErrBlocked) {
			r.log.Warn("text after the file not sent", zap.Error(err))
		}
	}
}

// spokenInPart reports whether the request's speech bound left part of
// text unspoken.
func (r *request) spokenInPart(text string) bool {
	bound := r.allow.speechBound()
	return bound > 0 && utf8.RuneCountInString(text) > bound
}

// speechFailed sends text, the words of a voice reply that could not be
// made or sent (why, in phase), instead: the request's outcome says so
// unless sending the text failed too.
func (r *request) speechFailed(why, phase string, cause error, text string) {
	r.log.Warn(why, zap.String("phase", phase), zap.Error(cause))
	r.replyText(text)
	if r.sum.outcome == "ok" {
		r.sum.outcome = "speech failed"
	}
}

// fail tells the user the brain's error text once and logs the one error
// line for the request.
func (r *request) fail(phase string, cause error) {
	if r.ctx.Err() != nil {
		r.log.Warn("request interrupted by shutdown; it will be replayed", zap.String("phase", phase))
		r.interrupted()
		return
	}
	if errors.Is(cause, state.ErrUnavailable) {
		// A pause, not a failure: nobody is told of an error.
		why := state.Cause(cause)
		if errors.Is(cause, errNotStored) {
			why = "store refused the write"
		}
		r.log.Warn("state unavailable for now; the message is handed back and answered once it is back",
			zap.String("phase", phase), zap.String("cause", why), zap.Error(cause))
		r.sum.outcome = "paused"
		r.keep = true
		return
	}
	r.sum.outcome = "error"
	r.log.Error("request failed", zap.String("phase", phase), zap.Error(cause))
	if r.in.Scheduled != nil {
		r.unwritten("error") // the user sent nothing an error could answer
		return
	}
	r.out.Text(r.ctx, r.brain.Messages.Error, false)
}

// interrupted: shutdown cut the work short. Its deliveries go back to
// their log, which hands it out again (the next start, another instance),
// so the user gets a real answer.
func (r *request) interrupted() {
	r.sum.outcome = "interrupted"
	r.keep = true
}

// drop answers nothing: the message was not for this bot, or its bot is
// gone.
func (r *request) drop(outcome string) { r.sum.outcome = outcome }

// timeSend runs send and records how long it took.
func (r *request) timeSend(send func() error) error {
	start := time.Now()
	err := send()
	r.sum.send = time.Since(start)
	if err == nil {
		// Done the moment the reply is out: a crash after this point must
		// not answer it again, so nothing may come between.
		r.in.Progress.Answered()
	}
	return err
}

// finish finishes the message's deliveries and writes the summary line.
// Serve and serveAside defer it; nothing else calls it.
func (r *request) finish() {
	// Deliveries not done by the reply (timeSend): no reply, or shutdown
	// cut the request short.
	r.in.Progress.Finish(r.keep)
	// A transcription is paid for even when the model was not reached.
	if r.sum.ranClaude || r.sum.openAI > 0 {
		r.recordUsage()
	}
	// Recorded: the caps count it as spent, no longer as held.
	r.p.purse.release(r.allow.hold, r.sum.cost+r.sum.openAI)
	r.endIfBlocked()
	total := time.Since(r.in.Arrived)
	// Counted before the line is written: once an admin reads the line,
	// the metrics have the request.
	r.sum.count(r.p.cfg.Metrics, r.in.Key.Bot, total)
	r.sum.write(r.log, total)
}

// recordUsage stores what a request that ran the model cost, with its
// outcome, for usage reports and spending caps.
func (r *request) recordUsage() {
	s := &r.sum
	r.p.recordUsage(r.ctx, state.Usage{Bot: r.in.Key.Bot, Chat: r.in.Key.Chat, User: r.in.Sender, RequestID: r.in.RequestID,
		Mode: s.mode.String(), Outcome: s.outcome, ClaudeUSD: s.cost, OpenAIUSD: s.openAI}, s.tokens, r.log)
}

// recordUsage is the one place a usage record is stored: u, at now, with
// the tokens t, for usage reports and spending caps. A store that refuses
// is logged; the request goes on.
func (p *Pipeline) recordUsage(ctx context.Context, u state.Usage, t claude.Tokens, log *zap.Logger) {
	u.At = p.cfg.Now()
	u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens = t.Input, t.Output, t.CacheRead, t.CacheWrite
	if err := p.store.RecordUsage(context.WithoutCancel(ctx), u); err != nil {
		log.Warn("could not record the request's usage", zap.Error(err))
	}
}

// ResendText asks a user to send a message again that could not be
// handled across restarts.
const ResendText = "Sorry, I could not answer your last message. Please send it again."

// prompt is the message as the model reads it: in a group, prefixed with
// its author's name, so members can be told apart.
func prompt(in *message.Inbound) string {
	if in.InGroup() && in.SenderName != "" {
		return strings.TrimSpace(in.SenderName + ": " + in.Text)
	}
	return in.Text
}

// contain, deferred by Serve and serveAside (after finish, so it runs
// first), contains a panic while answering the request's message: the
// sender is told it could not be read and its deliveries are done.
func (r *request) contain() {
	v := recover()
	if v == nil {
		return
	}
	contain.Report(r.log, r.p.cfg.Metrics, r.in.Key.Bot, contain.Answer, r.in.ID, v)
	r.keep = false
	if r.brain == nil {
		r.drop("dropped")
		return
	}
	r.say("unreadable", r.brain.Messages.Unreadable)
}
