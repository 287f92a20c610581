// Package telegramtest is a Telegram Bot API stand-in for tests: an
// httptest server that answers POST /bot<token>/<method> the way
// api.telegram.org does, for the methods brainbot uses.
//
// Tests queue incoming messages with SendText, let the bot under test
// long-poll them with getUpdates (offsets confirm updates as on Telegram),
// and read back what the bot sent with Sent, or wait for it with WaitFor
// and WaitCall (no test needs to sleep). Failures are injected per token
// with Fail and the helpers built on it (Flood, RejectPhotos, RejectHTML,
// Block, Unauthorize, Conflict); Hold keeps a call unanswered for as long
// as a test needs.
//
// Request bodies may be multipart/form-data (what go-telegram/bot sends,
// including uploaded files), application/x-www-form-urlencoded or JSON.
// Every token is accepted unless Unauthorize says otherwise; a bot's id is
// the number before the token's colon.
package telegramtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
)

// Call is one Bot API request the server received.
type Call struct {
	Token  string
	Method string
	// Params holds the request's non-file fields as sent (objects and
	// arrays stay JSON text).
	Params map[string]string
	// Files holds uploaded files by field name (voice, photo, document).
	Files map[string]File
	// Code is the HTTP status the server answered (200 or the injected error).
	Code int
	Time time.Time
	// MessageID is the message_id of the message a successful send made.
	MessageID int
}

// Param returns one parameter ("" if absent).
func (c Call) Param(name string) string { return c.Params[name] }

// Markdown is the Markdown of a rich message call's rich_message.
func (c Call) Markdown() string {
	var rich struct {
		Markdown string `json:"markdown"`
	}
	_ = json.Unmarshal([]byte(c.Params["rich_message"]), &rich) // none: ""
	return rich.Markdown
}

// ChatID returns the chat_id parameter as a number (0 if absent).
func (c Call) ChatID() int64 {
	id, _ := strconv.ParseInt(c.Params["chat_id"], 10, 64)
	return id
}

// File is an uploaded file.
type File struct {
	Name string
	Data []byte
}

// APIError is a Bot API error answer.
type APIError struct {
	Code        int
	Description string
	// RetryAfter is sent as parameters.retry_after (seconds) when > 0.
	RetryAfter int
}

// Common errors, as Telegram words them.
var (
	ErrPhotoInvalidDimensions = APIError{Code: 400, Description: "Bad Request: PHOTO_INVALID_DIMENSIONS"}
	ErrCantParseEntities      = APIError{Code: 400, Description: "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0"}
	ErrBlocked                = APIError{Code: 403, Description: "Forbidden: bot was blocked by the user"}
	ErrUnauthorized           = APIError{Code: 401, Description: "Unauthorized"}
	ErrMethodNotFound         = APIError{Code: 404, Description: "Not Found: method not found"}
	ErrConflict               = APIError{Code: 409, Description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}
)

// TooManyRequests is a 429 asking to wait retryAfter seconds.
func TooManyRequests(retryAfter int) APIError {
	return APIError{Code: 429, Description: fmt.Sprintf("Too Many Requests: retry after %d", retryAfter), RetryAfter: retryAfter}
}

// Rule makes the server fail matching calls of a token.
type Rule struct {
	// Method limits the rule to one method ("" matches every method).
	Method string
	// Match, when set, further selects calls (it sees the parsed call).
	Match func(Call) bool
	// Times is how many matching calls fail; 0 means all of them.
	Times int
	Err   APIError
}

// Server is the stand-in. Its zero value is not usable: call NewServer.
type Server struct {
	// URL is the base URL to hand to the bot (tgbot.WithServerURL).
	URL string

	ts *httptest.Server

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever state changes
	bots    map[string]*botState
	closed  bool
	// groupMsg numbers the messages bots send to each group: one sequence
	// per chat, shared by its members, as in Telegram.
	groupMsg map[int64]int
}

