package conversation

// Taps on the bots' buttons, answered beside the conversation's queue:
// every tap gets its answer at once (Telegram's spinner stops), and only
// a tap that chose an option of a question goes on, as the user's words,
// into the queue.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/claude"
	"brainbot/message"
	"brainbot/output"
	"brainbot/pricing"
	"brainbot/state"
	"brainbot/toolspec"
)

// The notices a tap is answered with, shown only to the user who tapped.
const (
	NoticeGone     = "This button no longer works."
	NoticeExpired  = "This button has expired."
	NoticeAnswered = "This question was answered already."
	NoticeNotAsked = "Only the person I asked can answer this."
	NoticeRead     = "I read this one aloud already."
	NoticeReading  = "Reading it aloud…"
	NoticeNotYours = "Only the person who asked can stop this answer."
	NoticeStopped  = "Stopped."
	NoticeFinished = "This answer is finished already."
	NoticeTrouble  = "Sorry, something went wrong. Please try again."
)

// tap is one tap's trip: what it resolved to, and what follows its
// answer.
type tap struct {
	in      *message.Inbound
	brain   *brain.Brain
	log     *zap.Logger
	buttons state.Buttons
	// kind and outcome label the tap in the log and the metrics; notice
	// answers it.
	kind, outcome, notice string
	// then runs after the answer (the question amended, the answer read).
	then func(ctx context.Context)
}

// Tap answers a tap on one of the bots' buttons. A tap that chose an
// option returns it as words, which the intake queues as the user's next
// message: the tap's update with the option as its text, from whoever
// the tap answers for (an admin's tap for the group's anonymous admins:
// the group). chosen is false for every other tap, which is answered here
// and done.
func (p *Pipeline) Tap(ctx context.Context, in *message.Inbound) (words message.Update, chosen bool) {
	t := &tap{in: in, brain: p.cfg.Brain(in.Key.Bot), kind: "unknown", outcome: "refused", notice: NoticeGone,
		log: p.log.With(zap.String("request_id", in.RequestID), zap.String("bot", in.Key.Bot), zap.Int64("user", in.Sender),
			zap.Int64("chat", in.Key.Chat))}
	choice, chosen := p.resolveTap(ctx, t)
	words = in.Update
	words.Text = choice
	p.cfg.Metrics.ButtonTaps.WithLabelValues(in.Key.Bot, t.kind, t.outcome).Inc()
	t.log.Info("button tapped", zap.String("kind", t.kind), zap.String("outcome", t.outcome), zap.Int("message_id", in.MessageID))
	if err := p.cfg.Chats.AnswerTap(ctx, in.Key.Bot, in.Tap.QueryID, t.notice); err != nil {
		t.log.Warn("could not answer a tap", zap.Error(err))
	}
	if t.then != nil {
		t.then(ctx)
	}
	return words, chosen
}

// resolveTap decides what t means and sets its answer.
func (p *Pipeline) resolveTap(ctx context.Context, t *tap) (choice string, chosen bool) {
	in := t.in
	id, place, ok := parseCallbackData(in.Tap.Data)
	switch {
	case t.brain == nil, in.Tap.FromBot, in.Tap.Inaccessible, !ok:
		t.log.Debug("tap refused", zap.Bool("brain", t.brain != nil), zap.Bool("by_bot", in.Tap.FromBot),
			zap.Bool("inaccessible", in.Tap.Inaccessible), zap.Bool("our_data", ok))
		return "", false
	}
	b, found, err := p.store.LookupButtons(ctx, id)
	switch {
	case err != nil:
		t.outcome, t.notice = "error", NoticeTrouble
		t.log.Warn("could not look up a tapped button", zap.Error(err))
		return "", false
	case !found || b.Conversation != in.Key || !underTheirMessage(b, in.MessageID) || place >= max(len(b.Options), 1):
		t.log.Debug("tap refused: unknown buttons, or not under their message", zap.Bool("found", found))
		return "", false
	}
	t.buttons, t.kind = b, b.Kind
	if !p.actForGroup(ctx, t) {
		return "", false
	}
	switch {
	case p.cfg.Now().Sub(b.Created) > t.brain.Buttons.MaxAge.D():
		t.outcome, t.notice = "expired", NoticeExpired
	case !allowed(t.brain, in.Sender):
		t.outcome, t.notice = "denied", t.brain.Messages.Denied
	case b.Kind == state.ButtonsQuestion:
		return p.choose(ctx, t, b.Options[place])
	case b.Kind == state.ButtonsRead:
		p.readTap(ctx, t)
	case b.Kind == state.ButtonsStop:
		p.stopTap(ctx, t)
	case b.Kind == ButtonsForget:
		p.forgetTap(ctx, t, place)
	case b.Kind == ButtonsMemory:
		p.memoryTap(ctx, t, place)
	case b.Kind == ButtonsCheckIn:
		p.checkInTap(ctx, t)
	case b.Kind == ButtonsReminders:
		p.remindersTap(ctx, t, place)
	}
	return "", false
}

