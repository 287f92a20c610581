package bot

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

	"brainbot/claude"
	"brainbot/metrics"
)

const (
	// maxAttempts bounds how often one Telegram call is tried.
	maxAttempts = 5
	// maxRetryAfter caps a 429's wait: a longer one fails the call.
	maxRetryAfter = 5 * time.Minute
)

// replier sends to one chat (and forum topic) through one bot. In groups
// its first message replies to the message it answers, so the thread reads
// naturally among other members' messages.
type replier struct {
	caller
	// client is the bot's Telegram client, looked up on every attempt: a
	// brain edit may replace the token while a reply is on its way.
	client  func() *tgbot.Bot
	chat    int64
	thread  int
	replyTo *models.ReplyParameters
	// edit is a message of ours the next text replaces (a streamed reply's
	// message), instead of a new one.
	edit int
	// sent are the ids of the messages sent, in order.
	sent []int
	log  *zap.Logger
}

// note records a message sent.
func (o *replier) note(m *models.Message) {
	if m != nil {
		o.sent = append(o.sent, m.ID)
	}
}

func newReplier(c caller, client func() *tgbot.Bot, in *incoming, log *zap.Logger) *replier {
	o := &replier{caller: c, client: client, chat: in.chat, thread: in.thread, log: log}
	if in.inGroup() && in.messageID != 0 {
		// Sent even if the message was deleted meanwhile.
		o.replyTo = &models.ReplyParameters{MessageID: in.messageID, AllowSendingWithoutReply: true}
	}
	return o
}

// reply returns the reply parameters for the next message: the first
// replies to the user's message, the rest follow it.
func (o *replier) reply() *models.ReplyParameters {
	r := o.replyTo
	o.replyTo = nil
	return r
}

// caller makes Bot API calls with Telegram's retry rules, counting each
// failed attempt in the metrics.
type caller struct {
	// backoff is the first wait after a network error; it doubles.
	backoff time.Duration
	metrics *metrics.Metrics
}

