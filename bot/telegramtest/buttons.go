package telegramtest

// Inline buttons: what the bot's messages show now (their text and
// buttons, as sent and edited, until deleted), taps on them delivered as
// callback_query updates shaped like Telegram's, and the answers to those
// taps.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"time"
)

// ErrQueryTooOld is how Telegram answers a tap answered twice, or never
// sent.
var ErrQueryTooOld = APIError{Code: 400, Description: "Bad Request: query is too old and response timeout expired or query ID is invalid"}

// Button is an inline button as the bot set it.
type Button struct {
	Text string `json:"text"`
	Data string `json:"callback_data"`
}

// Buttons are the inline buttons a call put under its message (its
// reply_markup), in rows; nil for none, and for an empty keyboard (which
// takes away the buttons of a message edited).
func (c Call) Buttons() [][]Button {
	var markup struct {
		Rows [][]Button `json:"inline_keyboard"`
	}
	if json.Unmarshal([]byte(c.Params["reply_markup"]), &markup) != nil || len(markup.Rows) == 0 {
		return nil
	}
	return markup.Rows
}

// Message is one of the bot's messages as a chat shows it now.
type Message struct {
	ID     int
	Chat   int64
	Thread int
	// Title is the group's title, when a user's message gave it.
	Title string
	// Method sent it (sendMessage, sendVoice...).
	Method string
	// Text and ParseMode are its text as last sent or edited.
	Text, ParseMode string
	Buttons         [][]Button
	// Edits counts the edits of its text or buttons.
	Edits int
	Date  int64
}

// rememberLocked keeps what message id, sent by call, shows.
func (b *botState) rememberLocked(c Call, id int, sent map[string]any) {
	if b.messages == nil {
		b.messages = map[int64]map[int]*Message{}
	}
	chat := c.ChatID()
	if b.messages[chat] == nil {
		b.messages[chat] = map[int]*Message{}
	}
	thread, _ := strconv.Atoi(c.Param("message_thread_id"))
	b.messages[chat][id] = &Message{ID: id, Chat: chat, Thread: thread, Title: b.titles[chat], Method: c.Method, Text: c.Param("text"),
		ParseMode: c.Param("parse_mode"), Buttons: c.Buttons(), Date: sent["date"].(int64)}
}

// Telegram's refusals of an edit.
var (
	ErrMessageNotFound = APIError{Code: 400, Description: "Bad Request: message to edit not found"}
	ErrNotModified     = APIError{Code: 400, Description: "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"}
)

// edit applies an edit of message id (editMessageText, or
// editMessageReplyMarkup) and returns the message as Telegram answers
// it, or Telegram's refusal. An edit without reply_markup takes the
// buttons away, as on Telegram.
func (s *Server) edit(b *botState, c Call, id int) (map[string]any, *APIError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := b.messages[c.ChatID()][id]
	if m == nil {
		return nil, &ErrMessageNotFound
	}
	next := *m
	if c.Method == "editMessageText" {
		next.Text, next.ParseMode = c.Param("text"), c.Param("parse_mode")
	}
	next.Buttons = c.Buttons()
	if next.Text == m.Text && next.ParseMode == m.ParseMode && reflect.DeepEqual(next.Buttons, m.Buttons) {
		return nil, &ErrNotModified
	}
	next.Edits++
	*m = next
	s.notifyLocked()
	return m.json(BotID(c.Token)), nil
}

// ErrMessageToDeleteNotFound is how Telegram refuses to delete a message
// that is not there (never sent, or deleted already).
var ErrMessageToDeleteNotFound = APIError{Code: 400, Description: "Bad Request: message to delete not found"}

// delete takes the bot's message id away from chat; false if the chat
// does not show it.
func (s *Server) delete(b *botState, chat int64, id int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.messages[chat][id] == nil {
		return false
	}
	delete(b.messages[chat], id)
	s.notifyLocked()
	return true
}

// refuse answers the call recorded at index with apiErr, and records
// that it failed.
func (s *Server) refuse(w http.ResponseWriter, b *botState, index int, apiErr APIError) {
	s.mu.Lock()
	b.calls[index].Code = apiErr.Code
	s.notifyLocked()
	s.mu.Unlock()
	writeError(w, apiErr)
}

// answer records the answer to a tap's query: false for a query never
// sent, or answered already.
func (s *Server) answer(b *botState, query string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	answered, sent := b.queries[query]
	if !sent || answered {
		return false
	}
	b.queries[query] = true
	return true
}

