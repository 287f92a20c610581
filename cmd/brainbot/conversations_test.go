package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/message"
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
	files := transcriptsIn(dir)
	transcript, err := os.ReadFile(filepath.Join("..", "..", "claude", "testdata", "transcript.jsonl"))
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
	api := conversationsAPI{state: db, claude: files, log: zap.NewNop(),
		forget: func(_ context.Context, bot string, user int64) (state.Forgotten, error) {
			forgot = append(forgot, user)
			return state.Forgotten{Bot: bot, User: user}, nil
		}}
	const token = "0123456789abcdef0123"
	srv := httptest.NewServer(adminEndpoint(http.NotFoundHandler(), func() error { return nil }).withConversations(api).withBearer(token).handler)
	defer srv.Close()
	call := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, body := roundTrip(t, req)
		return resp.StatusCode, body
	}
	for _, c := range []struct {
		method, path string
		code         int
		has          string
	}{
		{"GET", "/conversations?user=7", 200, `"turns": 4`},
		{"GET", "/conversations?user=abc", 400, "user"},
		{"GET", "/conversations/show?bot=alpha&chat=7", 200, "assistant:\n  (called mcp__image-gen__generate_image)\n  Done.\n  file: /tmp/"},
		{"GET", "/conversations/show?bot=alpha&chat=8", 404, "no such conversation"},
		{"GET", "/conversations/show?chat=7", 400, "want bot"},
		{"POST", "/forget?bot=alpha", 400, "want user"},
		{"GET", "/forget?user=7", 404, ""}, // POST only
		{"POST", "/forget?user=7", 200, `"user": 7`},
		{"GET", "/readyz", 200, "ready"},
	} {
		if code, body := call(c.method, c.path); code != c.code || !strings.Contains(body, c.has) {
			t.Errorf("%s %s = %d %q, want %d with %q", c.method, c.path, code, body, c.code, c.has)
		}
	}
	if len(forgot) != 1 || forgot[0] != 7 {
		t.Errorf("forgot %v, want user 7 once", forgot)
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
