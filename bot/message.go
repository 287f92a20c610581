package bot

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/go-telegram/bot/models"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/store"
	"brainbot/claude"
)

// job is one accepted text message.
type job struct {
	r         *runner
	requestID string
	chat      int64
	user      int64
	messageID int
	text      string
	// command is the bot command without "/" and "@bot" ("" for text).
	command string
	// forOtherBot: a command addressed to another bot (/cmd@other), ignored.
	forOtherBot bool
	// notText: a photo, voice note, sticker... that the model cannot read;
	// the user is told so instead of meeting silence.
	notText   bool
	journalID int64
	// attempts is how often work on it started before (replays).
	attempts int
	arrived  time.Time
	// last is the brain at arrival, used if the brain is removed meanwhile.
	last *brain.Brain
}

func (j *job) logger(base *zap.Logger) *zap.Logger {
	return base.With(zap.String("request_id", j.requestID), zap.String("bot", j.r.id),
		zap.Int64("user", j.user), zap.Int64("chat", j.chat))
}

// accept runs in the polling worker for every update, in order: it
// journals a text message (and the update offset, atomically) and queues
// it. It must stay fast; the work happens in the user's queue.
func (r *runner) accept(u *models.Update) {
	m := r.m
	ctx := context.WithoutCancel(m.workCtx)
	msg := u.Message
	if msg == nil || msg.From == nil || msg.Text == "" {
		// Nothing to journal (edits, joins, media): just confirm it.
		if err := m.cfg.Store.SetOffset(ctx, r.poller(), u.ID); err != nil {
			r.log.Error("could not save update offset", zap.Error(err))
		}
		// Media in a private chat gets a hint rather than silence; in a
		// group a hint to every sticker would be noise.
		if msg != nil && msg.From != nil && msg.Chat.Type == models.ChatTypePrivate && hasMedia(msg) {
			m.enqueue(&job{r: r, requestID: uuid.NewString(), chat: msg.Chat.ID, user: msg.From.ID,
				messageID: msg.ID, notText: true, arrived: time.Now(), last: m.brain(r.id)})
		}
		return
	}
	_, username := r.current()
	j := &job{
		r:         r,
		requestID: uuid.NewString(),
		chat:      msg.Chat.ID,
		user:      msg.From.ID,
		messageID: msg.ID,
		text:      msg.Text,
		arrived:   time.Now(),
		last:      m.brain(r.id),
	}
	j.command, j.forOtherBot = parseCommand(msg.Text, msg.Entities, username)
	log := j.logger(m.log)
	log.Debug("message received", zap.String("text", msg.Text))
	id, err := m.cfg.Store.Journal(ctx, store.Entry{
		Bot: r.id, Chat: j.chat, User: j.user, MessageID: j.messageID, Text: j.text, Created: j.arrived,
	}, r.poller(), u.ID)
	if err != nil {
		// Answering without a journal beats dropping the message.
		log.Error("could not journal message; handling it anyway", zap.Error(err))
	}
	j.journalID = id
	m.enqueue(j)
}

// parseCommand reads the bot command that starts text, recognised only by
// its bot_command entity as Telegram marks it: "/reset@mybot now" is
// "reset". A command addressed to another bot is reported as such.
func parseCommand(text string, entities []models.MessageEntity, username string) (cmd string, forOtherBot bool) {
	for _, e := range entities {
		if e.Type != models.MessageEntityTypeBotCommand || e.Offset != 0 {
			continue
		}
		units := utf16.Encode([]rune(text))
		if e.Length > len(units) || e.Length < 2 {
			return "", false
		}
		word := string(utf16.Decode(units[1:e.Length]))
		name, target, addressed := strings.Cut(word, "@")
		if addressed && !strings.EqualFold(target, username) {
			return "", true
		}
		return strings.ToLower(name), false
	}
	return "", false
}

type queueKey struct {
	bot  string
	user int64
}

// userQueue holds one user's messages to one bot; one goroutine drains it
// while it is non-empty, so messages are handled one at a time in order.
type userQueue struct {
	waiting []*job
	// accepted counts messages waiting or being handled.
	accepted int
}

// enqueue adds j to its user's queue, or answers busy when the queue is full.
func (m *Manager) enqueue(j *job) {
	key := queueKey{j.r.id, j.user}
	m.mu.Lock()
	q, running := m.queues[key]
	if running && q.accepted >= m.cfg.QueueSize {
		m.mu.Unlock()
		m.work.Add(1)
		go func() {
			defer m.work.Done()
			m.answerBusy(j)
		}()
		return
	}
	if !running {
		q = &userQueue{}
		m.queues[key] = q
	}
	q.waiting = append(q.waiting, j)
	q.accepted++
	if !running {
		m.work.Add(1)
		go m.drain(key, q)
	}
	m.mu.Unlock()
}

