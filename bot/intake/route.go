package intake

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/contain"
	"brainbot/message"
)

// route reads a delivery of a connected bot (me) and hands it on: to its
// conversation's queue or album, beside the queue, or back to its log as
// done when it needs no answer. A panic on the way is contained to it.
func (in *Intake) route(d message.Delivery, me message.Identity) {
	env := d.Envelope()
	if env.Me.ID == 0 {
		env.Me = me // read as the bot is now (a log of an earlier release kept no identity)
	}
	defer func() {
		if v := recover(); v != nil {
			contain.Report(in.cfg.Log.With(zap.String("bot", env.Bot)), in.cfg.Metrics, env.Bot, contain.Delivery, env.UpdateID, v)
			in.finish(d)
			in.tellUnreadable(env)
		}
	}()
	replay := d.Redelivered()
	u := in.decode(env)
	switch u.Kind {
	case message.Membership:
		in.logMembership(u)
	case message.Unreadable:
		in.cfg.Log.Warn("undecodable update skipped", zap.String("bot", env.Bot), zap.Int64("update_id", u.ID), zap.Error(u.Problem))
		in.cfg.Metrics.UndecodableUpdates.WithLabelValues(env.Bot).Inc()
		in.finish(d)
		in.tell(u)
		return
	case message.StopPressed:
		in.stopAside(d, u)
		return
	case message.Tapped:
		in.tap(d, u)
		return
	case message.Edited:
		in.edit(d, u)
		return
	}
	if u.Guest != nil && !me.GuestQueries {
		in.cfg.Log.Debug("guest message for a bot without guest mode: skipped", zap.String("bot", env.Bot), zap.Int64("update_id", u.ID))
		in.finish(d)
		return
	}
	if !env.Accepted && !in.wants(u) {
		if u.Kind == message.Unhandled {
			in.cfg.Log.Debug("update not handled: skipped", zap.String("bot", env.Bot), zap.Int64("update_id", u.ID), zap.String("kind", u.What))
		}
		in.finish(d)
		return
	}
	if u.Command == "stop" && !u.ForOtherBot {
		in.stopAside(d, u)
		return
	}
	m := inbound(u, d)
	album := albumKey(u.Key, u.Album)
	// A later message of an album joins the one already admitted; a
	// message an earlier release accepted was admitted then.
	// What brainbot appended itself is queued whatever the queue holds:
	// "busy" is no answer to a reminder.
	if !env.Accepted && env.Scheduled == nil && !in.albums.isOpen(album) && !in.admit(m) {
		in.finish(d)
		return
	}
	log := logger(in.cfg.Log, m)
	if replay {
		in.cfg.Metrics.JournalReplays.WithLabelValues(env.Bot).Inc()
		log.Info("replaying journaled message", zap.Int("attempts", d.Attempts()), zap.Int("files", len(u.Media)))
	}
	var kind string
	if len(u.Media) > 0 {
		kind = string(u.Media[0].Kind)
	}
	log.Debug("message received", zap.String("text", u.Text), zap.String("file", kind))
	in.queue(m, album)
}

// stopAside hands on /stop or a stop button pressed, not queued: it is for
// the message the queue is busy with.
func (in *Intake) stopAside(d message.Delivery, u message.Update) {
	in.finish(d)
	m := inbound(u, d)
	m.Progress = newProgress()
	in.aside(func(ctx context.Context) { in.cfg.Handler.Stop(ctx, m) })
}

// inbound is the message an update carries, its progress told to d; its
// request id is the update's, the same at every delivery.
func inbound(u message.Update, d message.Delivery) *message.Inbound {
	env := d.Envelope()
	return &message.Inbound{Update: u, RequestID: requestID(env), Arrived: time.Now(), Received: env.Received, Progress: newProgress(d)}
}

// decode reads env: an update from Telegram as the transport decodes
// it, or a reminder or check-in brainbot appended, which has no bytes of
// Telegram's: a message of the user's private chat, to which the persona
// writes first.
func (in *Intake) decode(env message.Envelope) message.Update {
	s := env.Scheduled
	if s == nil {
		return in.cfg.Decode(env)
	}
	return message.Update{Kind: message.Written, What: "scheduled", Key: env.Key, ChatType: "private", Sender: s.User, Scheduled: s}
}

