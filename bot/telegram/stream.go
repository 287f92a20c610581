package telegram

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
	"unicode/utf16"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"go.uber.org/zap"

	"brainbot/message"
)

// Stream shows a text reply while the model writes it: as a draft in a
// private chat (sendMessageDraft), or as a message it edits (groups, and
// private chats where drafts fail). The first text shows at once, then at
// most once every streamEvery. The streamed text is plain: formatting
// comes with the final reply, which replaces the draft (sendMessage) or is
// edited into the message (see finish). A draft carries a stop button
// (can_stop): Telegram reports it pressed with the draft's id (DraftID),
// keeping the draft shown until the real message comes (keep_on_stop).
type Stream struct {
	out     *Outbox
	every   time.Duration
	draftID int64 // 0 when the stream never shows drafts
	// buttons go under the streamed message (Attach before Stream), until
	// the final reply replaces them.
	buttons message.Keyboard

	mu sync.Mutex
	// rich: drafts may be rich (UseRich); always: whatever the text.
	rich, always bool
	latest       string
	changed      chan struct{} // has a value when latest is newer than what shows
	// firstShown is when the first streamed text reached the chat.
	firstShown time.Time

	// Owned by run's goroutine until done is closed.
	messageID int // the message edited (0 until sent)
	shown     string
	useEdits  bool
	notBefore time.Time // a 429's retry_after

	stop     chan struct{} // closed by cancel: nothing new is shown
	stopOnce sync.Once
	done     chan struct{}
}

// Stream starts streaming a reply to the outbox's chat, until Finish.
// Its first message answers the message the outbox replies to, and the
// outbox's next text (the final reply) replaces what it showed. Buttons
// attached before go under the streamed message (not under a draft).
func (o *Outbox) Stream(ctx context.Context) *Stream {
	s := &Stream{
		out:      o,
		every:    o.t.StreamEvery,
		changed:  make(chan struct{}, 1),
		useEdits: o.chat.Group || o.t.noDrafts.has(o.chat.ID),
		buttons:  o.keyboard,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	o.keyboard = nil
	if !s.useEdits {
		// Non-zero, and small enough for any JSON number reader.
		s.draftID = 1 + rand.Int64N(1<<31-1)
	}
	go s.run(ctx)
	return s
}

// Update is the reply so far (claude.Request.OnText). It never blocks.
func (s *Stream) Update(text string) {
	s.mu.Lock()
	s.latest = text
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// run shows the latest text whenever it changed, until finish. A call
// under way when finish comes is not cut short: had Telegram got it
// already, the user would see the streamed message and then the final
// reply as another; finished, its message takes the final reply.
func (s *Stream) run(ctx context.Context) {
	defer close(s.done)
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.stop:
			return
		case <-s.changed:
		}
		wait := max(time.Until(last.Add(s.every)), time.Until(s.notBefore))
		if !last.IsZero() && wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-s.stop:
				return
			case <-time.After(wait):
			}
		}
		select {
		case <-s.stop:
			return
		default:
		}
		s.mu.Lock()
		text := s.latest
		s.mu.Unlock()
		if !s.richDraft(text) {
			text = clip(text, MaxMessageLen)
		}
		if text == s.shown {
			continue
		}
		last = time.Now()
		if s.show(ctx, text) {
			s.shown = text
			s.mu.Lock()
			if s.firstShown.IsZero() {
				s.firstShown = last
			}
			s.mu.Unlock()
		}
	}
}

