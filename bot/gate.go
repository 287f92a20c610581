package bot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// confirmGate sits between the Telegram client library and the Bot API on
// getUpdates calls. It does two jobs the library cannot:
//
//   - It holds back each call until the handler has journaled every update
//     the previous call returned. Telegram takes the next call's offset as
//     confirmation, so without the gate a crash between confirmation and
//     journaling would lose a message.
//   - It decodes each update of an answer on its own. The library decodes
//     a whole answer at once and fails it for one update with a union type
//     it does not know (a new kind of forward origin, reaction, paid
//     media...; go-telegram/bot issue 90), which would stall the bot on
//     that update for ever. The gate replaces such an update by a bare
//     {"update_id": N}, so the library confirms it like any other, and
//     keeps what it could read of it for the handler (takeUndecodable).
type confirmGate struct {
	next tgbot.HttpClient
	// polled is called after every getUpdates call Telegram answered.
	polled func()

	mu          sync.Mutex
	delivered   int64 // highest update id received
	done        int64 // highest update id handled
	handledOnce chan struct{}
	undecodable map[int64]undecodable
}

// undecodable is what can be read of an update the library cannot decode.
type undecodable struct {
	err error
	// The sender and chat of a "message" update that someone wrote (zero
	// for service messages and other kinds of update), and its text or
	// caption: only to see whether it mentions the bot, never logged.
	chat     int64
	chatType string
	user     int64
	text     string
}

// contentKeys are the fields of a message a person sends on purpose;
// a message without text, caption or any of these is a service message
// (a member joined, the background changed...).
var contentKeys = []string{"photo", "video", "audio", "voice", "document", "sticker", "animation",
	"video_note", "paid_media", "location", "venue", "contact", "poll", "dice", "story", "checklist"}

func newConfirmGate(next tgbot.HttpClient, polled func()) *confirmGate {
	return &confirmGate{next: next, polled: polled, handledOnce: make(chan struct{}), undecodable: map[int64]undecodable{}}
}

func (g *confirmGate) handled(id int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.done = max(g.done, id)
	close(g.handledOnce)
	g.handledOnce = make(chan struct{})
}

// takeUndecodable returns, once, what the gate found wrong with update id.
func (g *confirmGate) takeUndecodable(id int64) (undecodable, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	u, ok := g.undecodable[id]
	delete(g.undecodable, id)
	return u, ok
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
	ids, bad, body := decodeEach(body)
	g.mu.Lock()
	for _, id := range ids {
		g.delivered = max(g.delivered, id)
	}
	for id, u := range bad {
		g.undecodable[id] = u
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

// decodeEach reads a getUpdates answer update by update. It returns every
// update id, the updates the library cannot decode, and the answer with
// those replaced by bare ids. An answer it cannot read at all is returned
// as it is, for the library to report.
func decodeEach(body []byte) (ids []int64, bad map[int64]undecodable, out []byte) {
	var answer struct {
		OK     bool              `json:"ok"`
		Result []json.RawMessage `json:"result"`
	}
	if json.Unmarshal(body, &answer) != nil {
		return nil, nil, body
	}
	bad = map[int64]undecodable{}
	for i, raw := range answer.Result {
		var head struct {
			ID int64 `json:"update_id"`
		}
		if json.Unmarshal(raw, &head) != nil {
			return nil, nil, body
		}
		ids = append(ids, head.ID)
		var u models.Update
		if err := json.Unmarshal(raw, &u); err != nil {
			bad[head.ID] = readUndecodable(raw, err)
			answer.Result[i] = json.RawMessage(fmt.Sprintf(`{"update_id":%d}`, head.ID))
		}
	}
	if len(bad) == 0 {
		return ids, nil, body
	}
	out, err := json.Marshal(answer)
	if err != nil {
		return nil, nil, body
	}
	return ids, bad, out
}

// readUndecodable reads who wrote a "message" update and where, as far as
// the JSON allows.
func readUndecodable(raw []byte, err error) undecodable {
	var loose struct {
		Message map[string]json.RawMessage `json:"message"`
	}
	var head struct {
		Chat struct {
			ID   int64  `json:"id"`
			Type string `json:"type"`
		} `json:"chat"`
		From *struct {
			ID int64 `json:"id"`
		} `json:"from"`
		Text    string `json:"text"`
		Caption string `json:"caption"`
	}
	u := undecodable{err: err}
	if json.Unmarshal(raw, &loose) != nil || loose.Message == nil {
		return u
	}
	msg, _ := json.Marshal(loose.Message)
	if json.Unmarshal(msg, &head) != nil || head.From == nil {
		return u
	}
	written := head.Text != "" || head.Caption != "" || slices.ContainsFunc(contentKeys, func(k string) bool {
		_, ok := loose.Message[k]
		return ok
	})
	if written {
		u.chat, u.chatType, u.user = head.Chat.ID, head.Chat.Type, head.From.ID
		u.text = head.Text + " " + head.Caption
	}
	return u
}