// underTheirMessage reports whether buttons b are under message id, the
// one a tap names. A question's and 🔊 are placed under their message
// once it is sent (PlaceButtons): buttons never placed are under none.
// ⏹ is under the message its answer streams into only while it is
// written, and closed once the turn ends: the answer running is the one
// it stops.
func underTheirMessage(b state.Buttons, id int) bool {
	return b.Kind == state.ButtonsStop || b.MessageID == id
}

// choose takes a tap on option of a question: the first tap of the user
// asked answers it.
func (p *Pipeline) choose(ctx context.Context, t *tap, option string) (string, bool) {
	if t.buttons.User != 0 && t.buttons.User != t.in.Sender {
		t.outcome, t.notice = "not_asker", NoticeNotAsked
		return "", false
	}
	used, err := p.store.UseButtons(ctx, t.buttons.ID, t.in.ID)
	switch {
	case err != nil:
		t.outcome, t.notice = "error", NoticeTrouble
		t.log.Warn("could not record a question's answer", zap.Error(err))
		return "", false
	case !used:
		t.outcome, t.notice = "used", NoticeAnswered
		return "", false
	}
	t.outcome, t.notice = "chosen", ""
	t.then = func(ctx context.Context) {
		out := p.cfg.Chats.Outbox(t.in.Key, t.in.InGroup(), 0, t.log)
		if err := out.Amend(ctx, t.in.MessageID, t.buttons.Text, "→ "+option); err != nil {
			t.log.Warn("could not show the choice under the question", zap.Error(err))
		}
	}
	return option, true
}

// readTap takes a tap on 🔊: the first reads the answer aloud, as much
// of it as tts.max_chars and the spending caps allow. It does not wait
// for room under a cap (Telegram wants the tap answered at once): with
// too little, the tap is told the limit is reached.
func (p *Pipeline) readTap(ctx context.Context, t *tap) {
	a, over, err := p.reserve(ctx, t.brain, t.in.Key.Bot, t.in.Sender, claude.Speech, false, t.log)
	over = over || err == nil && a.chars < min(minSpokenChars, utf8.RuneCountInString(t.buttons.Text))
	var used bool
	if err == nil && !over {
		used, err = p.store.UseButtons(ctx, t.buttons.ID, t.in.ID)
	}
	switch {
	case err != nil:
		t.outcome, t.notice = "error", NoticeTrouble
		t.log.Warn("could not read an answer aloud", zap.Error(err))
	case over:
		now := p.cfg.Now()
		t.outcome, t.notice = "limited", t.brain.Messages.LimitText(state.NextReset(now).Sub(now))
	case p.cfg.Speaker == nil:
		t.outcome = "refused"
	case !used:
		t.outcome, t.notice = "used", NoticeRead
	default:
		t.outcome, t.notice = "read", NoticeReading
		t.then = func(ctx context.Context) { p.purse.release(a.hold, p.readAloud(ctx, t, a.speechBound())) }
		return
	}
	p.purse.release(a.hold, 0)
}

