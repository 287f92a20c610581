package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"brainbot/admin"
	"brainbot/bot/conversation"
	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/state/sqlite"
)

// The end-to-end suite of an admin's window onto conversations and of a
// user's /forget: brainbot run with the real Claude Code CLI, in both
// modes (the cluster one on a real nats-server), and the commands
// brainbot conversations, show and forget through its admin socket, and
// from elsewhere at its admin address with the admin token.

// forgetAdminToken is the admin address's token in these tests.
const forgetAdminToken = "forget-e2e-admin-token-0123456789"

func TestEndToEndForget(t *testing.T) { eachMode(t, testForget) }

func testForget(t *testing.T, env []string) {
	s := startStack(t, stack.Config{
		Brainbot: brainbotBinary(t), ClaudeCmd: claudetest.RequireCLI(t), Dir: t.TempDir(), Logs: testLogs(t),
		Brains: map[string]string{"asker.yaml": askerBrain},
		Env:    append([]string{"BRAINBOT_HTTP_ADDR=127.0.0.1:0", "BRAINBOT_ADMIN_TOKEN=" + forgetAdminToken}, env...),
	}, nil)
	admin := socketEnv(adminSocket(t, s))
	const user = 9

	// A conversation, and a voice note made for the user (🔊).
	answer, _, data := question(t, ask(t, s, "asker", user, "Remember the lighthouse"))
	if notice := waitAnswer(t, s, "asker", s.Tap("asker", user, user, answer.MessageID, data[0])); notice != conversation.NoticeReading {
		t.Fatalf("a tap on 🔊 answered %q", notice)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := s.Telegram.WaitCall(ctx, stack.Token("asker"), func(c telegramtest.Call) bool { return c.Method == "sendVoice" }); err != nil {
		t.Fatal(err)
	}
	voices := filepath.Join(s.DataDir, "audio-output", "bot-asker", "user-9")

	// The admin lists it and reads it.
	list := listConversations(t, admin, "-user", "9")
	if len(list) != 1 || list[0].Bot != "asker" || list[0].Chat != user || list[0].User != user || list[0].Turns < 2 || list[0].Messages != 1 || list[0].Bytes == 0 {
		t.Fatalf("conversations -user 9: %+v", list)
	}
	session := list[0].Session
	transcripts := filesNamed(t, s.DataDir, session+".jsonl")
	if len(transcripts) == 0 {
		t.Fatalf("no transcript of session %s under %s", session, s.DataDir)
	}
	code, shown, stderr := runMain(t, admin, "conversations", "show", "-bot", "asker", "-chat", "9")
	if code != exitOK || !strings.Contains(shown, "user:\n  Remember the lighthouse") || !strings.Contains(shown, "assistant:\n  You said: Remember the lighthouse") {
		t.Errorf("conversations show = %d:\n%s%s", code, shown, stderr)
	}
	// From another machine: the address, with the token.
	remote := []string{"BRAINBOT_HTTP_ADDR=" + adminAddr(t, s), "BRAINBOT_ADMIN_TOKEN=" + forgetAdminToken, "BRAINBOT_ADMIN_SOCKET=" + filepath.Join(t.TempDir(), "none.sock")}
	if list := listConversations(t, remote, "-user", "9"); len(list) != 1 || list[0].Session != session {
		t.Errorf("conversations at the address with the token: %+v", list)
	}
	code, _, stderr = runMain(t, []string{remote[0], "BRAINBOT_ADMIN_TOKEN=not-the-service-token-at-all", remote[2]}, "conversations")
	if code != exitError || !strings.Contains(stderr, "the service refused BRAINBOT_ADMIN_TOKEN") {
		t.Errorf("a wrong token: exit %d, %s", code, stderr)
	}
	before := usageTotals(t, s, env)

	// /forget says what goes, under a confirm button; the tap forgets.
	offer, labels, data := question(t, ask(t, s, "asker", user, "/forget"))
	if stack.Rendered(offer) != conversation.ForgetOffer || !slices.Equal(labels, []string{conversation.ForgetLabel, conversation.ForgetCancelLabel}) {
		t.Fatalf("/forget answered %q under %v", stack.Rendered(offer), labels)
	}
	mark := s.Logs().Len()
	if notice := waitAnswer(t, s, "asker", s.Tap("asker", user, user, offer.MessageID, data[0])); notice != conversation.NoticeForgetting {
		t.Errorf("the confirm tap answered %q", notice)
	}
	forgot := waitLine(ctx, t, s, mark, func(l stack.Line) bool { return l.Msg == "user forgotten" })
	if forgot.Str("bot") != "asker" || forgot.Int("user") != user || forgot.Int("conversations") != 1 || forgot.Int("files") == 0 {
		t.Errorf("logged %v", forgot)
	}
	if _, err := s.Telegram.WaitCall(ctx, stack.Token("asker"), func(c telegramtest.Call) bool {
		return c.Method == "sendMessage" && c.Param("text") == conversation.ForgetDone
	}); err != nil {
		t.Fatalf("never told it is done: %v", err)
	}
	for _, gone := range append(transcripts, voices) {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", gone, err)
		}
	}
	if after := usageTotals(t, s, env); after != before {
		t.Errorf("usage totals %+v, were %+v", after, before)
	}
	if list := listConversations(t, admin, "-user", "9"); len(list) != 0 {
		t.Errorf("still listed: %+v", list)
	}

	// The next message starts a new conversation: the model sees no
	// earlier turn.
	if got := wantText(t, ask(t, s, "asker", user, "Do you remember?")); got != "You said: Do you remember? (message 1)" {
		t.Errorf("after /forget the model answered %q", got)
	}

	// brainbot forget: the same for an admin, every bot.
	code, out, stderr := runMain(t, admin, "forget", "-user", "9")
	if code != exitOK || !strings.Contains(out, "user 9 forgotten with every bot: 1 conversation, ") {
		t.Errorf("forget = %d: %s%s", code, out, stderr)
	}
	if list := listConversations(t, admin); len(list) != 0 {
		t.Errorf("after brainbot forget: %+v", list)
	}
	if l := waitLine(ctx, t, s, mark, func(l stack.Line) bool { return l.Msg == "user forgotten" && l.Str("by") == "admin" }); l.Int("user") != user {
		t.Errorf("logged %v", l)
	}
}