// retry runs call (Bot API method) until it succeeds, waiting out 429s
// (retry_after) and backing off on network errors, at most maxAttempts
// times. Errors that retrying cannot fix (bad request, blocked) return at
// once; a blocked user's is errBlocked.
func (c caller) retry(ctx context.Context, method string, call func(context.Context) error) error {
	backoff := c.backoff
	var err error
	for attempt := 1; ; attempt++ {
		err = call(ctx)
		if err == nil {
			return nil
		}
		c.metrics.TelegramErrors.WithLabelValues(method, errorCode(err)).Inc()
		var wait time.Duration
		var tooMany *tgbot.TooManyRequestsError
		switch {
		case errors.Is(err, tgbot.ErrorForbidden):
			return fmt.Errorf("%w: %w", errBlocked, err)
		case errors.As(err, &tooMany):
			wait = time.Duration(tooMany.RetryAfter) * time.Second
			if wait > maxRetryAfter {
				return err
			}
		case isPermanent(err):
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

// errorCode is the HTTP status a Bot API error stands for, as a metric
// label.
func errorCode(err error) string {
	var tooMany *tgbot.TooManyRequestsError
	var migrate *tgbot.MigrateError
	switch {
	case errors.As(err, &tooMany):
		return "429"
	case errors.Is(err, tgbot.ErrorForbidden):
		return "403"
	case errors.Is(err, tgbot.ErrorUnauthorized):
		return "401"
	case errors.Is(err, tgbot.ErrorBadRequest), errors.As(err, &migrate):
		return "400"
	case errors.Is(err, tgbot.ErrorNotFound):
		return "404"
	case errors.Is(err, tgbot.ErrorConflict):
		return "409"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	}
	return "other" // 5xx answers, and Telegram not reached
}

// isPermanent: Telegram answered, and the same call would fail again. Other
// answers (5xx: Telegram's own trouble) are transient like network errors,
// and so is 401: a revoked token is usually being replaced by a brain
// edit, and the next attempt goes out through the new one.
func isPermanent(err error) bool {
	for _, e := range []error{tgbot.ErrorBadRequest, tgbot.ErrorNotFound, tgbot.ErrorConflict} {
		if errors.Is(err, e) {
			return true
		}
	}
	var migrate *tgbot.MigrateError
	return errors.As(err, &migrate)
}

// text sends text in parts of at most 4096 characters. With markdown it
// goes as HTML converted from Claude's Markdown, falling back to plain text
// for a part Telegram cannot parse. A blocked user is logged at info and
// reported as errBlocked.
func (o *replier) text(ctx context.Context, text string, markdown bool) error {
	for _, part := range splitMessage(text, maxMessageLen) {
		replyTo, editID := o.reply(), o.edit
		o.edit = 0
		send := func(text string, mode models.ParseMode) error {
			if editID != 0 {
				return o.retry(ctx, "editMessageText", func(ctx context.Context) error {
					_, err := o.client().EditMessageText(ctx, &tgbot.EditMessageTextParams{ChatID: o.chat, MessageID: editID,
						Text: text, ParseMode: mode})
					if isNotModified(err) {
						return nil
					}
					return err
				})
			}
			return o.retry(ctx, "sendMessage", func(ctx context.Context) error {
				m, err := o.client().SendMessage(ctx, &tgbot.SendMessageParams{ChatID: o.chat, MessageThreadID: o.thread,
					ReplyParameters: replyTo, Text: text, ParseMode: mode})
				if err == nil {
					o.note(m)
				}
				return err
			})
		}
		var err error
		if markdown {
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

// errBlocked marks a send the user refused by blocking the bot.
var errBlocked = errors.New("user blocked the bot")

func (o *replier) blockedOr(err error) error {
	if errors.Is(err, errBlocked) {
		o.log.Info("user blocked the bot: reply dropped", zap.Error(err))
	}
	return err
}

// file uploads the voice file (sendVoice) or image (sendPhoto, or
// sendDocument when Telegram refuses it as a photo).
func (o *replier) file(ctx context.Context, mode claude.Mode, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	name := filepath.Base(path)
	replyTo := o.reply()
	upload := func() *models.InputFileUpload {
		return &models.InputFileUpload{Filename: name, Data: bytes.NewReader(data)}
	}
	if mode == claude.Speech {
		err = o.retry(ctx, "sendVoice", func(ctx context.Context) error {
			m, err := o.client().SendVoice(ctx, &tgbot.SendVoiceParams{ChatID: o.chat, MessageThreadID: o.thread, ReplyParameters: replyTo, Voice: upload()})
			if err == nil {
				o.note(m)
			}
			return err
		})
		return o.blockedOr(err)
	}
	err = o.retry(ctx, "sendPhoto", func(ctx context.Context) error {
		m, err := o.client().SendPhoto(ctx, &tgbot.SendPhotoParams{ChatID: o.chat, MessageThreadID: o.thread, ReplyParameters: replyTo, Photo: upload()})
		if err == nil {
			o.note(m)
		}
		return err
	})
	if isPhotoRejected(err) {
		o.log.Info("Telegram refused the image as a photo; sending it as a document", zap.Error(err))
		err = o.retry(ctx, "sendDocument", func(ctx context.Context) error {
			m, err := o.client().SendDocument(ctx, &tgbot.SendDocumentParams{ChatID: o.chat, MessageThreadID: o.thread, ReplyParameters: replyTo, Document: upload()})
			if err == nil {
				o.note(m)
			}
			return err
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

func chatAction(mode claude.Mode) models.ChatAction {
	switch mode {
	case claude.Speech:
		return models.ChatActionRecordVoice
	case claude.Image:
		return models.ChatActionUploadPhoto
	}
	return models.ChatActionTyping
}

// keepAction shows action in the chat now and every interval until the
// returned stop is called.
func (o *replier) keepAction(ctx context.Context, action models.ChatAction, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			_, err := o.client().SendChatAction(ctx, &tgbot.SendChatActionParams{ChatID: o.chat, MessageThreadID: o.thread, Action: action})
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