type botState struct {
	files      map[string][]byte // by file_id, served by getFile and /file/
	updates    []update          // unconfirmed, in id order
	nextUpdate int64
	nextMsg    int
	calls      []Call
	rules      []*Rule
	poll       chan struct{}  // closed to end the running getUpdates with 409
	left       map[int64]bool // groups the bot is not in (getChatMember)
	holds      []*hold        // calls to hold (Hold), in order
	// messages are what the bot's messages show now, by chat and id;
	// queries the taps sent to it, answered or not (buttons.go).
	messages map[int64]map[int]*Message
	queries  map[string]bool
	// rich: the server knows rich messages (RichMessages).
	rich bool
	// noGuests: the bot's guest mode is off (NoGuestMode).
	noGuests bool
	// allowed is the last allowed_updates the bot gave (getUpdates or
	// setWebhook), which Telegram keeps; nil until it gives one.
	allowed []string

	// admins are the administrators of each group (Promote), as
	// getChatMember reports them; titles the groups' titles, as the
	// users' messages gave them.
	admins map[int64]map[int64]bool
	titles map[int64]string
}

// hold is one call Hold holds: the next call of method.
type hold struct {
	method   string
	taken    bool
	released chan struct{}
	once     sync.Once
}

func (h *hold) release() { h.once.Do(func() { close(h.released) }) }

type update struct {
	ID   int64
	JSON json.RawMessage
}

// NewServer starts a stand-in on a loopback port. Close it when done.
func NewServer() *Server {
	s := &Server{changed: make(chan struct{}), bots: map[string]*botState{}, groupMsg: map[int64]int{}}
	s.ts = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.URL = s.ts.URL
	return s
}

// Close ends pending long polls and held calls and shuts the server down.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.notifyLocked()
	for _, b := range s.bots {
		for _, h := range b.holds {
			h.release()
		}
	}
	s.mu.Unlock()
	s.ts.CloseClientConnections()
	s.ts.Close()
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) botLocked(token string) *botState {
	b := s.bots[token]
	if b == nil {
		b = &botState{nextUpdate: 1, nextMsg: 1}
		s.bots[token] = b
	}
	return b
}

// BotID is the id Telegram gives the bot with this token: the digits
// before the colon (0 if there are none).
func BotID(token string) int64 {
	id, _ := strconv.ParseInt(strings.SplitN(token, ":", 2)[0], 10, 64)
	return id
}

// Username is what getMe answers as the bot's @username.
func Username(token string) string { return fmt.Sprintf("test%d_bot", BotID(token)) }

// UserLanguage is the language_code of SendText's senders, as Telegram
// sends it for most users.
const UserLanguage = "en"

// SendText queues a text message from userID in chatID (use the same value
// for a private chat) and returns its update id. A text starting with "/"
// carries a bot_command entity for its first word, as Telegram's clients
// send it.
func (s *Server) SendText(token string, userID, chatID int64, text string) int64 {
	msg := map[string]any{
		"date": time.Now().Unix(),
		"chat": map[string]any{"id": chatID, "type": chatType(userID, chatID)},
		"from": map[string]any{"id": userID, "is_bot": false, "first_name": fmt.Sprintf("User%d", userID), "language_code": UserLanguage},
		"text": text,
	}
	if strings.HasPrefix(text, "/") {
		cmd, _, _ := strings.Cut(text, " ")
		msg["entities"] = []map[string]any{{"type": "bot_command", "offset": 0, "length": len(utf16.Encode([]rune(cmd)))}}
	}
	return s.SendMessage(token, msg)
}

func chatType(userID, chatID int64) string {
	if userID == chatID {
		return "private"
	}
	return "group"
}

// SendMessage queues an update carrying msg as its "message"; the server
// fills in message_id when msg has none. It returns the update id.
func (s *Server) SendMessage(token string, msg map[string]any) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.botLocked(token)
	if _, ok := msg["message_id"]; !ok {
		msg["message_id"] = b.nextMsg
		b.nextMsg++
	}
	b.noteTitleLocked(msg)
	return s.queueLocked(b, map[string]any{"message": msg})
}

