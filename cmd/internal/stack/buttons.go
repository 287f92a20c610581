package stack

import (
	"context"

	"brainbot/bot/telegramtest"
)

// Tap taps, as user, the button with data under the message id a bot sent
// to chat, as Telegram sends it (a callback_query), and returns the tap's
// query, whose answer WaitAnswer awaits.
func (s *Stack) Tap(bot string, user, chat int64, id int, data string) (query string) {
	_, query = s.Telegram.Tap(Token(bot), user, chat, id, data)
	return query
}

// Choose is Tap on an option of a question, which reaches the model as
// the user's next message: Pending awaits its answer, like a message's.
func (s *Stack) Choose(bot string, user, chat int64, id int, data string) (query string, p *Pending) {
	p = s.send(bot, user, func(token string) { _, query = s.Telegram.Tap(token, user, chat, id, data) })
	return query, p
}

// TapOld taps a button under a message Telegram no longer gives the bot
// (its callback_query's message is inaccessible, date 0).
func (s *Stack) TapOld(bot string, user, chat int64, id int, data string) (query string) {
	_, query = s.Telegram.TapOld(Token(bot), user, chat, id, data)
	return query
}

// WaitAnswer waits for the bot's answer to the tap query and returns the
// notice the user saw ("" for none).
func (s *Stack) WaitAnswer(ctx context.Context, bot, query string) (string, error) {
	c, err := s.Telegram.WaitAnswer(ctx, Token(bot), query)
	return c.Param("text"), err
}

// Message is what the bot's message id in chat shows now.
func (s *Stack) Message(bot string, chat int64, id int) (telegramtest.Message, bool) {
	return s.Telegram.Message(Token(bot), chat, id)
}
