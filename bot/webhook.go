package bot

// Webhook mode (BRAINBOT_WEBHOOK_URL, with a cluster): Telegram posts each
// update to <url>/<bot id> on any instance behind a load balancer, which
// stores it in the shared stream and answers 200 only then, so Telegram
// retries what was not stored. Every call must carry the bot's secret
// token, which setWebhook gave Telegram: it is derived from the bot's
// token, so every instance knows it and nothing else is to be configured.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path"
	"strings"

	tgbot "github.com/go-telegram/bot"
	"go.uber.org/zap"
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

// setWebhook tells Telegram where to post the bot's updates, retrying
// until it is done or ctx ends.
func (r *runner) setWebhook(ctx context.Context, client *tgbot.Bot) {
	url := strings.TrimRight(r.m.cfg.WebhookURL, "/") + "/" + r.id
	retry := r.retries()
	for {
		_, err := client.SetWebhook(ctx, &tgbot.SetWebhookParams{URL: url, SecretToken: WebhookSecret(r.token),
			AllowedUpdates: []string{"message", "my_chat_member"}})
		if err == nil {
			r.log.Info("telegram webhook set", zap.String("url", url))
			return
		}
		if ctx.Err() != nil {
			return
		}
		r.log.Error("could not set the webhook; retrying", zap.Error(err), zap.Duration("retry_in", retry.next))
		if !retry.wait(ctx) {
			return
		}
	}
}

// WebhookHandler serves Telegram's webhook calls, POST <path>/<bot id>: a
// call without the bot's secret token is refused (401) and stores
// nothing; an update is answered 200 once stored in the cluster's stream.
func (m *Manager) WebhookHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		id := path.Base(req.URL.Path)
		m.mu.Lock()
		r := m.bots[id]
		m.mu.Unlock()
		if r == nil {
			http.NotFound(w, req)
			return
		}
		if subtle.ConstantTimeCompare([]byte(req.Header.Get(secretHeader)), []byte(WebhookSecret(r.token))) != 1 {
			r.log.Warn("webhook call without the bot's secret token refused", zap.String("remote", req.RemoteAddr))
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxUpdate))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			r.log.Warn("webhook call over the size of an update refused", zap.String("remote", req.RemoteAddr), zap.Int64("limit_bytes", maxUpdate))
			http.Error(w, "update too large", http.StatusRequestEntityTooLarge)
			return
		case err != nil:
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		var head struct {
			ID      int64 `json:"update_id"`
			Message *struct {
				Chat struct {
					ID   int64  `json:"id"`
					Type string `json:"type"`
				} `json:"chat"`
				Thread  int  `json:"message_thread_id"`
				IsTopic bool `json:"is_topic_message"`
			} `json:"message"`
		}
		if err := json.Unmarshal(body, &head); err != nil || head.ID == 0 {
			http.Error(w, "not an update", http.StatusBadRequest)
			return
		}
		var chat int64
		thread := 0
		if msg := head.Message; msg != nil {
			chat = msg.Chat.ID
			if (msg.Chat.Type == "group" || msg.Chat.Type == "supergroup") && msg.IsTopic {
				thread = msg.Thread
			}
		}
		if err := m.cfg.Cluster.Publish(req.Context(), r.id, chat, thread, head.ID, body); err != nil {
			r.log.Warn("webhook update not stored; Telegram will send it again", zap.Int64("update_id", head.ID), zap.Error(err))
			http.Error(w, "not stored", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}
