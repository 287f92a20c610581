package telegram

import (
	"net/http"
	"path"
	"strconv"

	tgbot "github.com/go-telegram/bot"

	"brainbot/metrics"
)

// countingClient counts the failed calls of every Bot API method a bot's
// client makes (polling, getMe, sends, webhooks alike) as
// brainbot_telegram_errors_total{bot, method, code}. It sits under the client
// library, so no call can go uncounted; a call its caller cancelled is
// no failure and is not counted.
type countingClient struct {
	next    tgbot.HttpClient
	bot     string
	metrics *metrics.Metrics
}

func (c countingClient) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if req.Context().Err() != nil {
		return resp, err
	}
	// The method is the last element of the path; the token before it is
	// never used.
	method := path.Base(req.URL.Path)
	switch {
	case err != nil:
		c.metrics.TelegramErrors.WithLabelValues(c.bot, method, "other").Inc()
	case resp.StatusCode != http.StatusOK:
		c.metrics.TelegramErrors.WithLabelValues(c.bot, method, statusLabel(resp.StatusCode)).Inc()
	}
	return resp, err
}

// statusLabel is the code label of a failed answer: Telegram's error
// codes an admin acts on by number, "other" for the rest (5xx: Telegram's
// own trouble).
func statusLabel(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusConflict, http.StatusTooManyRequests:
		return strconv.Itoa(status)
	}
	return "other"
}