// noteTitleLocked remembers the title of the group msg is written in:
// Telegram gives it with every message of the group, the bot's own in a
// tap's callback_query too.
func (b *botState) noteTitleLocked(msg map[string]any) {
	chat, _ := msg["chat"].(map[string]any)
	id, _ := chat["id"].(int64)
	title, _ := chat["title"].(string)
	if id == 0 || title == "" {
		return
	}
	if b.titles == nil {
		b.titles = map[int64]string{}
	}
	b.titles[id] = title
}

// SendEdit queues an update carrying msg as its "edited_message", as
// Telegram reports a user's edit of message msg["message_id"]: msg is the
// message as edited, and edit_date is now unless msg gives one. It
// returns the update id.
func (s *Server) SendEdit(token string, msg map[string]any) int64 {
	if _, ok := msg["edit_date"]; !ok {
		msg["edit_date"] = time.Now().Unix()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queueLocked(s.botLocked(token), map[string]any{"edited_message": msg})
}

// SendUpdate queues an update given as raw JSON, exactly as Telegram
// would send it (its update_id is replaced by the next one in sequence),
// and returns the update id. It is how tests send kinds of update the
// client library may not know. A callback_query's id is a query the bot
// may answer, as Tap's.
func (s *Server) SendUpdate(token string, raw []byte) int64 {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		panic(fmt.Sprintf("telegramtest: update is not a JSON object: %v", err))
	}
	delete(fields, "update_id")
	upd := make(map[string]any, len(fields))
	for k, v := range fields {
		upd[k] = v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.botLocked(token)
	var tap struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(fields["callback_query"], &tap) == nil && tap.ID != "" {
		if b.queries == nil {
			b.queries = map[string]bool{}
		}
		b.queries[tap.ID] = false // the bot may answer it, once
	}
	return s.queueLocked(b, upd)
}

// AllowedUpdates is the last allowed_updates list token's bot gave, by
// polling or by setWebhook (nil: none yet). Telegram keeps it for both.
func (s *Server) AllowedUpdates(token string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.botLocked(token).allowed)
}

// SummonAsGuest queues a guest_message, as Telegram sends it when user
// summons the bot by @mention in a chat it is not a member of (chat: a
// group's negative id, else a private chat with another user), and
// returns the guest query's id.
func (s *Server) SummonAsGuest(token string, user, chatID int64, text string) string {
	chatType := "supergroup"
	if chatID > 0 {
		chatType = "private"
	}
	query := fmt.Sprintf("gq-%d-%d", user, time.Now().UnixNano())
	mention := "@" + Username(token)
	raw, _ := json.Marshal(map[string]any{"guest_message": map[string]any{
		"message_id": 1, "date": time.Now().Unix(), "guest_query_id": query,
		"chat":                  map[string]any{"id": chatID, "type": chatType, "title": "Elsewhere"},
		"from":                  map[string]any{"id": user, "is_bot": false, "first_name": fmt.Sprintf("User%d", user)},
		"guest_bot_caller_user": map[string]any{"id": user, "is_bot": false, "first_name": fmt.Sprintf("User%d", user)},
		"text":                  mention + " " + text,
		"entities":              []map[string]any{{"type": "mention", "offset": 0, "length": len(utf16.Encode([]rune(mention)))}},
	}})
	s.SendUpdate(token, raw)
	return query
}

// PressStop queues the update Telegram sends when the user of private
// chat chatID presses the stop button of draft draftID
// (stopped_message_generation), and returns its update id.
func (s *Server) PressStop(token string, chatID, draftID int64) int64 {
	raw := fmt.Sprintf(`{"update_id":1,"stopped_message_generation":{"chat":{"id":%d,"first_name":"User%d","type":"private"},"draft_id":%d}}`,
		chatID, chatID, draftID)
	return s.SendUpdate(token, []byte(raw))
}