// show puts text in the chat once, with no retries: a failed update is
// overtaken by the next one.
func (s *Stream) show(ctx context.Context, text string) bool {
	client, err := s.out.api()
	switch {
	case err != nil:
	case !s.useEdits && s.richDraft(text):
		_, err = client.SendRichMessageDraft(ctx, &tgbot.SendRichMessageDraftParams{ChatID: s.out.chat.ID, MessageThreadID: s.out.chat.Thread,
			DraftID: int(s.draftID), RichMessage: models.InputRichMessage{Markdown: clip(text, MaxRichLen)}, CanStop: true, KeepOnStop: true})
		if c := s.out.client(); c != nil && errors.Is(err, tgbot.ErrorNotFound) {
			c.noRich.Store(true) // Rich will not try either
			s.out.log.Info("the Bot API server does not know rich drafts: streaming plain drafts", zap.Error(err))
			return s.show(ctx, clip(text, MaxMessageLen))
		}
	case !s.useEdits:
		_, err = client.SendMessageDraft(ctx, &tgbot.SendMessageDraftParams{ChatID: s.out.chat.ID, MessageThreadID: s.out.chat.Thread,
			DraftID: strconv.FormatInt(s.draftID, 10), Text: text, CanStop: true, KeepOnStop: true})
		if err != nil && !isTooMany(err) && ctx.Err() == nil {
			s.out.log.Info("drafts unavailable in this chat: streaming by edits", zap.Error(err))
			s.out.t.noDrafts.add(s.out.chat.ID)
			s.useEdits = true
			return s.show(ctx, text)
		}
	case s.messageID == 0:
		var m *models.Message
		m, err = client.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: s.out.chat.ID, MessageThreadID: s.out.chat.Thread,
			ReplyParameters: s.out.reply(), Text: text, ReplyMarkup: buttonsOrNone(s.buttons)})
		if err == nil {
			s.messageID = m.ID
		}
	default:
		_, err = client.EditMessageText(ctx, &tgbot.EditMessageTextParams{ChatID: s.out.chat.ID, MessageID: s.messageID, Text: text,
			ReplyMarkup: buttonsOrNone(s.buttons)})
	}
	var tooMany *tgbot.TooManyRequestsError
	if errors.As(err, &tooMany) {
		s.notBefore = time.Now().Add(time.Duration(tooMany.RetryAfter) * time.Second)
	}
	if err != nil && ctx.Err() == nil {
		s.out.log.Debug("streamed text not shown", zap.Error(err))
	}
	return err == nil
}

// Finish stops streaming and returns when the first text showed (zero:
// never). The outbox's next text replaces what showed: it is edited into
// the streamed message (a draft is replaced by the final sendMessage).
func (s *Stream) Finish() (firstShown time.Time) {
	s.Cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out.edit = s.messageID
	return s.firstShown
}

// Withdraw deletes the message a finished stream showed, which the next
// text would have replaced: an answer dropped after it began to show (its
// question was edited) leaves nothing of itself in the chat. A draft
// needs no deleting, and without a streamed message it does nothing.
func (o *Outbox) Withdraw(ctx context.Context) error {
	id := o.edit
	if id == 0 {
		return nil
	}
	o.edit = 0
	return o.blockedOr(o.call(ctx, "deleteMessage", func(ctx context.Context, api *tgbot.Bot) error {
		_, err := api.DeleteMessage(ctx, &tgbot.DeleteMessageParams{ChatID: o.chat.ID, MessageID: id})
		return err
	}))
}

// UseRich lets the stream show rich drafts (sendRichMessageDraft, the
// same draft id) in a private chat, before its first Update: for text
// that Rich would send as a rich message (always: any text; else text
// that needs one), so the draft looks like the reply that replaces it.
func (s *Stream) UseRich(always bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rich, s.always = true, always
}

// richDraft: text streams as a rich draft, by the rule Rich sends by.
func (s *Stream) richDraft(text string) bool {
	s.mu.Lock()
	rich, always := s.rich, s.always
	s.mu.Unlock()
	c := s.out.client()
	return rich && !s.useEdits && c != nil && !c.noRich.Load() && utf16Len(text) <= MaxRichLen && (always || needsRich(text))
}

// DraftID is the id of the drafts the stream shows (0: it edits a
// message instead, and has no stop button).
func (s *Stream) DraftID() int64 { return s.draftID }

// Cancel stops streaming without waiting for the call under way; Finish
// calls it, and a caller defers it for a panic that skips Finish.
func (s *Stream) Cancel() { s.stopOnce.Do(func() { close(s.stop) }) }

func isTooMany(err error) bool {
	var tooMany *tgbot.TooManyRequestsError
	return errors.As(err, &tooMany)
}

// clip cuts text to at most n UTF-16 code units (Telegram's measure).
func clip(text string, n int) string {
	units := utf16.Encode([]rune(text))
	if len(units) <= n {
		return text
	}
	return string(utf16.Decode(units[:n]))
}

// chatSet is a set of chat ids safe for concurrent use.
type chatSet struct {
	mu  sync.Mutex
	ids map[int64]bool
}

func (c *chatSet) add(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[int64]bool{}
	}
	c.ids[id] = true
}

func (c *chatSet) has(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[id]
}