// drain handles key's messages until its queue is empty or the manager
// stops (what is left stays journaled for the next start).
func (m *Manager) drain(key queueKey, q *userQueue) {
	defer m.work.Done()
	for {
		m.mu.Lock()
		stopping := isClosed(m.stopping)
		if len(q.waiting) == 0 || stopping {
			delete(m.queues, key)
			m.mu.Unlock()
			return
		}
		j := q.waiting[0]
		q.waiting = q.waiting[1:]
		m.mu.Unlock()
		m.handle(j)
		m.mu.Lock()
		q.accepted--
		m.mu.Unlock()
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (m *Manager) answerBusy(j *job) {
	b := j.brain(m)
	log := j.logger(m.log)
	if b == nil {
		// Removed before this message arrived: dropped, as in handle.
		m.finish(j, log)
		logSummary(log, j, &request{outcome: "dropped"})
		return
	}
	log.Info("user queue full: told the user to wait", zap.Int("queue_size", m.cfg.QueueSize))
	req := &request{outcome: "busy"}
	sendStart := time.Now()
	m.deliverText(m.workCtx, j, log, b.Messages.Busy, false)
	req.send = time.Since(sendStart)
	m.finish(j, log)
	logSummary(log, j, req)
}

// brain is the bot's current brain, or the one it had when j arrived.
func (j *job) brain(m *Manager) *brain.Brain {
	if b := m.brain(j.r.id); b != nil {
		return b
	}
	return j.last
}

// finish clears j from the journal once it has been answered.
func (m *Manager) finish(j *job, log *zap.Logger) {
	if j.journalID == 0 {
		return
	}
	if err := m.cfg.Store.Done(context.WithoutCancel(m.workCtx), j.journalID); err != nil {
		log.Error("could not clear journal entry; it may be answered again after a restart", zap.Error(err))
	}
}

// replay re-queues the bot's journaled messages left by an earlier
// process: each runs again once; one whose work had already been retried
// gets a request to resend it instead.
func (m *Manager) replay(ctx context.Context, r *runner) {
	entries, err := m.cfg.Store.Pending(ctx, r.id)
	if err != nil {
		r.log.Error("could not read the journal; unanswered messages are not replayed", zap.Error(err))
		return
	}
	_, username := r.current()
	for _, e := range entries {
		j := &job{r: r, requestID: uuid.NewString(), chat: e.Chat, user: e.User, messageID: e.MessageID,
			text: e.Text, journalID: e.ID, attempts: e.Attempts, arrived: time.Now(), last: m.brain(r.id)}
		if strings.HasPrefix(e.Text, "/") {
			// Entities are not journaled; a leading /word was a command.
			word, _, _ := strings.Cut(e.Text, " ")
			j.command, j.forOtherBot = parseCommand(e.Text,
				[]models.MessageEntity{{Type: models.MessageEntityTypeBotCommand, Length: len(utf16.Encode([]rune(word)))}}, username)
		}
		log := j.logger(m.log)
		if e.Attempts >= 2 {
			log.Warn("journaled message failed after a restart already: asking the user to resend")
			m.work.Add(1)
			go func() {
				defer m.work.Done()
				m.deliverText(m.workCtx, j, log, resendText, false)
				m.finish(j, log)
				logSummary(log, j, &request{outcome: "resend asked"})
			}()
			continue
		}
		log.Info("replaying journaled message", zap.Int("attempts", e.Attempts))
		m.enqueue(j)
	}
}

// notTextReply answers a photo, voice note, sticker or file: the model
// only reads text.
const notTextReply = "I can only read text messages. Please write to me."

// hasMedia reports whether msg carries something a user sent on purpose
// that is not text.
func hasMedia(msg *models.Message) bool {
	return len(msg.Photo) > 0 || msg.Voice != nil || msg.Audio != nil || msg.Video != nil ||
		msg.VideoNote != nil || msg.Document != nil || msg.Sticker != nil || msg.Animation != nil ||
		msg.Location != nil || msg.Contact != nil
}

// resendText asks a user to send a message again that could not be
// handled across restarts.
const resendText = "Sorry, I could not answer your last message. Please send it again."

// request is one message's trip through the pipeline, for the summary log.
type request struct {
	mode    claude.Mode
	outcome string
	// claudeStartup (spawn to the CLI's init) and claudeTotal (spawn to
	// exit) tell the CLI's share of the time from ours.
	queueWait, claudeStartup, turn1, turn2, claudeTotal, locate, send time.Duration
	cost                                                              float64
}

// logSummary writes the one summary line every message gets, whatever
// became of it: the admin's record of the request.
func logSummary(log *zap.Logger, j *job, req *request) {
	log.Info("request",
		zap.String("mode", req.mode.String()), zap.String("outcome", req.outcome),
		zap.Duration("queue_wait", req.queueWait), zap.Duration("claude_startup", req.claudeStartup),
		zap.Duration("turn1", req.turn1), zap.Duration("turn2", req.turn2), zap.Duration("claude_total", req.claudeTotal),
		zap.Duration("locate", req.locate), zap.Duration("send", req.send),
		zap.Duration("total", time.Since(j.arrived)), zap.Float64("cost_usd", req.cost))
}

// handle answers one message.
func (m *Manager) handle(j *job) {
	b := j.brain(m)
	log := j.logger(m.log)
	req := &request{outcome: "ok"}
	defer logSummary(log, j, req)
	ctx := m.workCtx
	if b == nil {
		req.outcome = "dropped"
		m.finish(j, log)
		return
	}
	if j.forOtherBot {
		req.outcome = "ignored"
		m.finish(j, log)
		return
	}
	if len(b.Access.AllowedUsers) > 0 && !slices.Contains(b.Access.AllowedUsers, j.user) {
		req.outcome = "denied"
		log.Info("user not allowed")
		m.reply(ctx, j, log, req, b.Messages.Denied)
		return
	}
	if j.notText {
		req.outcome = "not text"
		m.reply(ctx, j, log, req, notTextReply)
		return
	}
	if j.command != "" {
		req.outcome = "command"
		m.reply(ctx, j, log, req, m.command(ctx, j, b, log))
		return
	}
	if j.attempts == 0 {
		ok, resetAt, err := m.cfg.Store.TakeDaily(ctx, j.r.id, j.user, b.Limits.PerUserPerDay, m.cfg.Now())
		if err != nil {
			m.fail(ctx, j, b, log, req, "limit", err)
			return
		}
		if !ok {
			req.outcome = "limited"
			m.reply(ctx, j, log, req, b.Messages.LimitText(resetAt.Sub(m.cfg.Now())))
			return
		}
	}
	mode, err := m.mode(ctx, j, b)
	if err != nil {
		m.fail(ctx, j, b, log, req, "mode", err)
		return
	}
	req.mode = mode
	m.converse(ctx, j, b, log, req)
}

// reply sends a one-message answer that needs no model and clears the job.
func (m *Manager) reply(ctx context.Context, j *job, log *zap.Logger, req *request, text string) {
	sendStart := time.Now()
	if err := m.deliverText(ctx, j, log, text, false); err != nil && !errors.Is(err, errBlocked) {
		req.outcome = "failed"
	}
	req.send = time.Since(sendStart)
	m.finish(j, log)
}

// mode decides the reply kind: image when the brain can draw and the message
// asks for a picture, else speech when voice replies are on for the user,
// else text.
func (m *Manager) mode(ctx context.Context, j *job, b *brain.Brain) (claude.Mode, error) {
	if b.Image.Enabled && asksForImage(j.text, b.Image.Keywords) {
		return claude.Image, nil
	}
	on, err := m.voiceOn(ctx, j, b)
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
func (m *Manager) voiceOn(ctx context.Context, j *job, b *brain.Brain) (bool, error) {
	if !b.TTS.UserToggle {
		return b.TTS.Enabled, nil
	}
	on, set, err := m.cfg.Store.Voice(ctx, j.r.id, j.user)
	if err != nil || !set {
		return b.TTS.Enabled, err
	}
	return on, nil
}

// fail tells the user the brain's error text once and logs the one error
// line for the request.
func (m *Manager) fail(ctx context.Context, j *job, b *brain.Brain, log *zap.Logger, req *request, phase string, cause error) {
	if ctx.Err() != nil {
		// Shutdown cancelled the work: the journal entry stays and the
		// next start replays it, so the user gets a real answer.
		req.outcome = "interrupted"
		log.Warn("request interrupted by shutdown; it will be replayed", zap.String("phase", phase))
		return
	}
	req.outcome = "error"
	log.Error("request failed", zap.String("phase", phase), zap.Error(cause))
	m.deliverText(ctx, j, log, b.Messages.Error, false)
	m.finish(j, log)
}

// errBlocked marks a send the user refused by blocking the bot.
var errBlocked = errors.New("user blocked the bot")
