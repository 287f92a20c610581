package telegram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"go.uber.org/zap"

	"brainbot/message"
)

const (
	// maxAttempts bounds how often one Telegram call is tried.
	maxAttempts = 5
	// maxRetryAfter caps a 429's wait: a longer one fails the call.
	maxRetryAfter = 5 * time.Minute
)

// Chat is where an outbox sends: a chat, its forum topic (0 elsewhere),
// and whether it is a group.
type Chat struct {
	ID     int64
	Thread int
	Group  bool
}

// Outbox sends to one chat (and forum topic) through one bot. In groups
// its first message replies to the message it answers, so the thread
// reads naturally among other members' messages. It is used by one
// goroutine.
type Outbox struct {
	t *Transport
	// client is the bot's client, looked up on every attempt: a brain
	// edit may replace the token while a reply is on its way.
	client  func() *Client
	chat    Chat
	replyTo *models.ReplyParameters
	// edit is a message of ours the next text replaces (a streamed
	// reply's message), instead of a new one.
	edit int
	// keyboard goes under the next text's last part (Attach).
	keyboard message.Keyboard
	// sent are the ids of the messages sent, in order: a streamed
	// message too, once the reply is edited into it.
	sent []int
	log  *zap.Logger
}

// Outbox makes the outbox of chat, sending through the client that
// client returns at each attempt; replyTo is the message its first
// message answers (0: none; in private chats it is not quoted).
func (t *Transport) Outbox(client func() *Client, chat Chat, replyTo int, log *zap.Logger) *Outbox {
	o := &Outbox{t: t, client: client, chat: chat, log: log}
	if chat.Group && replyTo != 0 {
		// Sent even if the message was deleted meanwhile.
		o.replyTo = &models.ReplyParameters{MessageID: replyTo, AllowSendingWithoutReply: true}
	}
	return o
}

// errNotConnected: the bot has no client (yet, or any more).
var errNotConnected = errors.New("bot not connected to Telegram")

// api is the bot's current client library.
func (o *Outbox) api() (*tgbot.Bot, error) {
	c := o.client()
	if c == nil {
		return nil, errNotConnected
	}
	return c.api, nil
}

// Sent are the ids of the messages that carry what was sent so far, in
// order: new ones, and a streamed message the reply was edited into.
func (o *Outbox) Sent() []int { return o.sent }

func (o *Outbox) note(m *models.Message) {
	if m != nil {
		o.sent = append(o.sent, m.ID)
	}
}

// deliver runs call (Bot API method), which sends one message, as call
// does, and notes the message sent.
func (o *Outbox) deliver(ctx context.Context, method string, call func(context.Context, *tgbot.Bot) (*models.Message, error)) error {
	return o.call(ctx, method, func(ctx context.Context, api *tgbot.Bot) error {
		m, err := call(ctx, api)
		if err == nil {
			o.note(m)
		}
		return err
	})
}

// reply returns the reply parameters for the next message: the first
// replies to the user's message, the rest follow it.
func (o *Outbox) reply() *models.ReplyParameters {
	r := o.replyTo
	o.replyTo = nil
	return r
}

// call runs one Bot API call through the bot's current client, with the
// transport's retry rules.
func (o *Outbox) call(ctx context.Context, method string, call func(context.Context, *tgbot.Bot) error) error {
	return o.t.retry(ctx, method, func(ctx context.Context) error {
		api, err := o.api()
		if err != nil {
			return err
		}
		return call(ctx, api)
	})
}

