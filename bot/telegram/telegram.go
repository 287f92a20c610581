// Package telegram is brainbot's transport: the only code that speaks the
// Bot API (through go-telegram/bot). Per bot it connects (getMe), long-polls
// with a confirm gate or takes webhook calls, and hands every update on
// raw, as Telegram sent it; it reads an update into brainbot's own
// message.Update (Decode), computing its conversation key in one place;
// and it sends to a chat (Outbox: text split and formatted, files, chat
// actions, streamed drafts or edits), downloads files within a limit,
// registers the command list and checks a group's members. Every call
// goes through one retry path that waits out 429s; every call's failure
// is counted (brainbot_telegram_errors_total), polling's too.
//
// It knows nothing of Claude, prompts, brains' settings, the journal or
// NATS: what it receives goes to a sink, what it sends comes from its
// callers.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"go.uber.org/zap"

	"brainbot/message"
	"brainbot/metrics"
)

// Settings are what every bot's client shares. All are required.
type Settings struct {
	// APIURL is the Bot API base URL (https://api.telegram.org).
	APIURL string
	// PollTimeout is getUpdates' long-poll timeout.
	PollTimeout time.Duration
	// RetryMin is the first wait after a network error; it doubles.
	RetryMin time.Duration
	// ActionEvery is how often a chat action is resent (Telegram shows
	// one ~5s); StreamEvery how often a streamed reply is updated after
	// its first text (about Telegram's edit limit: 1s).
	ActionEvery, StreamEvery time.Duration
	Metrics                  *metrics.Metrics
}

// Transport holds what every bot's client shares: where the Bot API is,
// how calls are retried and counted, how often a chat's status and a
// streamed reply are refreshed, and the chats where drafts failed.
type Transport struct {
	Settings
	// noDrafts are the chats where drafts failed: replies stream by edits.
	noDrafts chatSet
	// files downloads what getFile points at.
	files *http.Client
}

// New makes the transport of a set of bots.
func New(s Settings) *Transport {
	s.APIURL = strings.TrimRight(s.APIURL, "/")
	return &Transport{Settings: s, files: &http.Client{Timeout: fileTimeout}}
}

// AllowedUpdates are the kinds of update every bot asks for, by polling
// and by webhook alike: exactly the kinds Decode reads as something to
// handle (testdata/updates has one of each). Telegram keeps the last list
// a bot gave, for both setups: a kind left out is not delivered again
// until a list names it.
var AllowedUpdates = []string{"message", "edited_message", "my_chat_member", "stopped_message_generation", "guest_message", "callback_query"}

// Client is one bot's connection to the Bot API.
type Client struct {
	t     *Transport
	bot   string // the brain id, for the metrics
	api   *tgbot.Bot
	token string // never logged
	log   *zap.Logger
	// noRich: the Bot API server does not know rich messages (Rich).
	noRich atomic.Bool
}

// Client makes the client of the bot with token, whose brain id is bot;
// it calls nothing yet.
func (t *Transport) Client(bot, token string, log *zap.Logger) (*Client, error) {
	api, err := t.newAPI(bot, token, &http.Client{Timeout: t.PollTimeout + 15*time.Second})
	if err != nil {
		return nil, err
	}
	return &Client{t: t, bot: bot, api: api, token: token, log: log}, nil
}

func (t *Transport) newAPI(bot, token string, http tgbot.HttpClient, opts ...tgbot.Option) (*tgbot.Bot, error) {
	return tgbot.New(token, append([]tgbot.Option{
		tgbot.WithServerURL(t.APIURL),
		tgbot.WithSkipGetMe(), // called by Connect, under its caller's context and retry
		tgbot.WithHTTPClient(t.PollTimeout, countingClient{next: http, bot: bot, metrics: t.Metrics}),
	}, opts...)...)
}

// Connect asks Telegram who the bot is (getMe).
func (c *Client) Connect(ctx context.Context) (message.Identity, error) {
	me, err := c.api.GetMe(ctx)
	if err != nil {
		return message.Identity{}, err
	}
	return message.Identity{ID: me.ID, Username: me.Username, GuestQueries: me.SupportsGuestQueries}, nil
}

// Register sets the bot's command list and description.
func (c *Client) Register(ctx context.Context, cmds []message.Command, description string) error {
	list := make([]models.BotCommand, len(cmds))
	for i, cmd := range cmds {
		list[i] = models.BotCommand{Command: cmd.Name, Description: cmd.Description}
	}
	return c.t.retry(ctx, "setMyCommands", func(ctx context.Context) error {
		if _, err := c.api.SetMyCommands(ctx, &tgbot.SetMyCommandsParams{Commands: list}); err != nil {
			return err
		}
		_, err := c.api.SetMyDescription(ctx, &tgbot.SetMyDescriptionParams{Description: description})
		return err
	})
}

// IsMember reports whether user (the bot itself, say) is in chat, as the
// bot sees it.
func (c *Client) IsMember(ctx context.Context, chat, user int64) (bool, error) {
	cm, err := c.api.GetChatMember(ctx, &tgbot.GetChatMemberParams{ChatID: chat, UserID: user})
	if err != nil {
		return false, err
	}
	return cm.Type != models.ChatMemberTypeLeft && cm.Type != models.ChatMemberTypeBanned, nil
}

// IsAdmin reports whether user is an administrator or the creator of
// chat, as Telegram says now (getChatMember): whom a group lets stop any
// answer, or act for the chat's own anonymous admins.
func (c *Client) IsAdmin(ctx context.Context, chat, user int64) (bool, error) {
	var admin bool
	err := c.t.retry(ctx, "getChatMember", func(ctx context.Context) error {
		cm, err := c.api.GetChatMember(ctx, &tgbot.GetChatMemberParams{ChatID: chat, UserID: user})
		admin = err == nil && (cm.Type == models.ChatMemberTypeOwner || cm.Type == models.ChatMemberTypeAdministrator)
		return err
	})
	return admin, err
}

// BotNumber is the bot's public id as its token starts with: the number
// before the colon.
func BotNumber(token string) string {
	n, _, _ := strings.Cut(token, ":")
	return n
}

// CheckToken asks Telegram at apiURL whose token this is (getMe) and
// returns the bot's username, for the preflight. The library keeps the
// token out of its errors.
func CheckToken(ctx context.Context, apiURL, token string) (string, error) {
	b, err := tgbot.New(token, tgbot.WithServerURL(apiURL), tgbot.WithSkipGetMe())
	if err != nil {
		return "", err
	}
	me, err := b.GetMe(ctx)
	switch {
	case TokenRejected(err):
		return "", fmt.Errorf("token rejected by Telegram (revoked, or mistyped): copy it again from @BotFather (%w)", err)
	case err != nil:
		return "", fmt.Errorf("no answer to getMe from %s: %w", apiURL, err)
	}
	return me.Username, nil
}

// TokenRejected reports whether err is Telegram refusing the bot's token
// (401, or 404 for a token of no bot): revoked or mistyped.
func TokenRejected(err error) bool {
	return errors.Is(err, tgbot.ErrorUnauthorized) || errors.Is(err, tgbot.ErrorNotFound)
}

// Describe explains the failures of a bot's connection an admin must act
// on.
func Describe(err error) string {
	switch {
	case errors.Is(err, tgbot.ErrorUnauthorized):
		return "token rejected by Telegram (401): check the brain's token"
	case errors.Is(err, tgbot.ErrorConflict):
		return "another process polls this token (409): stop it or use another token"
	}
	return "telegram unreachable"
}
