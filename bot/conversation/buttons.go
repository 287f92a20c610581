package conversation

// Buttons under answers: a question with options, 🔊 to read a text
// answer aloud, and ⏹ to stop a group's answer while it is written. What
// they mean is kept in the state (Buttons); a button's callback data is
// only "<id>.<place>". Taps on them: taps.go.

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"brainbot/claude"
	"brainbot/message"
	"brainbot/state"
	"brainbot/toolspec"
)

// The labels of the buttons that read an answer aloud, and that stop one
// while it is written.
const (
	ReadAloudLabel = "🔊"
	StopLabel      = "⏹ Stop"
)

// errInvalidQuestion: the question in the model's call cannot be read.
var errInvalidQuestion = errors.New("the model's question cannot be read")

// askedQuestion reports whether the model asked the user a question with
// options in res.
func askedQuestion(res *claude.Result) bool {
	_, ok := lastCall(res, toolspec.QuestionTool)
	return ok
}

// replyAnswer sends the model's answer: the question it asked, under its
// options, or its text, under 🔊 when the brain reads answers aloud.
func (r *request) replyAnswer(res *claude.Result) {
	if call, ok := lastCall(res, toolspec.QuestionTool); ok {
		r.replyQuestion(call)
		return
	}
	if s := r.in.Scheduled; s != nil && s.Kind == message.CheckIn && res.Text != "" {
		r.replyCheckIn(res.Text)
		return
	}
	if !r.brain.Buttons.ReadAloud || r.p.cfg.Speaker == nil || res.Text == "" {
		r.replyText(res.Text)
		return
	}
	b := state.Buttons{ID: state.NewButtonsID(), Kind: state.ButtonsRead, Text: res.Text}
	r.replyUnder(b, message.Keyboard{{{Text: ReadAloudLabel, Data: callbackData(b.ID, 0)}}})
}

// replyQuestion sends the question the model asked (call), after the
// words it wrote before it, with a button per option.
func (r *request) replyQuestion(call claude.ToolCall) {
	var q toolspec.QuestionArgs
	if err := json.Unmarshal(call.Input, &q); err != nil || q.Check() != nil {
		// The tool server took only a valid question: this is no call of ours.
		r.fail("question", errInvalidQuestion)
		return
	}
	b := state.Buttons{ID: state.NewButtonsID(), Kind: state.ButtonsQuestion, User: r.in.Sender, Options: q.Options,
		Text: strings.TrimSpace(call.TextBefore + "\n\n" + q.Question)}
	kb := make(message.Keyboard, len(q.Options))
	for i, o := range q.Options {
		kb[i] = []message.Button{{Text: o, Data: callbackData(b.ID, i)}}
	}
	r.log.Info("question asked", zap.String("buttons", b.ID), zap.Int("options", len(q.Options)))
	r.replyUnder(b, kb)
}

// replyUnder sends b.Text with kb under it. What the buttons mean is
// kept first, so a tap never comes before it; where it cannot be kept,
// the text goes without them (a tap could only be refused).
func (r *request) replyUnder(b state.Buttons, kb message.Keyboard) {
	place := r.attachButtons(b, kb)
	r.replyText(b.Text)
	place()
}

// attachButtons keeps what b means, then attaches kb to the next message
// sent (text or file); place records the message it went under. Where b
// cannot be kept, nothing is attached.
func (r *request) attachButtons(b state.Buttons, kb message.Keyboard) (place func()) {
	b.Conversation, b.Created = r.in.Key, r.p.cfg.Now()
	if err := r.p.store.SaveButtons(r.ctx, b); err != nil {
		r.log.Warn("could not keep the buttons; the answer goes without them", zap.String("kind", b.Kind), zap.Error(err))
		return func() {}
	}
	before := len(r.out.Sent())
	r.out.Attach(kb)
	return func() {
		if sent := r.out.Sent(); len(sent) > before {
			if err := r.p.store.PlaceButtons(context.WithoutCancel(r.ctx), b.ID, sent[len(sent)-1]); err != nil {
				r.log.Warn("could not keep which message the buttons are under", zap.Error(err))
			}
		}
	}
}

// closeQuestions closes the conversation's question open for the
// message's sender: they answered it in words. Its buttons go.
func (p *Pipeline) closeQuestions(r *request) {
	closed, err := p.store.CloseQuestions(r.ctx, r.in.Key, r.in.Sender)
	if err != nil {
		r.log.Warn("could not close the open question", zap.Error(err))
	}
	for _, q := range closed {
		if q.MessageID == 0 {
			continue // its message never went out
		}
		if err := r.out.DropButtons(r.ctx, q.MessageID); err != nil {
			r.log.Info("could not take an answered question's buttons away", zap.Int("message_id", q.MessageID), zap.Error(err))
		}
	}
}

// offerStop puts ⏹ under the answer a group is about to see streamed,
// for the user who asked: groups have no drafts, so Telegram's own stop
// button is not there. The returned func closes it once the model's turn
// ended, so a later tap changes nothing.
func (p *Pipeline) offerStop(r *request, mode claude.Mode) (closeStop func()) {
	if !r.in.InGroup() || mode != claude.Text || !r.brain.Stream {
		return func() {}
	}
	b := state.Buttons{ID: state.NewButtonsID(), Kind: state.ButtonsStop, Conversation: r.in.Key, User: r.in.Sender, Created: p.cfg.Now()}
	if err := p.store.SaveButtons(r.ctx, b); err != nil {
		r.log.Warn("could not keep the buttons; the answer goes without them", zap.String("kind", b.Kind), zap.Error(err))
		return func() {}
	}
	r.out.Attach(message.Keyboard{{{Text: StopLabel, Data: callbackData(b.ID, 0)}}})
	return func() {
		if _, err := p.store.UseButtons(context.WithoutCancel(r.ctx), b.ID, state.ButtonsClosed); err != nil {
			r.log.Warn("could not close the stop button", zap.Error(err))
		}
	}
}

// keepStopped keeps what a group saw of an answer /stop stopped while it
// was streamed: what the model wrote so far replaces the streamed
// message, which loses its ⏹ (a tap on ⏹ keeps it as a stop button
// does: keepPartial).
func (r *request) keepStopped(res *claude.Result, streamed bool) {
	if !streamed || !r.in.InGroup() || res == nil || strings.TrimSpace(res.Text) == "" {
		return
	}
	if err := r.out.Text(context.WithoutCancel(r.ctx), res.Text, true); err != nil && !errors.Is(err, message.ErrBlocked) {
		r.log.Warn("could not keep the stopped answer's text", zap.Error(err))
	}
}

// callbackData is the data of the button at place among buttons id.
func callbackData(id string, place int) string { return id + "." + strconv.Itoa(place) }

// maxButtons is the most buttons one message carries: a question's
// options, /memory's notes and its "drop all", or /reminders' list.
const maxButtons = max(toolspec.MaxOptions, toolspec.MaxMaxNotes+1, toolspec.MaxMaxPending)

// parseCallbackData reads callbackData; false for data we never made.
func parseCallbackData(data string) (id string, place int, ok bool) {
	id, p, found := strings.Cut(data, ".")
	n, err := strconv.Atoi(p)
	if !found || err != nil || id == "" || n < 0 || n >= maxButtons || p != strconv.Itoa(n) {
		return "", 0, false
	}
	return id, n, true
}
