package telegram

import (
	"context"
	"errors"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"go.uber.org/zap"

	"brainbot/message"
)

// readGuest reads a guest message: the message that summoned the bot in
// a chat it is not a member of, answered once through its query. Its
// sender is the user who summoned the bot (or the chat they summoned it
// as), for access rules, limits and caps; its text loses the bot's
// @mention wherever it was written. Without a query, or without anyone
// to name its caller, it is not one. Its key (guestHead.caller) names the
// caller as this does.
func readGuest(u *message.Update, msg *models.Message, me message.Identity) {
	readMessage(u, msg, me)
	switch {
	case msg.GuestBotCallerUser != nil:
		u.Sender, u.FirstName, u.Language = msg.GuestBotCallerUser.ID, msg.GuestBotCallerUser.FirstName, msg.GuestBotCallerUser.LanguageCode
	case msg.GuestBotCallerChat != nil:
		u.Sender = msg.GuestBotCallerChat.ID
	case msg.SenderChat != nil:
		u.Sender = msg.SenderChat.ID
	}
	if msg.GuestQueryID == "" || u.Sender == 0 {
		u.Kind = message.Unhandled
		return
	}
	u.Kind, u.Guest = message.Written, &message.Guest{QueryID: msg.GuestQueryID}
	u.Text, u.Mentioned = withoutMentions(msg, me)
}

// GuestAnswer answers one guest query: its first text, as an article
// (answerGuestQuery takes one result, once). It answers in text only: a
// voice note or picture would need a file_id the bot already has.
type GuestAnswer struct {
	t        *Transport
	client   func() *Client
	queryID  string
	answered bool
	log      *zap.Logger
}

// GuestAnswer makes the answer of guest query queryID, sent through the
// client that client returns.
func (t *Transport) GuestAnswer(client func() *Client, queryID string, log *zap.Logger) *GuestAnswer {
	return &GuestAnswer{t: t, client: client, queryID: queryID, log: log}
}

// errGuestAnswered: a guest query takes one answer.
var errGuestAnswered = errors.New("the guest query was answered already")

// Text answers the query with text, clipped to one message; formatted:
// Claude's Markdown as HTML, plain where Telegram cannot parse it. A
// second text is not sent.
func (g *GuestAnswer) Text(ctx context.Context, text string, formatted bool) error {
	if g.answered {
		g.log.Debug("guest query answered already: text not sent", zap.String("text", text))
		return errGuestAnswered
	}
	text = clip(text, MaxMessageLen) // one message: formatting only shortens it
	send := func(text string, mode models.ParseMode) error {
		return g.t.retry(ctx, "answerGuestQuery", func(ctx context.Context) error {
			c := g.client()
			if c == nil {
				return errNotConnected
			}
			_, err := c.api.AnswerGuestQuery(ctx, &tgbot.AnswerGuestQueryParams{GuestQueryID: g.queryID,
				Result: &models.InlineQueryResultArticle{ID: "answer", Title: "Answer",
					InputMessageContent: &models.InputTextMessageContent{MessageText: text, ParseMode: mode}}})
			return err
		})
	}
	var err error
	if formatted {
		err = send(markdownToHTML(text), models.ParseModeHTML)
		if isEntityError(err) {
			err = send(text, "")
		}
	} else {
		err = send(text, "")
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	g.t.Metrics.GuestAnswers.WithLabelValues(outcome).Inc()
	g.answered = err == nil
	return err
}
