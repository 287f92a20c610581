package conversation

// Who may act on an answer in a group: stop it (/stop, ⏹) or answer its
// question. Its asker may; so may the group's anonymous admins, who write
// as the group itself (their messages' sender is the group); an admin of
// the group may stop any answer, and answer for the group's anonymous
// admins, since those tap as themselves. Telegram says who is an admin
// (getChatMember), asked only when the asker did not act: a tap or /stop
// is rare enough that its one call needs no cache, and a demoted admin
// loses the right at once.

import (
	"context"

	"go.uber.org/zap"

	"brainbot/message"
)

// mayStop reports whether user may stop what asker asked in conversation
// key's group (asker 0: anyone).
func (p *Pipeline) mayStop(ctx context.Context, key message.Key, asker, user int64) (bool, error) {
	if asker == 0 || user == asker || user == key.Chat {
		return true, nil
	}
	return p.cfg.Chats.IsAdmin(ctx, key.Bot, key.Chat, user)
}

// stopsOwn reports whether r's /stop may stop the answer being written:
// in a group, only its asker's or an admin's may. Otherwise r is answered
// here, with a notice only its sender sees: the group is not told of a
// stop that stopped nothing, and the sender learns why.
func (p *Pipeline) stopsOwn(r *request) bool {
	key := r.in.Key.String()
	running := p.answers.current(key)
	if !r.in.InGroup() || running == nil {
		return true
	}
	may, err := p.mayStop(r.ctx, r.in.Key, running.asker, r.in.Sender)
	switch {
	case err != nil:
		r.log.Warn("could not ask Telegram whether the user is an admin of the group", zap.Error(err))
		r.notice("error", NoticeTrouble)
		return false
	case !may:
		r.log.Info("/stop of another member's answer refused", zap.Int64("asker", running.asker))
		r.notice("not_asker", NoticeNotYours)
		return false
	case p.answers.current(key) != running:
		// It ended while Telegram was asked; the next may be someone else's.
		r.say("command", "There is nothing to stop.")
		return false
	}
	return true
}

// actForGroup makes t the group's own when the group asked (its
// anonymous admins) and Telegram says the user who tapped is an admin of
// it: their choice then reaches the model as the group's words, under the
// group's name, never their own. False when Telegram could not be asked
// (t is answered so).
func (p *Pipeline) actForGroup(ctx context.Context, t *tap) bool {
	in := t.in
	if !in.InGroup() || t.buttons.User != in.Key.Chat || in.Sender == in.Key.Chat {
		return true
	}
	admin, err := p.cfg.Chats.IsAdmin(ctx, in.Key.Bot, in.Key.Chat, in.Sender)
	if err != nil {
		t.outcome, t.notice = "error", NoticeTrouble
		t.log.Warn("could not ask Telegram whether the user is an admin of the group", zap.Error(err))
		return false
	}
	if admin {
		t.log.Info("tap by an admin of the group, for its anonymous admins")
		in.Sender, in.SenderName, in.FirstName, in.Language = in.Key.Chat, in.Tap.ChatTitle, in.Tap.ChatTitle, ""
	}
	return true
}
