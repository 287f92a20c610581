package conversation

// /forget: a user's right to be forgotten. The command says what goes and
// asks for a tap to confirm; the tap (or an admin's brainbot forget, or a
// forget done through another instance of a cluster) runs Forget, the one
// procedure: the backend deletes what it keeps, then this process what
// lives beside it.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.uber.org/zap"

	"brainbot/message"
	"brainbot/output"
	"brainbot/state"
)

// ButtonsForget is the kind of the buttons under /forget's question:
// place 0 confirms, place 1 cancels.
const ButtonsForget = "forget"

// The labels of /forget's buttons.
const (
	ForgetLabel       = "🗑 Forget everything"
	ForgetCancelLabel = "Cancel"
)

// What /forget says, and the notices of its taps.
const (
	ForgetOffer = "This deletes what I keep of you:\n" +
		"• our conversation and its history\n" +
		"• the voice notes and pictures I made for you\n" +
		"• the buttons under my messages and your /voice choice\n" +
		"• the notes I keep about you\n" +
		"• messages I have not answered yet and today's message count\n\n" +
		"What your messages cost stays in the usage records, without your id. Forget it all?"
	ForgetInGroup     = "/forget works in a private chat with me: a group's conversation is everyone's."
	ForgetDone        = "Done: I have forgotten our conversation and what I kept of you. Your next message starts a new conversation."
	ForgetCancelled   = "→ Cancelled: nothing was deleted."
	NoticeForgetting  = "Forgetting…"
	NoticeCancelled   = "Cancelled."
	NoticeNotTheirs   = "Only the person who asked can use these buttons."
	NoticeForgetFired = "This was done already."
	NoticeForgetBusy  = "I am still answering you: tap again once my answer is out."
)

// offerForget answers /forget: in the user's private chat with what will
// go, under a button to confirm and one to cancel; anywhere else (a
// group's conversation is everyone's; a guest answer carries no buttons),
// with where it works.
func (p *Pipeline) offerForget(r *request) {
	if !r.in.Private() || r.in.Guest != nil || r.in.Key.User() != r.in.Sender || r.in.Sender <= 0 {
		r.say("command", ForgetInGroup)
		return
	}
	b := state.Buttons{ID: state.NewButtonsID(), Kind: ButtonsForget, User: r.in.Sender, Options: []string{"forget", "cancel"}, Text: ForgetOffer}
	r.sum.outcome = "command"
	r.replyUnder(b, message.Keyboard{
		{{Text: ForgetLabel, Data: callbackData(b.ID, 0)}},
		{{Text: ForgetCancelLabel, Data: callbackData(b.ID, 1)}},
	})
}

// forgetTap takes a tap under /forget's question: the first tap of the
// user who asked confirms (place 0) or cancels.
func (p *Pipeline) forgetTap(ctx context.Context, t *tap, place int) {
	switch {
	case t.buttons.User != t.in.Sender:
		t.outcome, t.notice = "not_asker", NoticeNotTheirs
		return
	case p.answers.current(t.in.Key.String()) != nil:
		// The answer would keep its session, and store its transcript,
		// after they were deleted.
		t.outcome, t.notice = "busy", NoticeForgetBusy
		return
	}
	used, err := p.store.UseButtons(ctx, t.buttons.ID, t.in.ID)
	switch {
	case err != nil:
		t.outcome, t.notice = "error", NoticeTrouble
		t.log.Warn("could not record a tap under /forget", zap.Error(err))
		return
	case !used:
		t.outcome, t.notice = "used", NoticeForgetFired
		return
	}
	out := p.cfg.Chats.Outbox(t.in.Key, false, 0, t.log)
	if place != 0 {
		t.outcome, t.notice = "cancelled", NoticeCancelled
		t.then = func(ctx context.Context) {
			if err := out.Amend(ctx, t.in.MessageID, t.buttons.Text, ForgetCancelled); err != nil {
				t.log.Warn("could not show the cancel under /forget", zap.Error(err))
			}
		}
		return
	}
	t.outcome, t.notice = "forgotten", NoticeForgetting
	t.then = func(ctx context.Context) {
		reply := ForgetDone
		if _, err := p.Forget(ctx, t.in.Key.Bot, t.in.Sender, "user"); err != nil {
			reply = t.brain.Messages.Error
		} else if err := out.DropButtons(ctx, t.in.MessageID); err != nil {
			t.log.Info("could not take /forget's buttons away", zap.Error(err))
		}
		if err := out.Text(ctx, reply, false); err != nil && !errors.Is(err, message.ErrBlocked) {
			t.log.Warn("could not say the user is forgotten", zap.Error(err))
		}
	}
}