// json is the message as Telegram puts it in an update or an answer.
func (m *Message) json(bot int64) map[string]any {
	out := map[string]any{
		"message_id": m.ID,
		"date":       m.Date,
		"chat":       map[string]any{"id": m.Chat, "type": chatTypeOf(m.Chat)},
		"from":       map[string]any{"id": bot, "is_bot": true, "first_name": "Test bot"},
	}
	if m.Title != "" {
		out["chat"].(map[string]any)["title"] = m.Title
	}
	if m.Text != "" {
		out["text"] = m.Text
	}
	if m.Thread != 0 {
		out["message_thread_id"], out["is_topic_message"] = m.Thread, true
	}
	if len(m.Buttons) > 0 {
		out["reply_markup"] = map[string]any{"inline_keyboard": m.Buttons}
	}
	return out
}

// chatTypeOf is a chat's type by its id, as SendText makes them.
func chatTypeOf(chat int64) string {
	if chat < 0 {
		return "group"
	}
	return "private"
}

// Message returns what the bot's message id in chat shows now.
func (s *Server) Message(token string, chat int64, id int) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.botLocked(token).messages[chat][id]
	if m == nil {
		return Message{}, false
	}
	return *m, true
}

// WaitMessage waits until the bot's message id in chat shows what
// wanted accepts, and returns it (what it shows, with ctx's error, when
// ctx ends first).
func (s *Server) WaitMessage(ctx context.Context, token string, chat int64, id int, wanted func(Message) bool) (Message, error) {
	var m Message
	_, err := s.waitUntil(ctx, func() ([]Call, bool) {
		found := s.botLocked(token).messages[chat][id]
		if found == nil {
			return nil, false
		}
		m = *found
		return nil, wanted(m)
	})
	return m, err
}

// Tap queues a tap by user on the button with data under the bot's
// message id in chat, as Telegram sends it: a callback_query with the
// message as it shows now. It returns the update id and the query's id,
// which the bot must answer (answerCallbackQuery).
func (s *Server) Tap(token string, user, chat int64, id int, data string) (updateID int64, query string) {
	return s.tap(token, user, false, chat, id, data)
}

// TapByBot is Tap by a bot (from.is_bot), as another bot's client could.
func (s *Server) TapByBot(token string, bot, chat int64, id int, data string) (updateID int64, query string) {
	return s.tap(token, bot, true, chat, id, data)
}

func (s *Server) tap(token string, user int64, isBot bool, chat int64, id int, data string) (updateID int64, query string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.botLocked(token)
	msg := map[string]any{"message_id": id, "date": 0, "chat": map[string]any{"id": chat, "type": chatTypeOf(chat)}}
	if m := b.messages[chat][id]; m != nil {
		msg = m.json(BotID(token))
	}
	return s.tapLocked(b, user, isBot, msg, data)
}

// TapOld queues a tap on a message Telegram no longer gives the bot: its
// callback_query carries an inaccessible message (date 0).
func (s *Server) TapOld(token string, user, chat int64, id int, data string) (updateID int64, query string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	msg := map[string]any{"message_id": id, "date": 0, "chat": map[string]any{"id": chat, "type": chatTypeOf(chat)}}
	return s.tapLocked(s.botLocked(token), user, false, msg, data)
}

func (s *Server) tapLocked(b *botState, user int64, isBot bool, msg map[string]any, data string) (int64, string) {
	if b.queries == nil {
		b.queries = map[string]bool{}
	}
	query := fmt.Sprintf("%d%06d", time.Now().UnixNano()%1e9, len(b.queries)+1)
	b.queries[query] = false
	id := s.queueLocked(b, map[string]any{"callback_query": map[string]any{
		"id":            query,
		"from":          map[string]any{"id": user, "is_bot": isBot, "first_name": fmt.Sprintf("User%d", user), "language_code": UserLanguage},
		"message":       msg,
		"chat_instance": strconv.FormatInt(msg["chat"].(map[string]any)["id"].(int64)*31, 10),
		"data":          data,
	}})
	return id, query
}

// WaitAnswer waits for the bot's answer to the tap query and returns it
// (its text is the notice the user saw).
func (s *Server) WaitAnswer(ctx context.Context, token, query string) (Call, error) {
	return s.WaitCall(ctx, token, func(c Call) bool {
		return c.Method == "answerCallbackQuery" && c.Param("callback_query_id") == query
	})
}
