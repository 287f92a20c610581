package telegramtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

const token = "123:secret"

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newClient is a go-telegram/bot client pointed at srv, the way brainbot
// uses the library.
func newClient(t *testing.T, srv *Server, opts ...tgbot.Option) *tgbot.Bot {
	t.Helper()
	opts = append([]tgbot.Option{
		tgbot.WithServerURL(srv.URL),
		tgbot.WithHTTPClient(2*time.Second, &http.Client{Timeout: 5 * time.Second}),
		tgbot.WithErrorsHandler(func(error) {}),
	}, opts...)
	b, err := tgbot.New(token, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLongPollDeliversInOrderAndConfirms(t *testing.T) {
	srv := NewServer()
	defer srv.Close()
	ctx := testCtx(t)

	var mu sync.Mutex
	var got []*models.Message
	b := newClient(t, srv, tgbot.WithNotAsyncHandlers(), tgbot.WithDefaultHandler(func(_ context.Context, _ *tgbot.Bot, u *models.Update) {
		mu.Lock()
		got = append(got, u.Message)
		mu.Unlock()
	}))
	if me, err := b.GetMe(ctx); err != nil || me.Username != Username(token) || me.ID != 123 {
		t.Fatalf("getMe = %+v, %v", me, err)
	}
	pollCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { b.Start(pollCtx); close(done) }()
	defer func() { stop(); <-done }()

	srv.SendText(token, 7, 7, "hello")
	srv.SendText(token, 7, 7, "/start@"+Username(token)+" now")
	if err := srv.WaitConfirmed(ctx, token); err != nil {
		t.Fatal(err)
	}
	// The library confirms a batch with its next getUpdates, which may
	// come before its worker has handed the batch to the handler.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].Text != "hello" || got[1].From.ID != 7 || got[1].Chat.ID != 7 {
		t.Fatalf("got %+v", got)
	}
	e := got[1].Entities
	if len(e) != 1 || e[0].Type != models.MessageEntityTypeBotCommand || e[0].Offset != 0 || e[0].Length != len("/start@"+Username(token)) {
		t.Fatalf("command entities = %+v", e)
	}
	if got[0].Entities != nil {
		t.Fatalf("plain text got entities %+v", got[0].Entities)
	}
}

func TestGetUpdatesOffsetsAndTimeout(t *testing.T) {
	srv := NewServer()
	defer srv.Close()
	first := srv.SendText(token, 1, 1, "a")
	srv.SendText(token, 1, 1, "b")

	ids := func(offset int64, timeout int) []int64 {
		t.Helper()
		form := url.Values{"offset": {itoa(offset)}, "timeout": {itoa(int64(timeout))}}
		resp, err := http.PostForm(srv.URL+"/bot"+token+"/getUpdates", form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			OK     bool
			Result []struct {
				UpdateID int64 `json:"update_id"`
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || !body.OK {
			t.Fatalf("decode: %v %+v", err, body)
		}
		var out []int64
		for _, u := range body.Result {
			out = append(out, u.UpdateID)
		}
		return out
	}
	if got := ids(0, 0); len(got) != 2 || got[0] != first {
		t.Fatalf("unconfirmed updates = %v", got)
	}
	if got := ids(0, 0); len(got) != 2 {
		t.Fatalf("updates lost without confirmation: %v", got)
	}
	if got := ids(first+1, 0); len(got) != 1 || got[0] != first+1 {
		t.Fatalf("after confirming the first: %v", got)
	}
	if srv.Pending(token) != 1 {
		t.Fatalf("pending = %d", srv.Pending(token))
	}
	// A long poll answers as soon as an update is queued.
	go func() {
		time.Sleep(50 * time.Millisecond)
		srv.SendText(token, 1, 1, "c")
	}()
	if got := ids(first+2, 30); len(got) != 1 {
		t.Fatalf("long poll = %v", got)
	}
	// With nothing queued it answers empty once the timeout passes.
	if got := ids(first+3, 1); len(got) != 0 {
		t.Fatalf("empty poll = %v", got)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func TestRecordsUploadsAndParams(t *testing.T) {
	srv := NewServer()
	defer srv.Close()
	ctx := testCtx(t)
	b := newClient(t, srv, tgbot.WithSkipGetMe())

	if _, err := b.SendVoice(ctx, &tgbot.SendVoiceParams{ChatID: 5, Caption: "hi <b>x</b>", ParseMode: models.ParseModeHTML,
		Voice: &models.InputFileUpload{Filename: "v.ogg", Data: bytes.NewReader([]byte("OggS-data"))}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SendPhoto(ctx, &tgbot.SendPhotoParams{ChatID: 5, Photo: &models.InputFileUpload{Filename: "p.png", Data: strings.NewReader("PNG")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SendChatAction(ctx, &tgbot.SendChatActionParams{ChatID: 5, Action: models.ChatActionRecordVoice}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetMyCommands(ctx, &tgbot.SetMyCommandsParams{Commands: []models.BotCommand{{Command: "start", Description: "Start"}}}); err != nil {
		t.Fatal(err)
	}
	// A JSON body, as other clients send.
	resp, err := http.Post(srv.URL+"/bot"+token+"/sendMessage", "application/json", strings.NewReader(`{"chat_id":5,"text":"json"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	sent, err := srv.WaitFor(ctx, token, 3)
	if err != nil {
		t.Fatal(err)
	}
	v := sent[0]
	if v.Method != "sendVoice" || v.ChatID() != 5 || v.Param("caption") != "hi <b>x</b>" || v.Param("parse_mode") != "HTML" ||
		v.Files["voice"].Name != "v.ogg" || string(v.Files["voice"].Data) != "OggS-data" {
		t.Fatalf("voice call = %+v", v)
	}
	if p := sent[1]; p.Method != "sendPhoto" || string(p.Files["photo"].Data) != "PNG" {
		t.Fatalf("photo call = %+v", p)
	}
	if m := sent[2]; m.Method != "sendMessage" || m.Param("text") != "json" || m.ChatID() != 5 {
		t.Fatalf("json call = %+v", m)
	}
	if a := srv.Sent(token, "sendChatAction"); len(a) != 1 || a[0].Param("action") != "record_voice" {
		t.Fatalf("chat actions = %+v", a)
	}
	if c := srv.Sent(token, "setMyCommands"); len(c) != 1 || !strings.Contains(c[0].Param("commands"), `"start"`) {
		t.Fatalf("setMyCommands = %+v", c)
	}
}

func TestInjectedFailures(t *testing.T) {
	srv := NewServer()
	defer srv.Close()
	ctx := testCtx(t)
	b := newClient(t, srv, tgbot.WithSkipGetMe())
	send := func(chat int64, parseMode models.ParseMode) error {
		_, err := b.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: chat, Text: "x", ParseMode: parseMode})
		return err
	}

	srv.Flood(token, "sendMessage", 2, 3)
	for range 2 {
		var tooMany *tgbot.TooManyRequestsError
		if err := send(1, ""); !errors.As(err, &tooMany) || tooMany.RetryAfter != 3 {
			t.Fatalf("flooded send: %v", err)
		}
	}
	if err := send(1, ""); err != nil {
		t.Fatalf("flood did not end after 2 calls: %v", err)
	}

	srv.RejectHTML(token)
	if err := send(1, models.ParseModeHTML); !errors.Is(err, tgbot.ErrorBadRequest) || !strings.Contains(err.Error(), "can't parse entities") {
		t.Fatalf("HTML send: %v", err)
	}
	if err := send(1, ""); err != nil {
		t.Fatalf("plain send rejected: %v", err)
	}
	srv.RejectPhotos(token)
	_, err := b.SendPhoto(ctx, &tgbot.SendPhotoParams{ChatID: 1, Photo: &models.InputFileUpload{Filename: "p.png", Data: strings.NewReader("x")}})
	if !errors.Is(err, tgbot.ErrorBadRequest) || !strings.Contains(err.Error(), "PHOTO_INVALID_DIMENSIONS") {
		t.Fatalf("photo: %v", err)
	}
	srv.Block(token, 9)
	if err := send(9, ""); !errors.Is(err, tgbot.ErrorForbidden) {
		t.Fatalf("blocked chat: %v", err)
	}
	if got := len(srv.Calls(token)) - len(srv.Sent(token)); got != 5 {
		t.Fatalf("%d failed calls recorded, want 5", got)
	}

	srv.Unauthorize(token)
	if _, err := b.GetMe(ctx); !errors.Is(err, tgbot.ErrorUnauthorized) {
		t.Fatalf("unauthorized getMe: %v", err)
	}
	srv.ClearFailures(token)
	srv.Conflict(token)
	resp, err := http.PostForm(srv.URL+"/bot"+token+"/getUpdates", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("getUpdates under conflict: %d", resp.StatusCode)
	}
}

func TestSecondPollerEndsFirstWithConflict(t *testing.T) {
	srv := NewServer()
	defer srv.Close()
	firstDone := make(chan int)
	go func() {
		resp, err := http.PostForm(srv.URL+"/bot"+token+"/getUpdates", url.Values{"timeout": {"30"}})
		if err != nil {
			firstDone <- 0
			return
		}
		resp.Body.Close()
		firstDone <- resp.StatusCode
	}()
	// Poll again until the first poll has been ended by ours.
	for {
		resp, err := http.PostForm(srv.URL+"/bot"+token+"/getUpdates", url.Values{"timeout": {"0"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		select {
		case code := <-firstDone:
			if code != http.StatusConflict {
				t.Fatalf("first poller got %d, want 409", code)
			}
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// A stored file is found with getFile and downloaded from its path, as
// the Bot API serves files; unknown and oversize files are refused.
func TestFiles(t *testing.T) {
	s := NewServer()
	defer s.Close()
	const token = "42:AAsecret-0123456789012345678901234567"
	id := s.AddFile(token, []byte("voice bytes"))
	var file struct {
		OK     bool `json:"ok"`
		Result struct {
			Path string `json:"file_path"`
			Size int    `json:"file_size"`
		} `json:"result"`
	}
	resp, err := http.PostForm(s.URL+"/bot"+token+"/getFile", url.Values{"file_id": {id}})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&file); err != nil || !file.OK || file.Result.Size != 11 {
		t.Fatalf("getFile = %+v, %v", file, err)
	}
	resp.Body.Close()
	resp, err = http.Get(s.URL + "/file/bot" + token + "/" + file.Result.Path)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(data) != "voice bytes" {
		t.Errorf("download = %q", data)
	}
	big := s.AddFile(token, make([]byte, maxGetFile+1))
	for _, bad := range []string{"nope", big} {
		resp, err := http.PostForm(s.URL+"/bot"+token+"/getFile", url.Values{"file_id": {bad}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("getFile %s = %d, want 400", bad, resp.StatusCode)
		}
	}
}

// A message sent with buttons keeps them; a tap on one comes as Telegram
// sends it, with the message as it shows; its query is answered once; an
// edit changes what the message shows, and one without reply_markup
// takes the buttons away.
func TestButtons(t *testing.T) {
	srv := NewServer()
	defer srv.Close()
	ctx := testCtx(t)
	b := newClient(t, srv)
	sent, err := b.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: -100, Text: "Which city?", MessageThreadID: 3,
		ReplyMarkup: &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{{Text: "Paris", CallbackData: "q.0"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]Button{{{Text: "Paris", Data: "q.0"}}}
	if got := srv.Sent(token)[0].Buttons(); !reflect.DeepEqual(got, want) {
		t.Fatalf("sent buttons %+v, want %+v", got, want)
	}
	tapID, query := srv.Tap(token, 7, -100, sent.ID, "q.0")
	updates := pollUpdates(t, srv, tapID)
	q := updates[0].CallbackQuery
	if q == nil || q.ID != query || q.Data != "q.0" || q.From.ID != 7 || q.Message.Message == nil || q.Message.Message.ID != sent.ID ||
		q.Message.Message.Text != "Which city?" || q.Message.Message.MessageThreadID != 3 || q.Message.Message.ReplyMarkup == nil {
		t.Fatalf("tap delivered as %+v", updates[0])
	}
	if ok, err := b.AnswerCallbackQuery(ctx, &tgbot.AnswerCallbackQueryParams{CallbackQueryID: query, Text: "Noted"}); !ok || err != nil {
		t.Fatalf("answer: %v, %v", ok, err)
	}
	if _, err := b.AnswerCallbackQuery(ctx, &tgbot.AnswerCallbackQueryParams{CallbackQueryID: query}); !errors.Is(err, tgbot.ErrorBadRequest) {
		t.Errorf("a second answer: %v, want 400", err)
	}
	if c, err := srv.WaitAnswer(ctx, token, query); err != nil || c.Param("text") != "Noted" {
		t.Errorf("the answer recorded: %+v, %v", c, err)
	}
	if _, err := b.EditMessageText(ctx, &tgbot.EditMessageTextParams{ChatID: -100, MessageID: sent.ID, Text: "Which city?\n\nParis"}); err != nil {
		t.Fatal(err)
	}
	if m, ok := srv.Message(token, -100, sent.ID); !ok || m.Text != "Which city?\n\nParis" || m.Buttons != nil || m.Edits != 1 {
		t.Errorf("after the edit the message shows %+v", m)
	}
	if _, err := b.EditMessageReplyMarkup(ctx, &tgbot.EditMessageReplyMarkupParams{ChatID: -100, MessageID: sent.ID,
		ReplyMarkup: &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{}}}); !errors.Is(err, tgbot.ErrorBadRequest) {
		t.Errorf("an edit that changes nothing: %v, want 400 not modified", err)
	}
	tapID, query = srv.TapOld(token, 7, -100, sent.ID, "q.0")
	updates = pollUpdates(t, srv, tapID)
	if updates[0].CallbackQuery.Message.InaccessibleMessage == nil || updates[0].CallbackQuery.ID != query {
		t.Fatalf("a tap on an old message: %+v", updates[0])
	}
}

// pollUpdates gets the updates from offset on, as the library decodes
// them, and wants one.
func pollUpdates(t *testing.T, srv *Server, offset int64) []models.Update {
	t.Helper()
	resp, err := http.PostForm(srv.URL+"/bot"+token+"/getUpdates", url.Values{"offset": {itoa(offset)}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Result []models.Update
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Result) != 1 {
		t.Fatalf("getUpdates: %+v, %v", body, err)
	}
	return body.Result
}

// A sent message is there as soon as a waiter finds its call, while
// Telegram still holds its confirmation: the call carries the message's
// id, and the message is in its chat, for a test taps the buttons under
// it by that id at once. (A call found before its id was set said 0 and
// the tap named no message: TestClusterButtonsWorkOnAnotherInstance
// failed so twice; a message not yet in its chat made the tap name an
// inaccessible one: TestGroupStopButtonForTheAnonymousAdmins failed so.)
func TestAFoundSendIsThere(t *testing.T) {
	srv := NewServer()
	defer srv.Close()
	const token = "1:held"
	release := srv.Hold(token, "sendMessage")
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.PostForm(srv.URL+"/bot"+token+"/sendMessage", url.Values{"chat_id": {"-100"}, "text": {"held"}})
		if err == nil {
			resp.Body.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call, err := srv.WaitCall(ctx, token, func(c Call) bool { return c.Method == "sendMessage" })
	if err != nil {
		t.Fatal(err)
	}
	if call.MessageID == 0 {
		t.Error("the call found had no message id")
	}
	if m, ok := srv.Message(token, -100, call.MessageID); !ok || m.Text != "held" {
		t.Errorf("message %d found by its call is %+v in the chat (%v), want the sent one", call.MessageID, m, ok)
	}
	release()
	<-done
	if sent := srv.Sent(token, "sendMessage"); len(sent) != 1 || sent[0].MessageID != call.MessageID {
		t.Errorf("sent %+v, want the message under id %d", sent, call.MessageID)
	}
}