// retry runs call (Bot API method) until it succeeds, waiting out 429s
// (retry_after) and backing off on network errors, at most maxAttempts
// times. Errors that retrying cannot fix (bad request, blocked) return at
// once; a blocked user's is message.ErrBlocked. The error names method.
func (t *Transport) retry(ctx context.Context, method string, call func(context.Context) error) error {
	if err := t.attempts(ctx, call); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

func (t *Transport) attempts(ctx context.Context, call func(context.Context) error) error {
	backoff := t.RetryMin
	var err error
	for attempt := 1; ; attempt++ {
		err = call(ctx)
		if err == nil {
			return nil
		}
		var wait time.Duration
		var tooMany *tgbot.TooManyRequestsError
		switch {
		case errors.Is(err, tgbot.ErrorForbidden):
			return fmt.Errorf("%w: %w", message.ErrBlocked, err)
		case errors.As(err, &tooMany):
			wait = time.Duration(tooMany.RetryAfter) * time.Second
			if wait > maxRetryAfter {
				return err
			}
		case IsPermanent(err):
			return err
		default:
			wait = backoff
			backoff *= 2
		}
		if attempt == maxAttempts || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// IsPermanent: Telegram answered, and the same call would fail again.
// Other answers (5xx: Telegram's own trouble) are transient like network
// errors, and so is 401: a revoked token is usually being replaced by a
// brain edit, and the next attempt goes out through the new one.
func IsPermanent(err error) bool {
	for _, e := range []error{tgbot.ErrorBadRequest, tgbot.ErrorNotFound, tgbot.ErrorConflict} {
		if errors.Is(err, e) {
			return true
		}
	}
	var migrate *tgbot.MigrateError
	return errors.As(err, &migrate)
}

// Text sends text in parts of at most 4096 characters, the buttons
// attached (Attach) under the last. Formatted, it goes as HTML converted
// from Claude's Markdown, falling back to plain text for a part Telegram
// cannot parse. A blocked user is logged at info and reported as
// message.ErrBlocked.
func (o *Outbox) Text(ctx context.Context, text string, formatted bool) error {
	parts := splitMessage(text, MaxMessageLen)
	keyboard := o.keyboard
	o.keyboard = nil
	for i, part := range parts {
		replyTo, editID := o.reply(), o.edit
		o.edit = 0
		var buttons message.Keyboard
		if i == len(parts)-1 {
			buttons = keyboard
		}
		send := func(text string, mode models.ParseMode) error {
			if editID != 0 {
				// The buttons the streamed message had go; the reply's come.
				err := o.editText(ctx, editID, text, mode, buttons)
				if err == nil {
					o.sent = append(o.sent, editID) // it carries the reply now
				}
				return err
			}
			return o.call(ctx, "sendMessage", func(ctx context.Context, api *tgbot.Bot) error {
				m, err := api.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: o.chat.ID, MessageThreadID: o.chat.Thread,
					ReplyParameters: replyTo, Text: text, ParseMode: mode, ReplyMarkup: buttonsOrNone(buttons)})
				if err == nil {
					o.note(m)
				}
				return err
			})
		}
		var err error
		if formatted {
			err = send(markdownToHTML(part), models.ParseModeHTML)
			if isEntityError(err) {
				o.log.Warn("Telegram rejected the formatted reply; sending it as plain text", zap.Error(err))
				err = send(part, "")
			}
		} else {
			err = send(part, "")
		}
		if err != nil {
			return o.blockedOr(err)
		}
	}
	o.log.Debug("text sent", zap.String("text", text))
	return nil
}

// isNotModified: an edit that changes nothing, which Telegram refuses.
func isNotModified(err error) bool {
	return errors.Is(err, tgbot.ErrorBadRequest) && strings.Contains(err.Error(), "message is not modified")
}

func isEntityError(err error) bool {
	return errors.Is(err, tgbot.ErrorBadRequest) && strings.Contains(err.Error(), "can't parse entities")
}

func (o *Outbox) blockedOr(err error) error {
	if errors.Is(err, message.ErrBlocked) {
		o.log.Info("user blocked the bot: reply dropped", zap.Error(err))
	}
	return err
}

// File uploads a voice note (sendVoice) or a picture (sendPhoto, or
// sendDocument when Telegram refuses it as a photo) from path, the
// buttons attached (Attach) under it.
func (o *Outbox) File(ctx context.Context, kind message.FileKind, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	name := filepath.Base(path)
	replyTo := o.reply()
	buttons := buttonsOrNone(o.keyboard)
	o.keyboard = nil
	if kind == message.VoiceNote {
		// Each note of an answer longer than one replies to the message.
		o.replyTo = replyTo
	}
	upload := func() *models.InputFileUpload {
		return &models.InputFileUpload{Filename: name, Data: bytes.NewReader(data)}
	}
	if kind == message.VoiceNote {
		return o.blockedOr(o.deliver(ctx, "sendVoice", func(ctx context.Context, api *tgbot.Bot) (*models.Message, error) {
			return api.SendVoice(ctx, &tgbot.SendVoiceParams{ChatID: o.chat.ID, MessageThreadID: o.chat.Thread, ReplyParameters: replyTo, Voice: upload(), ReplyMarkup: buttons})
		}))
	}
	err = o.deliver(ctx, "sendPhoto", func(ctx context.Context, api *tgbot.Bot) (*models.Message, error) {
		return api.SendPhoto(ctx, &tgbot.SendPhotoParams{ChatID: o.chat.ID, MessageThreadID: o.chat.Thread, ReplyParameters: replyTo, Photo: upload(), ReplyMarkup: buttons})
	})
	if isPhotoRejected(err) {
		o.log.Info("Telegram refused the image as a photo; sending it as a document", zap.Error(err))
		err = o.deliver(ctx, "sendDocument", func(ctx context.Context, api *tgbot.Bot) (*models.Message, error) {
			return api.SendDocument(ctx, &tgbot.SendDocumentParams{ChatID: o.chat.ID, MessageThreadID: o.chat.Thread, ReplyParameters: replyTo, Document: upload(), ReplyMarkup: buttons})
		})
	}
	return o.blockedOr(err)
}

// isPhotoRejected: the image is fine as a file but not as a photo (too
// large, or dimensions Telegram does not accept).
func isPhotoRejected(err error) bool {
	if !errors.Is(err, tgbot.ErrorBadRequest) {
		return false
	}
	msg := err.Error()
	for _, s := range []string{"PHOTO_INVALID_DIMENSIONS", "PHOTO_SAVE_FILE_INVALID", "too big", "IMAGE_PROCESS_FAILED"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// KeepAction shows action in the chat now and every Transport.ActionEvery
// until the returned stop is called.
func (o *Outbox) KeepAction(ctx context.Context, action message.Action) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(o.t.ActionEvery)
		defer tick.Stop()
		for {
			api, err := o.api()
			if err == nil {
				_, err = api.SendChatAction(ctx, &tgbot.SendChatActionParams{ChatID: o.chat.ID, MessageThreadID: o.chat.Thread,
					Action: models.ChatAction(action)})
			}
			if err != nil && ctx.Err() == nil {
				o.log.Debug("chat action not sent", zap.Error(err))
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}
