package bot

import (
	"cmp"
	"context"
	"strings"
	"time"
	"unicode/utf16"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/store"
)

// incoming is one message as it arrived, from Telegram or from the journal
// of an earlier process: what the pipeline answers.
type incoming struct {
	requestID string
	bot       string
	chat      int64
	chatType  models.ChatType
	// thread is the forum topic the message was posted in (0 elsewhere).
	thread int
	user   int64
	// sender is the author's display name, shown to the model in groups.
	sender    string
	messageID int
	// firstName and language are the author's, as Telegram gives them,
	// for the system prompt's variables (empty after a replay: they are
	// not journaled).
	firstName, language string
	// text is what the user wrote (a caption for a file), without the
	// bot's own @mention.
	text string
	// command is the bot command without "/" and "@bot" ("" for text).
	command string
	// forOtherBot: a command addressed to another bot (/cmd@other), ignored.
	forOtherBot bool
	// media are the files the message carries (an album's, all of them).
	media     []attachment
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
	// client is the bot's Telegram client at arrival, used if the bot is
	// reconnecting when the answer is sent.
	client *tgbot.Bot
	// fallback is the brain at arrival, used if the brain is removed
	// before the message is answered.
	fallback *brain.Brain
	// updateID is Telegram's id of the update that brought it (0 after a
	// replay: it is not journaled), for the logs.
	updateID int64
}

// conversation is where the message belongs: the queue it waits in (its
// messages are answered one at a time, in order, so a session is never
// resumed by two CLI processes at once) and the session it continues.
func (in *incoming) conversation() store.Conversation {
	return store.Conversation{Bot: in.bot, Chat: in.chat, Thread: in.thread}
}

func (in *incoming) inGroup() bool {
	return in.chatType == models.ChatTypeGroup || in.chatType == models.ChatTypeSupergroup
}

// prompt is the message as the model reads it: in a group, prefixed with
// its author's name, so members can be told apart.
func (in *incoming) prompt() string {
	if in.inGroup() && in.sender != "" {
		return strings.TrimSpace(in.sender + ": " + in.text)
	}
	return in.text
}

// journalEntries are the message's entries in the journal: one, or an
// album's (none if journaling failed).
func (in *incoming) journalEntries() []int64 {
	if in.journalID == 0 {
		return in.albumEntries
	}
	return append([]int64{in.journalID}, in.albumEntries...)
}