// The commands say what to do when the service does not answer: no
// socket where they look, a socket nobody answers on, no answer at the
// address.
func TestConversationsWithoutTheService(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runMain(t, []string{"BRAINBOT_DATA=" + dir}, "forget", "-user", "9")
	if want := "no admin socket at " + filepath.Join(dir, "admin.sock"); code != exitError || !strings.Contains(stderr, want) || !strings.Contains(stderr, "BRAINBOT_DATA") {
		t.Errorf("without a socket: exit %d: %s, want %q", code, stderr, want)
	}
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	code, _, stderr = runMain(t, socketEnv(stale), "conversations")
	if code != exitError || !strings.Contains(stderr, "no answer from brainbot at "+stale) {
		t.Errorf("a stale socket: exit %d: %s", code, stderr)
	}
	code, _, stderr = runMain(t, []string{"BRAINBOT_DATA=" + dir, "BRAINBOT_HTTP_ADDR=127.0.0.1:9", "BRAINBOT_ADMIN_TOKEN=" + forgetAdminToken}, "conversations")
	if code != exitError || !strings.Contains(stderr, "no answer from brainbot at http://127.0.0.1:9") {
		t.Errorf("at the address: exit %d: %s", code, stderr)
	}
}

func listConversations(t *testing.T, env []string, args ...string) []admin.ConversationInfo {
	t.Helper()
	code, out, stderr := runMain(t, env, append([]string{"conversations", "-json"}, args...)...)
	if code != exitOK {
		t.Fatalf("conversations = %d: %s", code, stderr)
	}
	var list []admin.ConversationInfo
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("conversations -json: %v\n%s", err, out)
	}
	return list
}

// usageTotal is what brainbot usage says all requests cost.
type usageTotal struct {
	Requests int64
	USD      float64
}

