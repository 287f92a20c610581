package telegram

// Webhooks (BRAINBOT_WEBHOOK_URL): Telegram posts each update to
// <url>/<bot id>, on any instance behind a load balancer, which stores it
// and answers 200 only then, so Telegram retries what was not stored.
// Every call must carry the bot's secret token, which setWebhook gave
// Telegram: it is derived from the bot's token, so every instance knows
// it and nothing else is to be configured.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"path"
	"time"

	tgbot "github.com/go-telegram/bot"
	"go.uber.org/zap"

	"brainbot/message"
)

// secretHeader is where Telegram puts the webhook's secret token.
const secretHeader = "X-Telegram-Bot-Api-Secret-Token"

// maxUpdate bounds an update's body (Telegram's are a few KB); a larger
// one is refused unread (413).
const maxUpdate = 1 << 20

// WebhookSecret is the secret token of the bot with this Telegram token:
// 43 characters of [A-Za-z0-9_-], as setWebhook allows.
func WebhookSecret(token string) string {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("brainbot webhook secret"))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// SetWebhook tells Telegram to post the bot's updates to url, with the
// bot's secret token.
func (c *Client) SetWebhook(ctx context.Context, url string) error {
	_, err := c.api.SetWebhook(ctx, &tgbot.SetWebhookParams{URL: url, SecretToken: WebhookSecret(c.token),
		AllowedUpdates: AllowedUpdates})
	return err
}

// WebhookHandler serves Telegram's webhook calls, POST <path>/<bot id>.
// token tells a bot's token (false: no such bot here, 404). A call
// without the bot's secret token is refused (401) and stores nothing; an
// update is answered 200 once store took it, 503 when it could not
// (Telegram sends it again).
func WebhookHandler(token func(bot string) (string, bool), store func(context.Context, message.Envelope) error, log *zap.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		bot := path.Base(req.URL.Path)
		tok, ok := token(bot)
		if !ok {
			http.NotFound(w, req)
			return
		}
		log := log.With(zap.String("bot", bot))
		if subtle.ConstantTimeCompare([]byte(req.Header.Get(secretHeader)), []byte(WebhookSecret(tok))) != 1 {
			log.Warn("webhook call without the bot's secret token refused", zap.String("remote", req.RemoteAddr))
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxUpdate))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			log.Warn("webhook call over the size of an update refused", zap.String("remote", req.RemoteAddr), zap.Int64("limit_bytes", maxUpdate))
			http.Error(w, "update too large", http.StatusRequestEntityTooLarge)
			return
		case err != nil:
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		id, key, ok := KeyOf(bot, body)
		if !ok {
			http.Error(w, "not an update", http.StatusBadRequest)
			return
		}
		env := message.Envelope{Bot: bot, UpdateID: id, Key: key, Raw: body, Received: time.Now()}
		if err := store(req.Context(), env); err != nil {
			log.Warn("webhook update not stored; Telegram will send it again", zap.Int64("update_id", id), zap.Error(err))
			http.Error(w, "not stored", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}