// accept runs in the polling worker for every update, in order: it
// journals a message for this bot (and the update offset, atomically) and
// queues it. Everything else is only confirmed. It must stay fast; the
// work happens in the conversation's queue. In a cluster, d is the shared
// update, which takes the journal entry's place.
func (r *runner) accept(u *models.Update, d Delivery) {
	m := r.m
	if u.MyChatMember != nil {
		r.logMembership(u.MyChatMember)
	}
	msg := u.Message
	text, forMe := r.forMe(msg)
	var file attachment
	hasFile := false
	if forMe {
		file, hasFile = mediaOf(msg)
	}
	if !forMe || text == "" && !hasFile || hasFile && !r.wantsFile(msg, file) {
		r.confirm(u.ID, d)
		return
	}
	_, me := r.current()
	in := r.incoming(msg)
	in.updateID = u.ID
	in.text = text
	in.command, in.forOtherBot = parseCommand(msg.Text, msg.Entities, me.username)
	if in.command == "stop" && !in.forOtherBot {
		// Not queued: it is for the message the queue is busy with.
		r.confirm(u.ID, d)
		m.answerAside(in, m.pipeline.stop)
		return
	}
	if hasFile {
		file.Album = msg.MediaGroupID
		in.media = []attachment{file}
	}
	album := albumKey(in.conversation(), msg.MediaGroupID)
	// A later message of an album joins the one already admitted.
	if !r.albums.isOpen(album) && !m.admit(in) {
		r.confirm(u.ID, d)
		return
	}
	log := in.logger(m.log)
	log.Debug("message received", zap.String("text", text), zap.String("file", string(file.Kind)))
	if d != nil {
		// The stream keeps it until it is answered.
		in.deliveries = []Delivery{d}
		in.charged = d.Redelivered() // counted by the instance that began it
		r.queue(in, album)
		return
	}
	id, err := m.cfg.Store.Journal(context.WithoutCancel(m.workCtx), store.Entry{
		Bot: r.id, Chat: in.chat, Thread: in.thread, ChatType: string(in.chatType), User: in.user, Sender: in.sender,
		MessageID: in.messageID, Text: in.text, Media: encodeMedia(in.media), Created: in.arrived,
	}, r.poller(), u.ID)
	if err != nil {
		// Answering without a journal beats dropping the message.
		log.Error("could not journal message; handling it anyway", zap.Error(err))
	}
	in.journalID = id
	r.queue(in, album)
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

// wantsFile reports whether a message carrying file is for the bot to
// answer: always in private chats; in groups, a file the bot cannot read
// only when it replies to the bot or mentions it (a reply to every
// sticker posted would be noise).
func (r *runner) wantsFile(msg *models.Message, file attachment) bool {
	if !isGroup(msg.Chat) || file.Kind != mediaOther {
		return true
	}
	_, me := r.current()
	_, explicit := addressed(msg, me, brain.GroupsMention)
	return explicit
}

// forMe reports whether msg is a message for this bot, and its text (or
// caption) without the bot's mention. Edits, channel posts and service
// messages are not; in groups, only what the brain's groups setting lets
// through is.
func (r *runner) forMe(msg *models.Message) (text string, ok bool) {
	if msg == nil || msg.From == nil {
		return "", false
	}
	if !isGroup(msg.Chat) {
		return cmp.Or(msg.Text, msg.Caption), true
	}
	b := r.m.brain(r.id)
	if b == nil {
		return "", false
	}
	_, me := r.current()
	return addressed(msg, me, b.Groups)
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
func (r *runner) logMembership(c *models.ChatMemberUpdated) {
	status := c.NewChatMember.Type
	msg := "bot added to a chat"
	if status == models.ChatMemberTypeLeft || status == models.ChatMemberTypeBanned {
		msg = "bot removed from a chat"
	}
	r.log.Info(msg, zap.Int64("chat", c.Chat.ID), zap.String("chat_type", string(c.Chat.Type)),
		zap.String("status", string(status)), zap.Int64("by_user", c.From.ID))
}

func (r *runner) incoming(msg *models.Message) *incoming {
	client, _ := r.current()
	in := &incoming{
		client:    client,
		requestID: uuid.NewString(),
		bot:       r.id,
		chat:      msg.Chat.ID,
		chatType:  msg.Chat.Type,
		user:      senderID(msg),
		firstName: msg.From.FirstName,
		language:  msg.From.LanguageCode,
		messageID: msg.ID,
		arrived:   time.Now(),
		fallback:  r.m.brain(r.id),
	}
	if isGroup(msg.Chat) {
		in.sender = senderName(msg)
		if msg.IsTopicMessage {
			in.thread = msg.MessageThreadID
		}
	}
	return in
}

func (in *incoming) logger(base *zap.Logger) *zap.Logger {
	return base.With(zap.String("request_id", in.requestID), zap.String("bot", in.bot),
		zap.Int64("user", in.user), zap.Int64("chat", in.chat))
}

// parseCommand reads the bot command that starts text, recognised only by
// its bot_command entity as Telegram marks it: "/reset@mybot now" is
// "reset". A command addressed to another bot is reported as such.
func parseCommand(text string, entities []models.MessageEntity, username string) (cmd string, forOtherBot bool) {
	units := utf16.Encode([]rune(text))
	for _, e := range entities {
		start, end, ok := entitySpan(units, e)
		if e.Type != models.MessageEntityTypeBotCommand || !ok || start != 0 || end < 2 {
			continue
		}
		word := string(utf16.Decode(units[1:end]))
		name, target, addressed := strings.Cut(word, "@")
		if addressed && !strings.EqualFold(target, username) {
			return "", true
		}
		return strings.ToLower(name), false
	}
	return "", false
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
	client, me := r.current()
	var ins []*incoming
	for _, e := range entries {
		in := &incoming{requestID: uuid.NewString(), bot: r.id, chat: e.Chat, chatType: models.ChatType(e.ChatType),
			thread: e.Thread, user: e.User, sender: e.Sender, messageID: e.MessageID, text: e.Text, journalID: e.ID,
			charged: e.Mode != "", attempts: e.Attempts, arrived: time.Now(), client: client, fallback: m.brain(r.id)}
		if in.media, err = decodeMedia(e.Media); err != nil {
			in.logger(m.log).Warn("journaled message's files are unreadable; answering its text alone", zap.Error(err))
		}
		if len(in.media) == 0 && strings.HasPrefix(e.Text, "/") {
			// Entities are not journaled; a leading /word was a command.
			word, _, _ := strings.Cut(e.Text, " ")
			in.command, in.forOtherBot = parseCommand(e.Text,
				[]models.MessageEntity{{Type: models.MessageEntityTypeBotCommand, Length: len(utf16.Encode([]rune(word)))}}, me.username)
		}
		ins = append(ins, in)
	}
	for _, in := range joinAlbums(ins) {
		m.cfg.Metrics.JournalReplays.WithLabelValues(r.id).Inc()
		if in.attempts >= 2 {
			in.logger(m.log).Warn("journaled message failed after a restart already: asking the user to resend")
			m.answerAside(in, (*request).askToResend)
			continue
		}
		in.logger(m.log).Info("replaying journaled message", zap.Int("attempts", in.attempts), zap.Int("files", len(in.media)))
		m.enqueue(in)
	}
}

// skipUndecodable confirms an update the client library could not decode,
// so it cannot stall the bot, and tells the person who wrote it, in a
// private chat or by mentioning the bot in a group. Anything else (a
// reaction, a boost, a service message) passes silently but for the log.
func (r *runner) skipUndecodable(updateID int64, bad undecodable) {
	r.log.Warn("undecodable update skipped", zap.Int64("update_id", updateID), zap.Error(bad.err))
	r.m.cfg.Metrics.UndecodableUpdates.WithLabelValues(r.id).Inc()
	r.confirm(updateID, nil)
	r.tellUnreadable(bad)
}

// tellUnreadable tells the person who wrote an update that was skipped
// that it could not be read: in a private chat, or in a group when it
// mentions the bot.
func (r *runner) tellUnreadable(bad undecodable) {
	client, me := r.current()
	private := bad.chatType == string(models.ChatTypePrivate)
	if bad.user == 0 || !private && !mentions(bad.text, me.username) {
		return
	}
	in := &incoming{requestID: uuid.NewString(), bot: r.id, chat: bad.chat, chatType: models.ChatType(bad.chatType),
		user: bad.user, arrived: time.Now(), client: client, fallback: r.m.brain(r.id)}
	r.m.answerAside(in, func(req *request) { req.say("unreadable", req.brain.Messages.Unreadable) })
}

// mentions reports whether text names @username.
func mentions(text, username string) bool {
	return username != "" && strings.Contains(strings.ToLower(text), "@"+strings.ToLower(username))
}
