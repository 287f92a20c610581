package telegram

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"unicode/utf16"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"go.uber.org/zap"
)

// MaxRichLen is the most characters one rich message holds (Bot API
// 10.1): a longer answer is split as plain messages are.
const MaxRichLen = 32768

// Rich sends text, Claude's Markdown, as one rich message that Telegram
// parses itself (sendRichMessage), when it should: always, or when the
// text needs it — too long for one message, or with a table the HTML
// subset cannot show. false means it was not sent and the caller sends it
// as Text: it does not need it, is over MaxRichLen, it replaces a
// streamed group message (edited as today: an older server would take a
// rich edit for an empty one), Telegram refused its Markdown, or the Bot
// API server does not know the method (404, an older self-hosted server),
// which the bot's client remembers so it is not tried again.
func (o *Outbox) Rich(ctx context.Context, text string, always bool) (bool, error) {
	c := o.client()
	if c == nil || c.noRich.Load() || o.edit != 0 || utf16Len(text) > MaxRichLen || !always && !needsRich(text) {
		return false, nil
	}
	err := o.deliver(ctx, "sendRichMessage", func(ctx context.Context, api *tgbot.Bot) (*models.Message, error) {
		return api.SendRichMessage(ctx, &tgbot.SendRichMessageParams{ChatID: o.chat.ID, MessageThreadID: o.chat.Thread,
			ReplyParameters: o.replyTo, RichMessage: models.InputRichMessage{Markdown: text}})
	})
	switch {
	case err == nil:
		o.replyTo = nil
		o.t.Metrics.RichMessages.WithLabelValues("sent").Inc()
		o.log.Debug("rich message sent", zap.String("text", text))
		return true, nil
	case errors.Is(err, tgbot.ErrorNotFound):
		c.noRich.Store(true)
		o.t.Metrics.RichMessages.WithLabelValues("unknown_method").Inc()
		o.log.Info("the Bot API server does not know rich messages: this bot sends split HTML from now on", zap.Error(err))
		return false, nil
	case errors.Is(err, tgbot.ErrorBadRequest):
		o.t.Metrics.RichMessages.WithLabelValues("refused").Inc()
		o.log.Warn("Telegram refused the rich message; sending it as split HTML", zap.Error(err))
		return false, nil
	}
	return true, o.blockedOr(err)
}

// tableDivider is the line under a Markdown table's header: | --- | :-: |
var tableDivider = regexp.MustCompile(`^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$`)

// needsRich: the text is longer than one message, or holds a table.
func needsRich(text string) bool {
	if utf16Len(text) > MaxMessageLen {
		return true
	}
	lines := strings.Split(text, "\n")
	for i := 1; i < len(lines); i++ {
		if strings.Contains(lines[i-1], "|") && tableDivider.MatchString(lines[i]) {
			return true
		}
	}
	return false
}

// utf16Len is text's length as Telegram counts it.
func utf16Len(text string) int {
	n := 0
	for _, r := range text {
		n += utf16.RuneLen(r)
	}
	return n
}
