package bot

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"brainbot/state/sqlite"
)

// A database the release before the raw journal wrote (schema 3: the
// fixture state/sqlite/testdata/schema-v3.sql, journal rows included) is
// upgraded, and every message its journal held is answered as that
// release would have: a private text, a group message with its sender's
// name (replying to it), a command, and an album of two photos as one
// request.
func TestUpgradeAnswersTheJournal(t *testing.T) {
	var photos [][]byte
	h := newHarnessWith(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil, func(h *harness) {
		for i := range 2 {
			img := jpegOf(t, 5+i, 5)
			photos = append(photos, img)
			if id := h.srv.AddFile(tokenA, img); id != []string{"file-1", "file-2"}[i] {
				t.Fatalf("the stand-in named the file %s", id)
			}
		}
		h.store.Close()
		fromRelease3(t, filepath.Join(h.data, sqlite.FileName))
		h.reopenStore()
		h.claude.sessions[release3Session] = true // the CLI has it
	})
	got := map[int64]string{}
	var groupReply string
	for _, c := range h.waitSent(tokenA, 4) {
		got[c.ChatID()] = c.Param("text")
		if c.ChatID() == -1001500 {
			groupReply = c.Param("reply_parameters")
		}
	}
	want := map[int64]string{
		7:        "You said: hello from before the upgrade",
		-1001500: "You said: Ann Lee: what did I miss?",
		10:       "You said: two photos",
	}
	for chat, text := range want {
		if got[chat] != text {
			t.Errorf("chat %d: %q, want %q", chat, got[chat], text)
		}
	}
	if !strings.HasPrefix(got[9], "Tester: A test bot.") {
		t.Errorf("/help answered %q", got[9])
	}
	var reply struct {
		MessageID int `json:"message_id"`
	}
	if json.Unmarshal([]byte(groupReply), &reply) != nil || reply.MessageID != 12 {
		t.Errorf("group reply_parameters %q, want a reply to message 12", groupReply)
	}
	for _, req := range h.claude.requests() {
		switch req.Prompt {
		case "two photos":
			if len(req.Attachments) != 2 || !bytes.Equal(req.Attachments[0].Data, photos[0]) || !bytes.Equal(req.Attachments[1].Data, photos[1]) {
				t.Errorf("the album reached the model as %d files, want its two photos in order", len(req.Attachments))
			}
		case "hello from before the upgrade":
			if !req.Resume || req.SessionID != release3Session {
				t.Errorf("chat 7's request resumed %q (%v), want its stored session", req.SessionID, req.Resume)
			}
		}
	}
	waitEmptyJournal(t, h.store)
	h.restartAnswersNothingTwice()
}

// release3Session is chat 7's session in the fixture.
const release3Session = "0d4a5f9e-1c2b-4e7a-9f3d-8b6c5a4e3f21"

// fromRelease3 makes the database at path what release 3 left: the
// fixture's schema and rows.
func fromRelease3(t *testing.T, path string) {
	t.Helper()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	ddl, err := os.ReadFile(filepath.Join("..", "state", "sqlite", "testdata", "schema-v3.sql"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(string(ddl)); err != nil {
		t.Fatal(err)
	}
}