// queueLocked queues fields (everything but update_id) as the bot's next
// update.
func (s *Server) queueLocked(b *botState, fields map[string]any) int64 {
	id := b.nextUpdate
	b.nextUpdate++
	fields["update_id"] = id
	raw, err := json.Marshal(fields)
	if err != nil {
		panic(fmt.Sprintf("telegramtest: update not encodable: %v", err))
	}
	b.updates = append(b.updates, update{ID: id, JSON: raw})
	s.notifyLocked()
	return id
}

// Pending is how many queued updates the bot has not confirmed yet.
func (s *Server) Pending(token string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.botLocked(token).updates)
}

// Fail adds a failure rule for token. Rules are checked in the order added;
// the first match answers.
func (s *Server) Fail(token string, r Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.botLocked(token)
	b.rules = append(b.rules, &r)
}

// ClearFailures removes every rule of token.
func (s *Server) ClearFailures(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.botLocked(token).rules = nil
}

// Flood answers the next n calls of method with 429 retry_after.
func (s *Server) Flood(token, method string, n, retryAfter int) {
	s.Fail(token, Rule{Method: method, Times: n, Err: TooManyRequests(retryAfter)})
}

// RichMessages makes the server know sendRichMessage and
// sendRichMessageDraft (Bot API 10.1) for
// token's bot. Without it the server answers it as one older than 10.1:
// 404 "method not found".
func (s *Server) RichMessages(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.botLocked(token).rich = true
}

// NoGuestMode turns guest mode off for token's bot, as in @BotFather
// (getMe's supports_guest_queries); it is on by default.
func (s *Server) NoGuestMode(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.botLocked(token).noGuests = true
}

// RejectPhotos answers every sendPhoto with PHOTO_INVALID_DIMENSIONS.
func (s *Server) RejectPhotos(token string) {
	s.Fail(token, Rule{Method: "sendPhoto", Err: ErrPhotoInvalidDimensions})
}

// RejectHTML answers every call that sets parse_mode with "can't parse
// entities", as Telegram does for malformed markup.
func (s *Server) RejectHTML(token string) {
	s.Fail(token, Rule{Match: func(c Call) bool { return c.Params["parse_mode"] != "" }, Err: ErrCantParseEntities})
}

// groupMessageBase starts the ids of bots' messages in groups, above the
// ids of the users' messages tests send.
const groupMessageBase = 100000

// Leave takes the bot out of a group: getChatMember answers 403 there, as
// Telegram does for a chat the bot is not in.
func (s *Server) Leave(token string, chatID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.botLocked(token)
	if b.left == nil {
		b.left = map[int64]bool{}
	}
	b.left[chatID] = true
}

// Promote makes user an administrator of group: getChatMember answers
// "administrator" for them there, as Telegram does; everyone else is a
// "member".
func (s *Server) Promote(token string, group, user int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.botLocked(token)
	if b.admins == nil {
		b.admins = map[int64]map[int64]bool{}
	}
	if b.admins[group] == nil {
		b.admins[group] = map[int64]bool{}
	}
	b.admins[group][user] = true
}

// chatMember is getChatMember's answer for user, an administrator or
// a member, as Telegram shapes it.
func chatMember(token string, user int64, admin bool) map[string]any {
	who := map[string]any{"id": user, "is_bot": false, "first_name": fmt.Sprintf("User%d", user)}
	if user == BotID(token) {
		who = map[string]any{"id": user, "is_bot": true, "first_name": "Test bot", "username": Username(token)}
	}
	if !admin {
		return map[string]any{"status": "member", "user": who}
	}
	return map[string]any{"status": "administrator", "user": who, "can_be_edited": false, "is_anonymous": false,
		"can_manage_chat": true, "can_delete_messages": true, "can_restrict_members": true}
}

