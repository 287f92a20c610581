package admin

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"go.uber.org/zap"

	"brainbot/claude"
	"brainbot/message"
	"brainbot/state"
	"brainbot/state/sqlite"
	"brainbot/state/sqlite/sqlitefresh"
)

// transcriptsIn keeps the test's transcripts in a folder, as the driver
// keeps the CLI's.
type transcriptsIn string

func (d transcriptsIn) SessionFile(bot, session string) string {
	return filepath.Join(string(d), bot, session+".jsonl")
}
func (transcriptsIn) End(string) {}

// The conversation calls: a list with what the transcript holds, one
// shown as text, and the answers to calls that name nothing, or nothing
// kept; behind the admin token like every call.
func TestConversationCalls(t *testing.T) {
	dir := t.TempDir()
	db := sqlitefresh.Open(t, filepath.Join(dir, sqlite.FileName))
	ctx := context.Background()
	key := message.Key{Bot: "alpha", Chat: 7}
	if err := db.UseSession(ctx, key, "s1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AddNote(ctx, "alpha", 7, "Has a cat named Miso", 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, in := range []time.Duration{time.Hour, 2 * time.Hour} {
		r := state.Reminder{Key: key, User: 7, Text: "call mom", Due: time.Now().Add(in), Created: time.Now()}
		if _, err := db.AddReminder(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	files := transcriptsIn(dir)
	transcript, err := os.ReadFile(filepath.Join("..", "claude", "testdata", "transcript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(files.SessionFile("alpha", "s1")), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files.SessionFile("alpha", "s1"), transcript, 0o600); err != nil {
		t.Fatal(err)
	}
	var forgot []int64
	api := Conversations{State: db, Claude: files, Log: zap.NewNop(),
		Forget: func(_ context.Context, bot string, user int64) (state.Forgotten, error) {
			forgot = append(forgot, user)
			return state.Forgotten{Bot: bot, User: user, Notes: 1, Reminders: 2}, nil
		}}
	const token = "0123456789abcdef0123"
	surface := New(Config{Token: token, Ready: func() error { return nil }, Metrics: http.NotFoundHandler(), Conversations: api})
	srv := httptest.NewServer(surface.Handler(Address))
	defer srv.Close()
	call := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, c := range []struct {
		method, path string
		code         int
		has          string
	}{
		{"GET", "/conversations?user=7", 200, `"turns": 4`},
		{"GET", "/conversations?user=7", 200, `"notes": 1`},
		{"GET", "/conversations?user=7", 200, `"reminders": 2`},
		{"GET", "/conversations?user=abc", 400, "user"},
		{"GET", "/conversations/show?bot=alpha&chat=7", 200, "assistant:\n  (called mcp__image-gen__generate_image)\n  Done.\n  file: /tmp/"},
		{"GET", "/conversations/show?bot=alpha&chat=8", 404, "no such conversation"},
		{"GET", "/conversations/show?chat=7", 400, "want bot"},
		{"POST", "/forget?bot=alpha", 400, "want user"},
		{"GET", "/forget?user=7", 405, ""}, // POST only
		{"POST", "/forget?user=7", 200, `"notes": 1`},
		{"POST", "/forget?user=7", 200, `"reminders": 2`},
		{"GET", "/readyz", 200, "ready"},
	} {
		if code, body := call(c.method, c.path); code != c.code || !strings.Contains(body, c.has) {
			t.Errorf("%s %s = %d %q, want %d with %q", c.method, c.path, code, body, c.code, c.has)
		}
	}
	if len(forgot) != 2 || forgot[0] != 7 {
		t.Errorf("forgot %v, want user 7 twice", forgot)
	}
	resp, err := http.Get(srv.URL + "/conversations")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d", resp.StatusCode)
	}
}

// What users and the model wrote reaches the admin's terminal as text,
// never as what a terminal acts on: a window title and a link set by OSC
// sequences, a screen cleared, text reversed by a bidi override.
func TestConversationTextIsPrintable(t *testing.T) {
	hostile := "\x1b]0;owned\x07hi \x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\ \x1b[2J\u202egnp.exe\u2066 \u009b31m"
	var b strings.Builder
	writeConversation(&b, ConversationShown{Transcript: []claude.Turn{
		{Role: "user", Text: hostile, Files: []string{"/tmp/a\x1b[1mb.ogg"}},
		{Role: "assistant", Text: "fine\ttabbed", Tools: []string{"mcp__x\x1b[0m"}},
	}})
	out := b.String()
	for _, r := range out {
		if r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || unicode.Is(unicode.Bidi_Control, r)) {
			t.Fatalf("the text holds %U:\n%q", r, out)
		}
	}
	for _, want := range []string{`\x1b]0;owned\x07hi`, `\u202egnp.exe\u2066`, `\u009b31m`, `file: /tmp/a\x1b[1mb.ogg`, "fine\ttabbed", `(called mcp__x\x1b[0m)`} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %q:\n%s", want, out)
		}
	}
}