// readAloud sends the tapped answer as a voice note, in reply to it, and
// takes the 🔊 away; it speaks at most maxChars characters of it (0: all)
// and returns what the speech cost.
func (p *Pipeline) readAloud(ctx context.Context, t *tap, maxChars int) float64 {
	out := p.cfg.Chats.Outbox(t.in.Key, t.in.InGroup(), 0, t.log)
	defer out.KeepAction(ctx, message.RecordVoice)()
	b := t.brain
	path, spoken, err := p.speak(ctx, t, maxChars)
	// What OpenAI spoke is billed, on a failure too.
	usd, _ := pricing.Speech(b.TTS.Model, spoken)
	outcome := "read aloud"
	if err != nil {
		outcome = "error"
	}
	p.recordUsage(ctx, state.Usage{Bot: t.in.Key.Bot, Chat: t.in.Key.Chat, User: t.in.Sender, RequestID: t.in.RequestID,
		Mode: claude.Speech.String(), Outcome: outcome, OpenAIUSD: usd}, claude.Tokens{}, t.log)
	if err == nil {
		p.describeReading(t, path, usd)
		out.Quote(t.in.MessageID)
		err = out.File(ctx, message.VoiceNote, path)
	}
	if err == nil {
		if kerr := p.store.KeepButtonsFile(context.WithoutCancel(ctx), t.buttons.ID, path); kerr != nil {
			t.log.Warn("could not keep the voice note's name", zap.Error(kerr))
		}
		err = out.DropButtons(ctx, t.in.MessageID)
	}
	if err != nil && !errors.Is(err, message.ErrBlocked) {
		t.log.Error("could not read an answer aloud", zap.Error(err))
		out.Quote(t.in.MessageID)
		if serr := out.Text(ctx, b.Messages.Error, false); serr != nil {
			t.log.Warn("could not tell the user", zap.Error(serr))
		}
	}
	return usd
}

// speak speaks the tapped answer with the brain's voice and keeps the
// note where the voice answers are kept (audio-output/bot-<id>/user-<id>/).
func (p *Pipeline) speak(ctx context.Context, t *tap, maxChars int) (path string, spoken int, err error) {
	s := t.brain.TTS
	data, ext, spoken, err := p.cfg.Speaker.Speak(ctx, t.buttons.Text,
		toolspec.SpeechSettings{Voice: s.Voice, Speed: s.Speed, Model: s.Model, Format: s.Format, MaxChars: maxChars})
	if err != nil {
		return "", spoken, fmt.Errorf("speak: %w", err)
	}
	dir := filepath.Join(p.cfg.DataDir, output.Audio.Dir())
	if err := os.MkdirAll(dir, output.DirMode); err != nil {
		return "", spoken, err
	}
	path = filepath.Join(dir, output.Prefix(t.in.Key.Bot, t.in.Sender, p.cfg.Now())+"-read"+ext)
	if err := os.WriteFile(path, data, output.FileMode); err != nil {
		return "", spoken, err
	}
	path, err = output.Organize(p.cfg.DataDir, path, output.Audio, t.in.Key.Bot, t.in.Sender)
	return path, spoken, err
}

// describeReading writes the sidecar of the voice note at path that
// read the tapped answer aloud, as a voice answer's (sidecar.go).
func (p *Pipeline) describeReading(t *tap, path string, usd float64) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.log.Warn("could not describe the generated file", zap.String("path", path), zap.Error(err))
		return
	}
	s := t.brain.TTS
	m := output.Metadata{Brain: t.brain.Name, BotID: t.in.Key.Bot, Chat: t.in.Key.Chat, User: t.in.Sender, RequestID: t.in.RequestID,
		Created: p.cfg.Now().UTC(), Mode: claude.Speech.String(), Text: t.buttons.Text, Model: s.Model, Voice: s.Voice, Speed: s.Speed,
		Format: s.Format, DurationSeconds: audioSeconds(data, filepath.Ext(path)), Bytes: int64(len(data)), CostUSD: &usd}
	if err := output.WriteSidecar(path, m); err != nil {
		t.log.Warn("could not write the generated file's sidecar", zap.Error(err))
	}
}

// stopTap takes a tap on ⏹ under a streamed answer in a group: the user
// who asked, or an admin of the group, ends the model's turn.
func (p *Pipeline) stopTap(ctx context.Context, t *tap) {
	may, err := p.mayStop(ctx, t.in.Key, t.buttons.User, t.in.Sender)
	switch {
	case err != nil:
		t.outcome, t.notice = "error", NoticeTrouble
		t.log.Warn("could not ask Telegram whether the user is an admin of the group", zap.Error(err))
	case !may:
		t.outcome, t.notice = "not_asker", NoticeNotYours
	case t.buttons.UsedBy != 0 || !p.answers.press(t.in.Key.String(), 0):
		t.outcome, t.notice = "finished", NoticeFinished
	case p.claude.Interrupt(t.in.Key.String()):
		// converse keeps what was written, as for a draft's stop button.
		t.outcome, t.notice = "stopped", NoticeStopped
		t.log.Info("turn stopped by the stop button")
		p.cfg.Metrics.Stops.WithLabelValues(t.in.Key.Bot, "button").Inc()
	default: // pressed as the turn ended: its whole answer follows
		t.outcome, t.notice = "finished", NoticeFinished
	}
}
