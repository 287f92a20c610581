package telegram

import (
	"context"
	"errors"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"go.uber.org/zap"

	"brainbot/message"
)

// Notice sends text meant for one user only (a limit reached, access
// denied, "busy"...): in a group, as an ephemeral message only user sees
// (ephemeral_message_parameters); where Telegram refuses one, or in a
// private chat, or for a sender that is a chat (anonymous admins), as an
// ordinary plain message.
func (o *Outbox) Notice(ctx context.Context, text string, user int64) error {
	if !o.chat.Group || user <= 0 {
		return o.Text(ctx, text, false)
	}
	err := o.deliver(ctx, "sendMessage", func(ctx context.Context, api *tgbot.Bot) (*models.Message, error) {
		return api.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: o.chat.ID, MessageThreadID: o.chat.Thread, Text: text,
			ReplyParameters: o.replyTo, EphemeralMessageParameters: &models.EphemeralMessageParameters{ReceiverUserID: user}})
	})
	switch {
	case err == nil:
		o.replyTo = nil
		o.t.Metrics.EphemeralNotices.WithLabelValues("sent").Inc()
		o.log.Debug("notice sent to one user", zap.String("text", text), zap.Int64("receiver", user))
		return nil
	case errors.Is(err, message.ErrBlocked), !IsPermanent(err):
		return o.blockedOr(err)
	}
	o.t.Metrics.EphemeralNotices.WithLabelValues("fallback").Inc()
	o.log.Info("Telegram refused an ephemeral notice; sending it as an ordinary reply", zap.Error(err))
	return o.Text(ctx, text, false)
}