// Block answers every call addressed to chatID with 403, as when the user
// blocked the bot.
func (s *Server) Block(token string, chatID int64) {
	s.Fail(token, Rule{Match: func(c Call) bool { return c.ChatID() == chatID }, Err: ErrBlocked})
}

// Unauthorize answers every call of token with 401, as for a revoked token.
func (s *Server) Unauthorize(token string) {
	s.Fail(token, Rule{Err: ErrUnauthorized})
}

// Conflict answers every getUpdates of token with 409, as when another
// process polls the same token.
func (s *Server) Conflict(token string) {
	s.Fail(token, Rule{Method: "getUpdates", Err: ErrConflict})
}

// Hold holds the answer to token's next call of method: the call is
// recorded at once (Telegram has it), but answered only when release is
// called, or never if the bot gives up on it first. It stands for a call
// that is slow to be confirmed, for as long as the test needs.
func (s *Server) Hold(token, method string) (release func()) {
	h := &hold{method: method, released: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.botLocked(token)
	b.holds = append(b.holds, h)
	return h.release
}

// takeHoldLocked returns the hold for a call of method, if one waits.
func (b *botState) takeHoldLocked(method string) *hold {
	for _, h := range b.holds {
		if !h.taken && h.method == method {
			h.taken = true
			return h
		}
	}
	return nil
}

// Calls returns every call of token except getUpdates, in arrival order,
// including the ones answered with an error.
func (s *Server) Calls(token string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.botLocked(token).calls)
}

// Sent returns the successful calls of token that deliver something to a
// chat (sendMessage, sendVoice, sendPhoto, sendDocument), or, when methods
// are given, the successful calls of those methods.
func (s *Server) Sent(token string, methods ...string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sentLocked(token, methods)
}

// DeliveryMethods are what Sent and WaitFor select by default.
var DeliveryMethods = []string{"sendMessage", "sendRichMessage", "sendVoice", "sendPhoto", "sendDocument"}

func (s *Server) sentLocked(token string, methods []string) []Call {
	if len(methods) == 0 {
		methods = DeliveryMethods
	}
	var out []Call
	for _, c := range s.botLocked(token).calls {
		if c.Code == http.StatusOK && slices.Contains(methods, c.Method) {
			out = append(out, c)
		}
	}
	return out
}

// WaitFor waits until Sent(token, methods...) holds at least n calls and
// returns them, or returns what there is with ctx's error.
func (s *Server) WaitFor(ctx context.Context, token string, n int, methods ...string) ([]Call, error) {
	return s.waitUntil(ctx, func() ([]Call, bool) {
		got := s.sentLocked(token, methods)
		return got, len(got) >= n
	})
}

// WaitCall waits until a successful call of token that match accepts is
// recorded and returns it, or returns ctx's error.
func (s *Server) WaitCall(ctx context.Context, token string, match func(Call) bool) (Call, error) {
	got, err := s.waitUntil(ctx, func() ([]Call, bool) {
		for _, c := range s.botLocked(token).calls {
			if c.Code == http.StatusOK && match(c) {
				return []Call{c}, true
			}
		}
		return nil, false
	})
	if err != nil {
		return Call{}, err
	}
	return got[0], nil
}

// WaitConfirmed waits until the bot confirmed (acknowledged with a later
// offset) every update queued for token so far.
func (s *Server) WaitConfirmed(ctx context.Context, token string) error {
	_, err := s.waitUntil(ctx, func() ([]Call, bool) { return nil, len(s.botLocked(token).updates) == 0 })
	return err
}

// waitUntil polls cond (called with s.mu held) on every state change.
func (s *Server) waitUntil(ctx context.Context, cond func() ([]Call, bool)) ([]Call, error) {
	for {
		s.mu.Lock()
		got, ok := cond()
		changed := s.changed
		s.mu.Unlock()
		if ok {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, fmt.Errorf("telegramtest: waiting: %w", ctx.Err())
		case <-changed:
		}
	}
}

