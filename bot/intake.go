package bot

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/message"
	"brainbot/bot/store"
	"brainbot/bot/telegram"
)

// incoming is one message as it arrived, from Telegram or from the journal
// of an earlier process: what the pipeline answers.
type incoming struct {
	message.Update
	requestID string
	journalID int64
	// albumEntries are the journal entries of an album's later messages,
	// answered and cleared with this one.
	albumEntries []int64
	// charged: an earlier process counted it against the daily limit
	// (replays).
	charged bool
	// attempts is how often work on it started before (replays).
	attempts int
	// deliveries are the shared updates of the message (an album's, all
	// of them), acknowledged when it is answered (in a cluster).
	deliveries []Delivery
	arrived    time.Time
	// fallback is the brain at arrival, used if the brain is removed
	// before the message is answered.
	fallback *brain.Brain
}

// conversation is where the message belongs: the queue it waits in (its
// messages are answered one at a time, in order, so a session is never
// resumed by two CLI processes at once) and the session it continues.
func (in *incoming) conversation() store.Conversation { return in.Key }

// prompt is the message as the model reads it: in a group, prefixed with
// its author's name, so members can be told apart.
func (in *incoming) prompt() string {
	if in.InGroup() && in.SenderName != "" {
		return strings.TrimSpace(in.SenderName + ": " + in.Text)
	}
	return in.Text
}

// journalEntries are the message's entries in the journal: one, or an
// album's (none if journaling failed).
func (in *incoming) journalEntries() []int64 {
	if in.journalID == 0 {
		return in.albumEntries
	}
	return append([]int64{in.journalID}, in.albumEntries...)
}

// take runs in the polling worker for every update, in order: raw as
// Telegram sent it. Alone it journals and queues it (accept); in a
// cluster it publishes it for the instance that owns its conversation.
// false: not taken, polling stops.
func (r *runner) take(ctx context.Context, id int64, raw []byte) bool {
	env := message.Envelope{Bot: r.id, Me: r.identity(), UpdateID: id, Raw: raw, Received: time.Now()}
	_, env.Key, _ = telegram.KeyOf(r.id, raw)
	return r.contain(stageIntake, env, nil, func() bool {
		if r.m.cfg.Cluster != nil {
			return r.publish(ctx, env)
		}
		r.accept(env, nil)
		return true
	})
}

// accept takes in one update for this bot: it journals a message for the
// bot (and the update offset, atomically) and queues it. Everything else
// is only confirmed. It must stay fast; the work happens in the
// conversation's queue. In a cluster, d is the shared update, which takes
// the journal entry's place.
func (r *runner) accept(env message.Envelope, d Delivery) {
	m := r.m
	u := telegram.Decode(env)
	switch u.Kind {
	case message.Membership:
		r.logMembership(u)
	case message.Unreadable:
		r.skipUnreadable(u, d)
		return
	}
	if !r.wants(u) {
		r.confirm(u.ID, d)
		return
	}
	in := r.incoming(u)
	if in.Command == "stop" && !in.ForOtherBot {
		// Not queued: it is for the message the queue is busy with.
		r.confirm(u.ID, d)
		m.answerAside(in, m.pipeline.stop)
		return
	}
	album := albumKey(in.conversation(), u.Album)
	// A later message of an album joins the one already admitted.
	if !r.albums.isOpen(album) && !m.admit(in) {
		r.confirm(u.ID, d)
		return
	}
	log := in.logger(m.log)
	var kind string
	if len(u.Media) > 0 {
		kind = string(u.Media[0].Kind)
	}
	log.Debug("message received", zap.String("text", u.Text), zap.String("file", kind))
	if d != nil {
		// The stream keeps it until it is answered.
		in.deliveries = []Delivery{d}
		in.charged = d.Redelivered() // counted by the instance that began it
		r.queue(in, album)
		return
	}
	id, err := m.cfg.Store.Journal(context.WithoutCancel(m.workCtx), store.Entry{
		Bot: r.id, Chat: in.Key.Chat, Thread: in.Key.Thread, ChatType: in.ChatType, User: in.Sender, Sender: in.SenderName,
		MessageID: in.MessageID, Text: in.Text, Media: encodeMedia(in.Media), Created: in.arrived,
	}, r.poller(), u.ID)
	if err != nil {
		// Answering without a journal beats dropping the message.
		log.Error("could not journal message; handling it anyway", zap.Error(err))
	}
	in.journalID = id
	r.queue(in, album)
}

