package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"go.uber.org/zap"
)

// errPollStopped says why a polling session ended early.
var errPollStopped = errors.New("polling stopped")

// Poll long-polls the bot's updates from offset until ctx ends (nil), or
// Telegram rejects the token or reports another poller (the error). Any
// webhook left set is deleted first: Telegram answers getUpdates only
// without one. polled is called whenever Telegram answered getUpdates.
//
// Each update reaches handle raw, exactly as Telegram sent it, one at a
// time and in order; handle must be quick. An update is confirmed to
// Telegram (by the next getUpdates' offset) only once handle returned
// true; false leaves it unconfirmed, and polling stops with ctx.
func (c *Client) Poll(parent context.Context, offset int64, polled func(), handle func(ctx context.Context, updateID int64, raw []byte) bool) error {
	ctx, stop := context.WithCancel(parent)
	defer stop()
	gate := newConfirmGate(&http.Client{Timeout: c.t.PollTimeout + 15*time.Second}, polled)
	var mu sync.Mutex
	var fatal error // why polling stopped: token rejected, or a second poller
	api, err := c.t.newAPI(c.bot, c.token, gate,
		tgbot.WithInitialOffset(offset),
		tgbot.WithAllowedUpdates(AllowedUpdates),
		// The handler must stay fast; running it in the polling worker
		// keeps updates in order.
		tgbot.WithNotAsyncHandlers(),
		tgbot.WithDefaultHandler(func(_ context.Context, _ *tgbot.Bot, u *models.Update) {
			if handle(ctx, u.ID, gate.take(u.ID)) {
				gate.handled(u.ID)
			}
		}),
		tgbot.WithErrorsHandler(func(err error) {
			if errors.Is(err, tgbot.ErrorUnauthorized) || errors.Is(err, tgbot.ErrorConflict) {
				mu.Lock()
				fatal = err
				mu.Unlock()
				stop()
				return
			}
			c.log.Warn("telegram polling error", zap.Error(err))
		}),
	)
	if err != nil {
		return err
	}
	if _, err := api.DeleteWebhook(ctx, &tgbot.DeleteWebhookParams{}); err != nil {
		return err
	}
	api.Start(ctx)
	mu.Lock()
	defer mu.Unlock()
	switch {
	case parent.Err() != nil:
		return nil
	case fatal != nil:
		return fatal
	}
	return errPollStopped
}

// confirmGate sits between the Telegram client library and the Bot API on
// getUpdates calls. It does two jobs the library cannot:
//
//   - It holds back each call until the handler has taken in every update
//     the previous call returned. Telegram takes the next call's offset as
//     confirmation, so without the gate a crash between confirmation and
//     storing would lose a message.
//   - It keeps each update of an answer as Telegram sent it, and hands
//     the library only its id. The library decodes a whole answer at once
//     and fails it for one update with a union type it does not know (a
//     new kind of forward origin, reaction, paid media...; go-telegram/bot
//     issue 90), which would stall the bot on that update for ever; and
//     what it decodes it would lose of fields it does not know. So the
//     library only counts offsets and calls the handler in order, and the
//     handler takes each update's bytes from the gate (take).
type confirmGate struct {
	next tgbot.HttpClient
	// polled is called after every getUpdates call Telegram answered.
	polled func()

	mu          sync.Mutex
	delivered   int64 // highest update id received
	done        int64 // highest update id handled
	handledOnce chan struct{}
	raw         map[int64][]byte
}

func newConfirmGate(next tgbot.HttpClient, polled func()) *confirmGate {
	return &confirmGate{next: next, polled: polled, handledOnce: make(chan struct{}), raw: map[int64][]byte{}}
}

func (g *confirmGate) handled(id int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.done = max(g.done, id)
	close(g.handledOnce)
	g.handledOnce = make(chan struct{})
}

// take returns, once, update id as Telegram sent it.
func (g *confirmGate) take(id int64) []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	raw := g.raw[id]
	delete(g.raw, id)
	return raw
}

func (g *confirmGate) Do(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/getUpdates") {
		return g.next.Do(req)
	}
	if err := g.waitHandled(req); err != nil {
		return nil, err
	}
	resp, err := g.next.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	g.polled()
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	updates, body := splitAnswer(body)
	g.mu.Lock()
	for id, raw := range updates {
		g.delivered = max(g.delivered, id)
		g.raw[id] = raw
	}
	g.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

// waitHandled blocks until every update delivered so far is handled.
func (g *confirmGate) waitHandled(req *http.Request) error {
	for {
		g.mu.Lock()
		caughtUp, changed := g.done >= g.delivered, g.handledOnce
		g.mu.Unlock()
		if caughtUp {
			return nil
		}
		select {
		case <-req.Context().Done():
			return req.Context().Err()
		case <-changed:
		}
	}
}

// splitAnswer reads a getUpdates answer update by update. It returns
// every update's bytes by id, and the answer with each update replaced by
// its bare id. An answer it cannot read is returned as it is, for the
// library to report.
func splitAnswer(body []byte) (updates map[int64][]byte, out []byte) {
	var answer struct {
		OK     bool              `json:"ok"`
		Result []json.RawMessage `json:"result"`
	}
	if json.Unmarshal(body, &answer) != nil {
		return nil, body
	}
	updates = make(map[int64][]byte, len(answer.Result))
	for i, raw := range answer.Result {
		var head struct {
			ID int64 `json:"update_id"`
		}
		if json.Unmarshal(raw, &head) != nil {
			return nil, body
		}
		updates[head.ID] = raw
		answer.Result[i] = json.RawMessage(fmt.Sprintf(`{"update_id":%d}`, head.ID))
	}
	out, err := json.Marshal(answer)
	if err != nil {
		return nil, body
	}
	return updates, out
}