// AddFile stores data as a file the bot may fetch (getFile, then a
// download from /file/bot<token>/<file_path>) and returns its file_id.
func (s *Server) AddFile(token string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.botLocked(token)
	if b.files == nil {
		b.files = map[string][]byte{}
	}
	id := fmt.Sprintf("file-%d", len(b.files)+1)
	b.files[id] = data
	return id
}

// maxGetFile is the public Bot API's download limit.
const maxGetFile = 20 << 20

// sends reports whether method sends a message (which gets an id).
func sends(method string) bool {
	return slices.Contains([]string{"sendRichMessage", "sendMessage", "sendVoice", "sendPhoto", "sendDocument"}, method)
}

// newMessageIDLocked is the id of the next message the bot sends to chat:
// a group's ids are the group's own, shared by its bots. s.mu held.
func (b *botState) newMessageIDLocked(s *Server, chat int64) int {
	if chat < 0 {
		s.groupMsg[chat]++
		return groupMessageBase + s.groupMsg[chat]
	}
	id := b.nextMsg
	b.nextMsg++
	return id
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"); ok {
		s.serveFile(w, r, rest)
		return
	}
	token, method, ok := parsePath(r.URL.Path)
	if !ok {
		writeError(w, APIError{Code: 404, Description: "Not Found"})
		return
	}
	call, err := parseCall(r)
	if err != nil {
		writeError(w, APIError{Code: 400, Description: "Bad Request: " + err.Error()})
		return
	}
	call.Token, call.Method, call.Time = token, method, time.Now()

	s.mu.Lock()
	b := s.botLocked(token)
	apiErr, failed := b.ruleLocked(call)
	if !failed && (method == "sendRichMessage" || method == "sendRichMessageDraft") && !b.rich {
		apiErr, failed = ErrMethodNotFound, true
	}
	call.Code = http.StatusOK
	if failed {
		call.Code = apiErr.Code
	}
	index := -1
	var held *hold
	var sent map[string]any // the message a send puts in the chat
	if method != "getUpdates" {
		if !failed && sends(method) {
			// In the chat now, under its id, as on Telegram, which has the
			// call (held too: only its confirmation waits). A waiter that
			// finds the call (WaitCall) reads the message's id from it and
			// may tap the buttons under it at once.
			call.MessageID = b.newMessageIDLocked(s, call.ChatID())
			sent = sentMessage(token, call.MessageID, call)
			b.rememberLocked(call, call.MessageID, sent)
		}
		index = len(b.calls)
		b.calls = append(b.calls, call)
		s.notifyLocked()
		held = b.takeHoldLocked(method)
	}
	s.mu.Unlock()

	if held != nil {
		select {
		case <-held.released:
		case <-r.Context().Done():
			return // the bot gave up on the call
		}
	}
	if failed {
		writeError(w, apiErr)
		return
	}
	if list, ok := call.Params["allowed_updates"]; ok && (method == "getUpdates" || method == "setWebhook") {
		var kinds []string
		_ = json.Unmarshal([]byte(list), &kinds) // not a list: as Telegram, none
		s.mu.Lock()
		b.allowed = kinds
		s.mu.Unlock()
	}
	switch method {
	case "getUpdates":
		s.getUpdates(w, r, token, call)
	case "getFile":
		s.getFile(w, b, call.Param("file_id"))
	case "getMe":
		s.mu.Lock()
		guests := !b.noGuests
		s.mu.Unlock()
		writeResult(w, map[string]any{"id": BotID(token), "is_bot": true, "first_name": "Test bot", "username": Username(token),
			"supports_guest_queries": guests})
	case "answerGuestQuery":
		writeResult(w, map[string]any{"inline_message_id": "guest-" + call.Param("guest_query_id")})
	case "setMyCommands", "setMyDescription", "sendChatAction", "deleteWebhook", "setWebhook", "deleteMyCommands", "sendMessageDraft", "sendRichMessageDraft":
		writeResult(w, true)
	case "editMessageText", "editMessageReplyMarkup":
		id, _ := strconv.Atoi(call.Param("message_id"))
		msg, apiErr := s.edit(b, call, id)
		if apiErr != nil {
			s.refuse(w, b, index, *apiErr)
			return
		}
		writeResult(w, msg)
	case "deleteMessage":
		id, _ := strconv.Atoi(call.Param("message_id"))
		if !s.delete(b, call.ChatID(), id) {
			s.refuse(w, b, index, ErrMessageToDeleteNotFound)
			return
		}
		writeResult(w, true)
	case "answerCallbackQuery":
		if !s.answer(b, call.Param("callback_query_id")) {
			s.refuse(w, b, index, ErrQueryTooOld)
			return
		}
		writeResult(w, true)
	case "getChatMember":
		user, _ := strconv.ParseInt(call.Param("user_id"), 10, 64)
		s.mu.Lock()
		left, admin := b.left[call.ChatID()], b.admins[call.ChatID()][user]
		s.mu.Unlock()
		if left {
			writeError(w, APIError{Code: 403, Description: "Forbidden: bot is not a member of the supergroup chat"})
			return
		}
		writeResult(w, chatMember(token, user, admin))
	case "sendRichMessage", "sendMessage", "sendVoice", "sendPhoto", "sendDocument":
		writeResult(w, sent)
	default:
		writeError(w, APIError{Code: 404, Description: "Not Found: method not found"})
	}
}