// wants reports whether u is a message for this bot to answer: in a
// private chat, any with text or a file; in a group, what the brain's
// groups setting lets through, and a file the bot cannot read only when
// it is addressed to the bot (a reply to every sticker posted would be
// noise).
func (r *runner) wants(u message.Update) bool {
	if u.Kind != message.Written || u.Text == "" && len(u.Media) == 0 {
		return false
	}
	if !u.InGroup() {
		return true
	}
	b := r.m.brain(r.id)
	if b == nil || b.Groups == brain.GroupsOff || b.Groups == brain.GroupsMention && !u.Addressed() {
		return false
	}
	return len(u.Media) == 0 || u.Media[0].Kind != message.Other || u.Addressed()
}

// queue puts an accepted message into its conversation's queue, or into
// its album.
func (r *runner) queue(in *incoming, album string) {
	m := r.m
	if !r.albums.isOpen(album) {
		// Answers keep the order of messages: an album still open comes first.
		r.albums.flush(in.conversation())
	}
	if album != "" {
		r.albums.add(album, in)
		return
	}
	m.enqueue(in)
}

// confirm records that update id needs no answer: the shared update d
// is acknowledged, or without one the offset saved.
func (r *runner) confirm(id int64, d Delivery) {
	if d != nil {
		d.Done(false)
		return
	}
	if err := r.m.cfg.Store.SetOffset(context.WithoutCancel(r.m.workCtx), r.poller(), id); err != nil {
		r.log.Error("could not save update offset", zap.Error(err))
	}
}

// logMembership tells the admin the bot was added to or removed from a
// group.
func (r *runner) logMembership(u message.Update) {
	msg := "bot added to a chat"
	if u.Member.Left {
		msg = "bot removed from a chat"
	}
	r.log.Info(msg, zap.Int64("chat", u.Key.Chat), zap.String("chat_type", u.ChatType),
		zap.String("status", u.Member.Status), zap.Int64("by_user", u.Member.By))
}

func (r *runner) incoming(u message.Update) *incoming {
	return &incoming{Update: u, requestID: uuid.NewString(), arrived: time.Now(), fallback: r.m.brain(r.id)}
}

func (in *incoming) logger(base *zap.Logger) *zap.Logger {
	return base.With(zap.String("request_id", in.requestID), zap.String("bot", in.Key.Bot),
		zap.Int64("user", in.Sender), zap.Int64("chat", in.Key.Chat))
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
	me := r.identity()
	var ins []*incoming
	for _, e := range entries {
		raw, err := legacyUpdate(e)
		if err != nil {
			m.log.Warn("journaled message's files are unreadable; answering its text alone", zap.String("bot", r.id),
				zap.Int64("journal_id", e.ID), zap.Error(err))
		}
		in := r.incoming(telegram.Decode(message.Envelope{Bot: r.id, Me: me, Raw: raw}))
		in.journalID, in.charged, in.attempts = e.ID, e.Mode != "", e.Attempts
		ins = append(ins, in)
	}
	for _, in := range joinAlbums(ins) {
		m.cfg.Metrics.JournalReplays.WithLabelValues(r.id).Inc()
		if in.attempts >= 2 {
			in.logger(m.log).Warn("journaled message failed after a restart already: asking the user to resend")
			m.answerAside(in, (*request).askToResend)
			continue
		}
		in.logger(m.log).Info("replaying journaled message", zap.Int("attempts", in.attempts), zap.Int("files", len(in.Media)))
		m.enqueue(in)
	}
}

// skipUnreadable confirms an update that could not be decoded, so it
// cannot stall the bot, and tells the person who wrote it, in a private
// chat or by mentioning the bot in a group. Anything else (a reaction, a
// boost, a service message) passes silently but for the log.
func (r *runner) skipUnreadable(u message.Update, d Delivery) {
	r.log.Warn("undecodable update skipped", zap.Int64("update_id", u.ID), zap.Error(u.Problem))
	r.m.cfg.Metrics.UndecodableUpdates.WithLabelValues(r.id).Inc()
	r.confirm(u.ID, d)
	r.tellUnreadable(u)
}

// tellUnreadable tells the person who wrote an update that was skipped
// that it could not be read: in a private chat, or in a group when it
// addresses the bot.
func (r *runner) tellUnreadable(u message.Update) {
	if u.Sender == 0 || !u.Private() && !u.Addressed() {
		return
	}
	in := r.incoming(u)
	r.m.answerAside(in, func(req *request) { req.say("unreadable", req.brain.Messages.Unreadable) })
}
