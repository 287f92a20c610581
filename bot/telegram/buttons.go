package telegram

// Inline buttons: under a text, taps answered, buttons taken away.

import (
	"context"
	"strings"
	"unicode/utf16"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"go.uber.org/zap"

	"brainbot/message"
)

// MaxNotice is Telegram's limit for a tap's answer (answerCallbackQuery's
// text), in characters.
const MaxNotice = 200

// Attach puts kb under the next Text's last part, or the next File; what
// is sent after it has none.
func (o *Outbox) Attach(kb message.Keyboard) { o.keyboard = kb }

// Quote makes the next message a reply to message id, in a private chat
// too (where the outbox quotes nothing of its own).
func (o *Outbox) Quote(id int) {
	o.replyTo = &models.ReplyParameters{MessageID: id, AllowSendingWithoutReply: true}
}

// AnswerTap answers the tap query, as Telegram wants every tap answered:
// notice, if any, is shown to the user who tapped, and to them only.
func (c *Client) AnswerTap(ctx context.Context, query, notice string) error {
	return c.t.retry(ctx, "answerCallbackQuery", func(ctx context.Context) error {
		_, err := c.api.AnswerCallbackQuery(ctx, &tgbot.AnswerCallbackQueryParams{CallbackQueryID: query, Text: clip(notice, MaxNotice)})
		return err
	})
}

// Amend edits message id, which was sent as the last part of text (Text
// split it), to that part followed by a paragraph of addition, and takes
// its buttons away. Where the two do not fit in one message, or Telegram
// refuses the edit, only the buttons go.
func (o *Outbox) Amend(ctx context.Context, id int, text, addition string) error {
	parts := splitMessage(text, MaxMessageLen)
	amended := parts[len(parts)-1] + "\n\n" + addition
	if len(utf16.Encode([]rune(amended))) > MaxMessageLen {
		return o.DropButtons(ctx, id)
	}
	err := o.editText(ctx, id, markdownToHTML(amended), models.ParseModeHTML, nil)
	if isEntityError(err) {
		err = o.editText(ctx, id, amended, "", nil)
	}
	if err != nil && IsPermanent(err) {
		o.log.Info("the message could not be amended; taking its buttons away", zap.Int("message_id", id), zap.Error(err))
		return o.DropButtons(ctx, id)
	}
	return o.blockedOr(err)
}

// editText makes message id show text, with kb under it (none: the
// buttons it had go). An edit that changes nothing is no error.
func (o *Outbox) editText(ctx context.Context, id int, text string, mode models.ParseMode, kb message.Keyboard) error {
	return o.call(ctx, "editMessageText", func(ctx context.Context, api *tgbot.Bot) error {
		_, err := api.EditMessageText(ctx, &tgbot.EditMessageTextParams{ChatID: o.chat.ID, MessageID: id,
			Text: text, ParseMode: mode, ReplyMarkup: inlineKeyboard(kb)})
		if isNotModified(err) {
			return nil
		}
		return err
	})
}

// DropButtons takes the buttons away from message id.
func (o *Outbox) DropButtons(ctx context.Context, id int) error {
	return o.blockedOr(o.call(ctx, "editMessageReplyMarkup", func(ctx context.Context, api *tgbot.Bot) error {
		_, err := api.EditMessageReplyMarkup(ctx, &tgbot.EditMessageReplyMarkupParams{ChatID: o.chat.ID, MessageID: id,
			ReplyMarkup: inlineKeyboard(nil)})
		if isNotModified(err) {
			return nil
		}
		return err
	}))
}

// inlineKeyboard is kb as Telegram takes it; with no buttons, an empty
// keyboard, which takes away the buttons a message has when it is
// edited.
func inlineKeyboard(kb message.Keyboard) *models.InlineKeyboardMarkup {
	rows := make([][]models.InlineKeyboardButton, 0, len(kb))
	for _, row := range kb {
		buttons := make([]models.InlineKeyboardButton, 0, len(row))
		for _, b := range row {
			buttons = append(buttons, models.InlineKeyboardButton{Text: b.Text, CallbackData: b.Data})
		}
		rows = append(rows, buttons)
	}
	return &models.InlineKeyboardMarkup{InlineKeyboard: rows}
}

// buttonsOrNone is kb for a new message: none at all when it is empty.
func buttonsOrNone(kb message.Keyboard) models.ReplyMarkup {
	if len(kb) == 0 {
		return nil
	}
	return inlineKeyboard(kb)
}

// readTap reads a tap on one of the bot's buttons.
func readTap(u *message.Update, q *models.CallbackQuery) {
	u.Kind, u.What = message.Tapped, "callback_query"
	u.Tap = message.Tap{QueryID: q.ID, Data: q.Data, FromBot: q.From.IsBot}
	u.Sender, u.FirstName, u.Language = q.From.ID, q.From.FirstName, q.From.LanguageCode
	u.SenderName = strings.TrimSpace(q.From.FirstName + " " + q.From.LastName)
	switch m := q.Message; {
	case m.Message != nil:
		u.ChatType, u.MessageID, u.Tap.ChatTitle = string(m.Message.Chat.Type), m.Message.ID, m.Message.Chat.Title
	case m.InaccessibleMessage != nil:
		u.ChatType, u.MessageID = string(m.InaccessibleMessage.Chat.Type), m.InaccessibleMessage.MessageID
		u.Tap.Inaccessible = true
	default: // under an inline message, in no chat of the bot's
		u.Tap.Inaccessible = true
	}
}