// Forget deletes what is kept of user's with bot ("": every bot): the
// backend's records (state.Conversations.ForgetUser), then here the CLI's
// transcripts, the files generated for them and their conversations'
// warm CLIs. by says who asked ("user", "admin") for the log line, which
// holds counts only.
func (p *Pipeline) Forget(ctx context.Context, bot string, user int64, by string) (state.Forgotten, error) {
	f, err := p.store.ForgetUser(ctx, bot, user)
	if err != nil {
		p.log.Error("could not forget a user", zap.String("bot", bot), zap.Int64("user", user), zap.String("by", by), zap.Error(err))
		return f, fmt.Errorf("forget: %w", err)
	}
	here := p.ForgetHere(ctx, f)
	p.log.Info("user forgotten", zap.String("bot", bot), zap.Int64("user", user), zap.String("by", by),
		zap.Int("conversations", len(f.Conversations)), zap.Int("sessions", len(f.Sessions)), zap.Int("notes", f.Notes),
		zap.Int("transcripts", here.Transcripts), zap.Int("files", here.Files), zap.Int("unanswered", here.Unanswered))
	return f, nil
}

// Queues are the conversations' messages waiting to be answered (the
// intake's queues).
type Queues interface {
	// DropWaiting drops, unanswered, the messages waiting in user's
	// conversations with bot ("": every bot), and says how many went.
	DropWaiting(bot string, user int64) int
}

// ForgotHere counts what a forget deleted in this process.
type ForgotHere struct {
	Transcripts, Files int
	// Unanswered are the messages that waited in the forgotten
	// conversations' queues.
	Unanswered int
}

func (h *ForgotHere) add(more ForgotHere) {
	h.Transcripts += more.Transcripts
	h.Files += more.Files
	h.Unanswered += more.Unanswered
}

// ForgetHere deletes this process's part of what f forgot: the messages
// waiting in its conversations' queues, the answers being written in
// them, their warm CLIs, the CLI's transcripts of its sessions and the
// files generated for its user. An instance of a cluster runs it for a
// forget done through another (state.Conversations.WatchForgets).
func (p *Pipeline) ForgetHere(ctx context.Context, f state.Forgotten) (here ForgotHere) {
	here.Unanswered = p.queues.DropWaiting(f.Bot, f.User)
	again := p.forgetRunning(f)
	here.add(p.deleteHere(f))
	if again {
		// An answer stored its session before it learnt of the forget:
		// deleted once more, with what it stored.
		stored, err := p.store.ForgetUser(ctx, f.Bot, f.User)
		if err != nil {
			p.log.Error("could not forget what an answer stored after its user was forgotten", zap.String("bot", f.Bot),
				zap.Int64("user", f.User), zap.Error(err))
			return here
		}
		here.add(p.deleteHere(stored))
	}
	return here
}

// errForgotten ends an answer whose user was forgotten while it was
// written: it keeps nothing and sends nothing.
var errForgotten = errors.New("the user was forgotten while the answer was written")

// forgetRunning stops the answers being written in the conversations of
// f's user: they store nothing from now on (keepSession), and end at
// once. It reports whether one of them had stored its session already.
func (p *Pipeline) forgetRunning(f state.Forgotten) (stored bool) {
	for _, a := range p.answers.ofUser(f.Bot, f.User) {
		a.mu.Lock()
		a.forgotten = true
		stored = stored || a.kept
		a.mu.Unlock()
		p.claude.Interrupt(a.conversation.String())
	}
	return stored
}

// discardSession deletes what this machine holds of session id of a
// conversation whose user was forgotten while it was answered: its warm
// CLI, and the transcript that CLI wrote.
func (p *Pipeline) discardSession(k message.Key, id string) {
	p.claude.End(k.String())
	p.store.Forget(k.Bot, id)
	p.deleteTranscript(k.Bot, id)
}

// deleteHere deletes the warm CLIs of f's conversations, the CLI's
// transcripts of its sessions and the files generated for its user.
func (p *Pipeline) deleteHere(f state.Forgotten) (here ForgotHere) {
	var bots []string
	for _, k := range f.Conversations {
		p.claude.End(k.String())
		if !slices.Contains(bots, k.Bot) {
			bots = append(bots, k.Bot)
		}
	}
	// A session is named without its bot: its transcript is in the folder
	// of one of the bots of the conversations forgotten.
	for _, bot := range bots {
		for _, s := range f.Sessions {
			if p.deleteTranscript(bot, s) {
				here.Transcripts++
			}
		}
	}
	files, err := output.RemoveUser(p.cfg.DataDir, f.Bot, f.User)
	if err != nil {
		p.log.Warn("could not delete a forgotten user's files", zap.String("bot", f.Bot), zap.Int64("user", f.User), zap.Error(err))
	}
	here.Files = files
	return here
}

// deleteTranscript deletes the CLI's transcript of bot's session, and
// the folder the CLI may keep beside it (large tool results, subagents);
// true if there was one.
func (p *Pipeline) deleteTranscript(bot, session string) bool {
	path := p.claude.SessionFile(bot, session)
	_ = os.RemoveAll(strings.TrimSuffix(path, filepath.Ext(path)))
	err := os.Remove(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		p.log.Warn("could not delete a forgotten session's transcript", zap.String("bot", bot), zap.String("session", session), zap.Error(err))
	}
	return err == nil
}