// requestID names an update's trip through brainbot in the logs: a UUID
// made from the bot, the update's id and when it was received, so it is
// the same for every delivery of the update (replayed after a restart,
// handed to another instance) and one id follows a message from its
// arrival to its answer. The Claude CLI's transcript records the message
// under it too (claude.Request.MessageID).
func requestID(env message.Envelope) string {
	name := fmt.Sprintf("brainbot:%s/%d/%d", env.Bot, env.UpdateID, env.Received.UnixMilli())
	if s := env.Scheduled; s != nil {
		name = "brainbot:" + env.Bot + "/" + s.ID
	}
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte(name)).String()
}

// logger is the log of m's trip through brainbot.
func logger(base *zap.Logger, m *message.Inbound) *zap.Logger {
	return base.With(zap.String("request_id", m.RequestID), zap.String("bot", m.Key.Bot),
		zap.Int64("user", m.Sender), zap.Int64("chat", m.Key.Chat))
}

// wants reports whether u is a message for its bot to answer (Wants); the
// brain's groups setting is looked up for a group's message only.
func (in *Intake) wants(u message.Update) bool {
	var groups string
	if u.InGroup() {
		groups = in.cfg.Groups(u.Key.Bot)
	}
	return Wants(u, groups)
}

// Wants reports whether u is a message for its bot to answer, by the
// brain's groups setting (brain.Groups; "" for no brain): in a private
// chat, any with text or a file; in a group, what groups lets through,
// and a file the bot cannot read only when it is addressed to the bot (a
// reply to every sticker posted would be noise).
func Wants(u message.Update, groups string) bool {
	if u.Kind != message.Written || u.Text == "" && len(u.Media) == 0 && u.Scheduled == nil {
		return false
	}
	if !u.InGroup() || u.Guest != nil { // a guest message summoned the bot
		return true
	}
	switch groups {
	case brain.GroupsAll:
	case brain.GroupsMention:
		if !u.Addressed() {
			return false
		}
	default: // off, or no brain
		return false
	}
	return len(u.Media) == 0 || u.Media[0].Kind != message.Other || u.Addressed()
}

// queue puts an admitted message into its conversation's queue, or into
// its album.
func (in *Intake) queue(m *message.Inbound, album string) {
	if !in.albums.isOpen(album) {
		// Answers keep the order of messages: an album still open comes first.
		in.albums.flush(m.Key)
	}
	if album != "" {
		in.albums.add(album, m)
		return
	}
	in.enqueue(m)
}

// finish gives d back to its log as needing no answer, in the background:
// the log may have to reach its store or server.
func (in *Intake) finish(d message.Delivery) {
	in.cfg.Work.Add(1)
	go func() {
		defer in.cfg.Work.Done()
		d.Done(false)
	}()
}

// logMembership tells the admin the bot was added to or removed from a
// group.
func (in *Intake) logMembership(u message.Update) {
	msg := "bot added to a chat"
	if u.Member.Left {
		msg = "bot removed from a chat"
	}
	in.cfg.Log.Info(msg, zap.String("bot", u.Key.Bot), zap.Int64("chat", u.Key.Chat), zap.String("chat_type", u.ChatType),
		zap.String("status", u.Member.Status), zap.Int64("by_user", u.Member.By))
}

// Take takes env in: store puts it in its log. A panic on the way is
// contained: reported, the update skipped as stored (a replay would panic
// again) and its sender told it could not be read. The error is store's.
func (in *Intake) Take(env message.Envelope, store func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			contain.Report(in.cfg.Log.With(zap.String("bot", env.Bot)), in.cfg.Metrics, env.Bot, contain.Intake, env.UpdateID, v)
			in.tellUnreadable(env)
			err = nil
		}
	}()
	return store()
}

// tellUnreadable tells the sender of env, if a person wrote it, that it
// could not be read.
func (in *Intake) tellUnreadable(env message.Envelope) {
	if u := in.decode(env); u.Kind == message.Written && u.Scheduled == nil {
		in.tell(u)
	}
}

// tell tells the person who wrote u that it could not be read: in a
// private chat, or in a group when it addresses the bot. A tap is
// answered as one on a button that no longer works (its Tap is
// inaccessible), so the user's spinner stops with a word. Anything else
// (a reaction, a boost, a service message) passes silently but for the
// log.
func (in *Intake) tell(u message.Update) {
	m := &message.Inbound{Update: u, RequestID: uuid.NewString(), Arrived: time.Now(), Progress: newProgress()}
	switch {
	case u.Tap.QueryID != "":
		in.aside(func(ctx context.Context) { in.cfg.Handler.Tap(ctx, m) })
	case u.Sender == 0 || !u.Private() && !u.Addressed():
	default:
		in.aside(func(ctx context.Context) { in.cfg.Handler.Unreadable(ctx, m) })
	}
}
