package bot

// The transport as the rooms that send see it: the pipeline's Chats, the
// panels' Members, and Telegram's webhook calls taken in.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/conversation"
	"brainbot/bot/panel/host"
	"brainbot/bot/telegram"
	"brainbot/message"
)

// chats is the pipeline's Chats: the transport, as each bot, through the
// client it last connected with.
type chats struct{ m *Manager }

func (c chats) Outbox(to message.Key, group bool, replyTo int, log *zap.Logger) conversation.Outbox {
	return c.m.outbox(to, group, replyTo, log)
}

func (c chats) GuestOutbox(bot, queryID string, log *zap.Logger) conversation.Outbox {
	client := func() *telegram.Client { return c.m.client(bot) }
	return guestOutbox{c.m.transport.GuestAnswer(client, queryID, log)}
}

// guestOutbox is a guest query's answer as the pipeline's outbox: its
// first text, and nothing else.
type guestOutbox struct{ *telegram.GuestAnswer }

func (guestOutbox) Rich(context.Context, string, bool) (bool, error) { return false, nil }
func (g guestOutbox) Notice(ctx context.Context, text string, _ int64) error {
	return g.Text(ctx, text, false) // only the summoner sees a guest answer
}
func (guestOutbox) File(context.Context, message.FileKind, string) error {
	return errors.New("a guest query is answered in text only")
}
func (guestOutbox) KeepAction(context.Context, message.Action) func() { return func() {} }
func (guestOutbox) Stream(context.Context) conversation.Stream        { return noStream{} }
func (guestOutbox) Withdraw(context.Context) error                    { return nil }
func (guestOutbox) Sent() []int                                       { return nil }

// A guest answer is an article: no buttons under it, nothing to reply to
// or amend.
func (guestOutbox) Attach(message.Keyboard)                          {}
func (guestOutbox) Quote(int)                                        {}
func (guestOutbox) Amend(context.Context, int, string, string) error { return nil }
func (guestOutbox) DropButtons(context.Context, int) error           { return nil }

// noStream shows nothing: a guest answer comes whole.
type noStream struct{}

func (noStream) Update(string)     {}
func (noStream) Finish() time.Time { return time.Time{} }
func (noStream) Cancel()           {}
func (noStream) DraftID() int64    { return 0 }
func (noStream) UseRich(bool)      {}

func (c chats) Fetch(ctx context.Context, bot, fileID string, limit int64) ([]byte, error) {
	client := c.m.client(bot)
	if client == nil {
		return nil, fmt.Errorf("bot %s has not connected to Telegram", bot)
	}
	return client.Fetch(ctx, fileID, limit)
}

func (c chats) AnswerTap(ctx context.Context, bot, query, notice string) error {
	client := c.m.client(bot)
	if client == nil {
		return fmt.Errorf("bot %s has not connected to Telegram", bot)
	}
	return client.AnswerTap(ctx, query, notice)
}

func (c chats) IsAdmin(ctx context.Context, bot string, chat, user int64) (bool, error) {
	client := c.m.client(bot)
	if client == nil {
		return false, fmt.Errorf("bot %s has not connected to Telegram", bot)
	}
	return client.IsAdmin(ctx, chat, user)
}

func (m *Manager) outbox(to message.Key, group bool, replyTo int, log *zap.Logger) outbox {
	client := func() *telegram.Client { return m.client(to.Bot) }
	return outbox{m.transport.Outbox(client, telegram.Chat{ID: to.Chat, Thread: to.Thread, Group: group}, replyTo, log)}
}

// outbox is the transport's outbox as the pipeline's.
type outbox struct{ *telegram.Outbox }

func (o outbox) Stream(ctx context.Context) conversation.Stream { return o.Outbox.Stream(ctx) }

// members is the panels' Members: the bots running here.
type members struct{ m *Manager }

// Connected reports whether bot runs here and is connected to Telegram.
func (s members) Connected(bot string) bool {
	client, me := s.m.member(bot)
	return client != nil && me.ID != 0
}

func (s members) InChat(ctx context.Context, bot string, chat int64) (bool, error) {
	client, me := s.m.member(bot)
	if client == nil {
		return false, fmt.Errorf("bot %s is not connected", bot)
	}
	return client.IsMember(ctx, chat, me.ID)
}

func (s members) Outbox(to message.Key, replyTo int, log *zap.Logger) host.Outbox {
	return s.m.outbox(to, true, replyTo, log)
}

// member returns bot id's Telegram client and identity (nil while it
// connects or once the bot is stopped).
func (m *Manager) member(id string) (*telegram.Client, message.Identity) {
	m.mu.Lock()
	r := m.bots[id]
	m.mu.Unlock()
	if r == nil {
		return nil, message.Identity{}
	}
	return r.current()
}

// WebhookHandler serves Telegram's webhook calls, POST <path>/<bot id>: a
// call without the bot's secret token is refused (401) and stores
// nothing; an update is answered 200 once stored in the log.
func (m *Manager) WebhookHandler() http.Handler {
	runner := func(id string) *runner {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.bots[id]
	}
	token := func(id string) (string, bool) {
		if r := runner(id); r != nil {
			return r.token, true
		}
		return "", false
	}
	return telegram.WebhookHandler(token, func(ctx context.Context, env message.Envelope) error {
		r := runner(env.Bot)
		if r == nil {
			return fmt.Errorf("bot %s stopped", env.Bot)
		}
		env.Me = r.identity()
		return m.intake.Take(env, func() error { return m.cfg.State.Append(ctx, r.poller(), env) })
	}, m.log)
}