func usageTotals(t *testing.T, s *stack.Stack, env []string) usageTotal {
	t.Helper()
	code, out, stderr := runMain(t, append([]string{"BRAINBOT_DATA=" + s.DataDir}, env...), "usage", "-json")
	if code != exitOK {
		t.Fatalf("usage = %d: %s", code, stderr)
	}
	var total usageTotal
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var l struct {
			Requests int64   `json:"requests"`
			USD      float64 `json:"total_usd"`
		}
		if err := dec.Decode(&l); err != nil {
			t.Fatal(err)
		}
		total.Requests += l.Requests
		total.USD += l.USD
	}
	return total
}

// filesNamed lists the files named name below dir.
func filesNamed(t *testing.T, dir, name string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == name {
			found = append(found, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// brainbot forget -h says truthfully what a forget leaves: a group's
// conversation is everyone's, and keeps what the user said in it.
func TestForgetHelpSaysWhatStays(t *testing.T) {
	_, stdout, stderr := runMain(t, nil, "forget", "-h")
	help := stdout + stderr
	for _, want := range []string{"private and guest conversations", "What stays: a group's conversations, which are everyone's, with the user's words in their transcripts", "backups made before"} {
		if !strings.Contains(help, want) {
			t.Errorf("forget -h lacks %q:\n%s", want, help)
		}
	}
}

// A forgotten user's words leave no copy under the data folder: not in
// the database's write-ahead log once the forget has returned, and in no
// file at all (the database, its -wal and -shm, the CLI's folders, the
// spool) once brainbot has stopped cleanly. The user's words are a
// phrase they sent, which the answer read aloud repeats (the CLI's call
// of our speech tool, the 🔊 under it), and their name, which every
// update they send carries.
func TestEndToEndForgetLeavesNoCopy(t *testing.T) {
	eachMode(t, func(t *testing.T, env []string) {
		s := startStack(t, stack.Config{
			Brainbot: brainbotBinary(t), ClaudeCmd: claudetest.RequireCLI(t), Dir: t.TempDir(), Env: env,
			Brains: map[string]string{"speaker.yaml": speakerBrain}, Logs: testLogs(t),
		}, nil)
		const user = 8601
		secret := []byte("Zanzibar quokka sonata 4471")
		name := []byte(fmt.Sprintf("User%d", user)) // telegramtest's first_name of the user
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()

		if got := ask(t, s, "speaker", user, "Remember "+string(secret)).Methods(); !slices.Equal(got, []string{"sendVoice"}) {
			t.Fatalf("answered with %v, want a voice note", got)
		}
		offer, _, data := question(t, ask(t, s, "speaker", user, "/forget"))
		if notice := waitAnswer(t, s, "speaker", s.Tap("speaker", user, user, offer.MessageID, data[0])); notice != conversation.NoticeForgetting {
			t.Fatalf("the confirm tap answered %q", notice)
		}
		// Said once the forget has returned.
		if _, err := s.Telegram.WaitCall(ctx, stack.Token("speaker"), func(c telegramtest.Call) bool {
			return c.Method == "sendMessage" && c.Param("text") == conversation.ForgetDone
		}); err != nil {
			t.Fatalf("never told it is done: %v", err)
		}
		for _, words := range [][]byte{secret, name} {
			if held := filesHolding(t, s.DataDir, words); slices.Contains(held, sqlite.FileName+"-wal") {
				t.Errorf("right after the forget %s holds %q", sqlite.FileName+"-wal", words)
			}
		}

		if code, err := s.Stop(ctx, syscall.SIGTERM); err != nil || code != 0 {
			t.Fatalf("stop: exit %d, %v", code, err)
		}
		for _, words := range [][]byte{secret, name} {
			if held := filesHolding(t, s.DataDir, words); len(held) > 0 {
				t.Errorf("after the forget and a clean stop, %q is in %v", words, held)
			}
		}
	})
}

// filesHolding lists the files below dir (relative to it) whose bytes
// hold words anywhere, as grep -a finds them.
func filesHolding(t *testing.T, dir string, words []byte) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) { // deleted while we walked
			return nil
		}
		if err != nil {
			return err
		}
		if bytes.Contains(data, words) {
			rel, _ := filepath.Rel(dir, path)
			found = append(found, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