// getFile answers like Telegram: the file's path, or 400 for an unknown
// id or a file over 20 MB.
func (s *Server) getFile(w http.ResponseWriter, b *botState, id string) {
	s.mu.Lock()
	data, ok := b.files[id]
	s.mu.Unlock()
	switch {
	case !ok:
		writeError(w, APIError{Code: 400, Description: "Bad Request: invalid file_id"})
	case len(data) > maxGetFile:
		writeError(w, APIError{Code: 400, Description: "Bad Request: file is too big"})
	default:
		writeResult(w, map[string]any{"file_id": id, "file_unique_id": "u" + id, "file_size": len(data), "file_path": "documents/" + id})
	}
}

// serveFile serves a download: rest is "<token>/documents/<file_id>".
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, rest string) {
	token, path, _ := strings.Cut(rest, "/")
	id := strings.TrimPrefix(path, "documents/")
	s.mu.Lock()
	data, ok := s.botLocked(token).files[id]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data) // the client hung up: nothing to tell it
}

// ruleLocked finds the first rule failing c and uses up one of its times.
func (b *botState) ruleLocked(c Call) (APIError, bool) {
	for i, r := range b.rules {
		if r.Method != "" && r.Method != c.Method {
			continue
		}
		if r.Match != nil && !r.Match(c) {
			continue
		}
		if r.Times > 0 {
			r.Times--
			if r.Times == 0 {
				b.rules = slices.Delete(b.rules, i, i+1)
			}
		}
		return r.Err, true
	}
	return APIError{}, false
}

// getUpdates confirms updates below offset, then answers the rest, waiting
// up to timeout seconds for one to arrive. A newer poll on the same token
// ends this one with 409, as on Telegram.
func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, token string, c Call) {
	offset, _ := strconv.ParseInt(c.Params["offset"], 10, 64)
	timeout, _ := strconv.Atoi(c.Params["timeout"])
	limit, _ := strconv.Atoi(c.Params["limit"])
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()

	s.mu.Lock()
	b := s.botLocked(token)
	if b.poll != nil {
		close(b.poll)
	}
	mine := make(chan struct{})
	b.poll = mine
	if offset > 0 {
		n := 0
		for n < len(b.updates) && b.updates[n].ID < offset {
			n++
		}
		if n > 0 {
			b.updates = slices.Delete(b.updates, 0, n)
			s.notifyLocked()
		}
	}
	defer func() {
		s.mu.Lock()
		if b.poll == mine {
			b.poll = nil
		}
		s.mu.Unlock()
	}()
	for {
		if len(b.updates) > 0 || timeout <= 0 || s.closed {
			batch := b.updates[:min(limit, len(b.updates))]
			out := make([]json.RawMessage, len(batch))
			for i, u := range batch {
				out[i] = u.JSON
			}
			s.mu.Unlock()
			writeResult(w, out)
			return
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-mine:
			writeError(w, ErrConflict)
			return
		case <-deadline.C:
			timeout = 0
		case <-r.Context().Done():
			return
		}
		s.mu.Lock()
	}
}

func sentMessage(token string, id int, c Call) map[string]any {
	msg := map[string]any{
		"message_id": id,
		"date":       c.Time.Unix(),
		"chat":       map[string]any{"id": c.ChatID(), "type": "private"},
		"from":       map[string]any{"id": BotID(token), "is_bot": true, "first_name": "Test bot"},
	}
	if t := c.Params["text"]; t != "" {
		msg["text"] = t
	}
	if t := c.Params["caption"]; t != "" {
		msg["caption"] = t
	}
	fileID := fmt.Sprintf("file-%d", id)
	switch c.Method {
	case "sendVoice":
		msg["voice"] = map[string]any{"file_id": fileID, "file_unique_id": fileID, "duration": 1}
	case "sendPhoto":
		msg["photo"] = []map[string]any{{"file_id": fileID, "file_unique_id": fileID, "width": 256, "height": 256}}
	case "sendDocument":
		msg["document"] = map[string]any{"file_id": fileID, "file_unique_id": fileID, "file_name": c.Files["document"].Name}
	}
	return msg
}

func parsePath(p string) (token, method string, ok bool) {
	rest, ok := strings.CutPrefix(p, "/bot")
	if !ok {
		return "", "", false
	}
	token, method, ok = strings.Cut(rest, "/")
	return token, method, ok && token != "" && method != "" && !strings.Contains(method, "/")
}

// maxUpload matches the Bot API's 50 MB upload limit.
const maxUpload = 50 << 20

func parseCall(r *http.Request) (Call, error) {
	c := Call{Params: map[string]string{}, Files: map[string]File{}}
	for k, v := range r.URL.Query() {
		c.Params[k] = v[0]
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "multipart/form-data":
		err := r.ParseMultipartForm(maxUpload)
		if errors.Is(err, io.EOF) {
			// go-telegram/bot sends a parameterless call (getMe) as a
			// multipart body with no parts at all.
			return c, nil
		}
		if err != nil {
			return c, fmt.Errorf("multipart body: %w", err)
		}
		for k, v := range r.MultipartForm.Value {
			c.Params[k] = v[0]
		}
		for k, fhs := range r.MultipartForm.File {
			f, err := fhs[0].Open()
			if err != nil {
				return c, err
			}
			data, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				return c, err
			}
			c.Files[k] = File{Name: fhs[0].Filename, Data: data}
		}
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return c, err
		}
		for k, v := range r.PostForm {
			c.Params[k] = v[0]
		}
	case "application/json":
		var m map[string]json.RawMessage
		if err := json.NewDecoder(io.LimitReader(r.Body, maxUpload)).Decode(&m); err != nil && err != io.EOF {
			return c, fmt.Errorf("json body: %w", err)
		}
		for k, v := range m {
			var str string
			if json.Unmarshal(v, &str) == nil {
				c.Params[k] = str
			} else {
				c.Params[k] = string(v)
			}
		}
	}
	return c, nil
}

func writeResult(w http.ResponseWriter, result any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

func writeError(w http.ResponseWriter, e APIError) {
	body := map[string]any{"ok": false, "error_code": e.Code, "description": e.Description}
	if e.RetryAfter > 0 {
		body["parameters"] = map[string]any{"retry_after": e.RetryAfter}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Code)
	json.NewEncoder(w).Encode(body)
}
