package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"brainbot/bot/panel/engine"
	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/state/jetstream/natstest"
)

// Panels end to end: three member brains in one process answer, comment
// and reply in one group, each through its own bot.

const (
	panelChatBrain = `name: Chat
telegram:
  token_env: CHAT_TOKEN
system_prompt: You are Chat, who likes people.
tts:
  voice: nova
`
	panelVoiceBrain = `name: Voice
telegram:
  token_env: VOICE_TOKEN
system_prompt: You are Voice, who likes music.
tts:
  voice: onyx
  format: opus
`
	panelPainterBrain = `name: Painter
telegram:
  token_env: PAINTER_TOKEN
system_prompt: You are Painter, who likes colours.
tts:
  voice: coral
`
	// brokenBrain fails every request: the scripted model answers HTTP 400
	// to a system prompt with #fail.
	brokenBrain = `name: Broken
telegram:
  token_env: BROKEN_TOKEN
system_prompt: "You are broken. #fail"
`
	citiesPanel = `name: City hall
members: [chat, voice, painter]
speak: true
`
	failingPanel = `members: [chat, voice, broken]
`
)

func newPanelStack(t *testing.T, env ...string) *stack.Stack {
	t.Helper()
	return startStack(t, stack.Config{
		Brainbot:  brainbotBinary(t),
		ClaudeCmd: claudetest.RequireCLI(t),
		Dir:       t.TempDir(),
		Brains: map[string]string{"chat.yaml": panelChatBrain, "voice.yaml": panelVoiceBrain,
			"painter.yaml": panelPainterBrain, "broken.yaml": brokenBrain},
		Panels: map[string]string{"cities.yaml": citiesPanel, "failing.yaml": failingPanel},
		Env:    append([]string{"BRAINBOT_GRACE=5s", "BRAINBOT_MAX_CLAUDE=3"}, env...),
		Logs:   testLogs(t),
	}, nil)
}

func waitPanelLine(t *testing.T, s *stack.Stack, from int, group int64) stack.Line {
	t.Helper()
	return waitLogFrom(t, s, from, func(l stack.Line) bool { return l.Msg == "panel" && l.Int("chat") == group })
}

func TestEndToEndPanel(t *testing.T) {
	s := newPanelStack(t)
	members := []string{"chat", "voice", "painter"}

	t.Run("three members answer, comment and reply in their own voices, in order", func(t *testing.T) {
		const group = -100701
		mark := s.Logs().Len()
		start := time.Now()
		s.SendGroupCommand(group, 77, "/panel should cities ban cars?", members...)
		summary := waitPanelLine(t, s, mark, group)
		t.Logf("panel of three speaking members: %v (summary %s)", time.Since(start).Round(time.Millisecond), summary.Raw)
		if summary.Str("outcome") != "ok" || summary.Int("answers") != 3 || summary.Int("comments") != 3 || summary.Int("replies") != 2 {
			t.Errorf("summary %s", summary.Raw)
		}
		if n := len(s.Logs().Find(mark, func(l stack.Line) bool { return l.Msg == "panel started" })); n != 1 {
			t.Errorf("%d runs started for one /panel message three bots received, want 1", n)
		}
		posts := s.GroupPosts(group, members...)
		var order []string
		for _, p := range posts {
			order = append(order, p.Bot)
			if p.Method != "sendVoice" || len(p.Call.Files["voice"].Data) == 0 {
				t.Errorf("%s stack.Post %s, want a voice note", p.Bot, p.Method)
			}
		}
		// Scripted model: each member comments on the first other member,
		// so chat→voice, voice→chat, painter→chat; painter's answer got no
		// comment and painter does not reply.
		if want := []string{"chat", "voice", "painter", "chat", "voice", "painter", "chat", "voice"}; !slices.Equal(order, want) {
			t.Fatalf("the group got %v, want %v", order, want)
		}
		answer := map[string]int{"chat": posts[0].ID, "voice": posts[1].ID, "painter": posts[2].ID}
		comment := map[string]int{"chat": posts[3].ID, "voice": posts[4].ID, "painter": posts[5].ID}
		for i, want := range []int{77, 77, 77, answer["voice"], answer["chat"], answer["chat"], comment["voice"], comment["chat"]} {
			if posts[i].ReplyTo != want {
				t.Errorf("message %d (%s) replies to %d, want %d", i+1, posts[i].Bot, posts[i].ReplyTo, want)
			}
		}
		if got := filepath.Ext(posts[1].Call.Files["voice"].Name); got != ".ogg" {
			t.Errorf("voice's note is %s, want its brain's opus (.ogg)", got)
		}
		voices := map[string]string{}
		for _, r := range s.OpenAI.Requests() {
			if r.Input != "" {
				voices[r.Voice] = r.Input
			}
		}
		for _, v := range []string{"nova", "onyx", "coral"} {
			if voices[v] == "" {
				t.Errorf("no speech in the voice %s: the members must speak in their brains' voices (%v)", v, voices)
			}
		}

		m := readManifest(t, summary.Str("manifest"))
		if m.Question != "should cities ban cars?" || !slices.Equal(m.Members, members) {
			t.Errorf("manifest: question %q members %v", m.Question, m.Members)
		}
		folder := engine.Folder(group, summary.Str("panel_run"))
		var want []string
		for _, f := range []string{"turn-1/chat.mp3", "turn-1/voice.ogg", "turn-1/painter.mp3", "turn-2/chat-to-voice.mp3",
			"turn-2/voice-to-chat.ogg", "turn-2/painter-to-chat.mp3", "turn-3/chat.mp3", "turn-3/voice.ogg"} {
			want = append(want, filepath.Join(folder, f))
		}
		if !slices.Equal(m.Files, want) {
			t.Errorf("manifest files %v, want %v", m.Files, want)
		}
		for _, f := range m.Files {
			if info, err := os.Stat(filepath.Join(s.DataDir, f)); err != nil || info.Size() == 0 {
				t.Errorf("file %s: %v", f, err)
			}
		}
		for _, it := range m.Items {
			if it.Turn == 2 && (it.Target == it.Member || !slices.Contains(members, it.Target)) {
				t.Errorf("%s commented on %q", it.Member, it.Target)
			}
			if it.Text == "" || it.DurationMS <= 0 {
				t.Errorf("manifest item without text or duration: %+v", it)
			}
		}

		registered := false
		for _, c := range s.Telegram.Sent(stack.Token("voice"), "setMyCommands") {
			registered = registered || strings.Contains(c.Param("commands"), `"panel"`)
		}
		if !registered {
			t.Error("a panel member does not list /panel among its commands")
		}

		// The panel left the members' own conversation in the group alone.
		s.Telegram.SendMessage(stack.Token("chat"), groupMessage(stack.GroupUser, group, "hello", "@"+telegramtest.Username(stack.Token("chat"))))
		got := waitChat(t, s, stack.Token("chat"), group, 4)[3]
		if text := stack.Rendered(got); text != "You said: Ann: hello (message 1)" {
			t.Errorf("chat's next group message = %q, want a conversation of its own", text)
		}
	})

	t.Run("a member that fails in turn 1 sits out turns 2 and 3", func(t *testing.T) {
		const group = -100702
		bots := []string{"chat", "voice", "broken"}
		mark := s.Logs().Len()
		s.SendGroupCommand(group, 5, "/panel failing is jazz music?", bots...)
		summary := waitPanelLine(t, s, mark, group)
		if summary.Str("outcome") != "partial" || summary.Int("answers") != 2 || summary.Int("comments") != 2 || summary.Int("replies") != 2 {
			t.Errorf("summary %s", summary.Raw)
		}
		posts := s.GroupPosts(group, bots...)
		var order []string
		for _, p := range posts {
			order = append(order, p.Bot)
		}
		// chat and voice comment on each other; chat notes who sat out.
		if want := []string{"chat", "voice", "chat", "voice", "chat", "voice", "chat"}; !slices.Equal(order, want) {
			t.Fatalf("the group got %v, want %v", order, want)
		}
		if note := posts[6].Text; note != "Sat out: Broken (turn 1)." {
			t.Errorf("closing note %q", note)
		}
		if !strings.HasPrefix(posts[0].Text, "You said: ") || posts[0].Method != "sendMessage" {
			t.Errorf("a writing panel's answer: %s %q", posts[0].Method, posts[0].Text)
		}
		for _, r := range s.Model.Requests() {
			if !strings.Contains(r.System, "You are broken") {
				continue
			}
			for _, m := range r.Messages {
				for _, b := range m.Content {
					if strings.Contains(b.Text, "Turn 2 of 3") || strings.Contains(b.Text, "Turn 3 of 3") {
						t.Errorf("the failed member was asked again: %q", b.Text)
					}
				}
			}
		}
	})

	t.Run("without a question or with a member missing, /panel says what to do", func(t *testing.T) {
		const group = -100703
		s.SendGroupCommand(group, 9, "/panel", members...)
		usage := waitPosts(t, s, group, 1, members...)
		if text := usage[0].Text; !strings.Contains(text, "/panel should cities ban cars?") || usage[0].ReplyTo != 9 {
			t.Errorf("usage = %q (a reply to %d)", text, usage[0].ReplyTo)
		}
		s.Telegram.Leave(stack.Token("painter"), group)
		s.SendGroupCommand(group, 10, "/panel should cities ban cars?", "chat", "voice")
		missing := waitPosts(t, s, group, 2, members...)
		if text := missing[1].Text; !strings.Contains(text, "missing: Painter") {
			t.Errorf("reply with painter gone = %q", text)
		}
		time.Sleep(300 * time.Millisecond) // any further reply would be a duplicate
		if n := len(s.GroupPosts(group, members...)); n != 2 {
			t.Errorf("%d replies in the group, want 2 (one per /panel)", n)
		}
	})
}

// waitPosts waits for n messages of the bots in group.
func waitPosts(t *testing.T, s *stack.Stack, group int64, n int, bots ...string) []stack.Post {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		if posts := s.GroupPosts(group, bots...); len(posts) >= n {
			return posts
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d messages in %d\n%s", n, group, s.Logs().Tail(10))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A panel run killed between turns resumes at the turn it reached,
// sending nothing twice: alone from the SQLite journal, and in a cluster
// from brainbot_panels (the run's instance gone, the next to look claims
// it; cluster.TestAPanelRunOfAGoneInstanceIsTakenOverOnce has another
// instance take it).
func TestEndToEndPanelResumesAfterKill(t *testing.T) {
	t.Run("alone", func(t *testing.T) { panelResumesAfterKill(t) })
	t.Run("cluster", func(t *testing.T) {
		panelResumesAfterKill(t, "BRAINBOT_NATS_URL="+natstest.Start(t), "BRAINBOT_INSTANCE=p1")
	})
}

func panelResumesAfterKill(t *testing.T, env ...string) {
	s := newPanelStack(t, env...)
	members := []string{"chat", "voice", "painter"}
	const group = -100704
	// Turn 3's answers wait: brainbot is killed with turns 1 and 2 out.
	s.Model.Hold(engine.HoldMarker)
	mark := s.Logs().Len()
	s.SendGroupCommand(group, 3, "/panel should cities ban cars?", members...)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := s.Logs().WaitFrom(ctx, mark, func(lines []stack.Line) bool {
		n := 0
		for _, l := range lines {
			if l.Msg == "panel message sent" {
				n++
			}
		}
		return n == 6
	}, nil); err != nil {
		t.Fatalf("turns 1 and 2 were not sent: %v\n%s", err, s.Logs().Tail(20))
	}
	// One panel at a time per group.
	s.SendGroupCommand(group, 4, "/panel and another question?", members...)
	busy := waitPosts(t, s, group, 7, members...)
	if text := busy[6].Text; !strings.Contains(text, "already running") || busy[6].ReplyTo != 4 {
		t.Errorf("a second /panel while one runs got %q (a reply to %d)", text, busy[6].ReplyTo)
	}
	if _, err := s.Stop(ctx, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if n := len(s.GroupPosts(group, members...)); n != 7 {
		t.Fatalf("%d messages before the kill, want 6 and the busy reply", n)
	}
	s.Model.Hold("")
	mark = s.Logs().Len()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	summary := waitPanelLine(t, s, mark, group)
	if summary.Int("resumes") != 1 || summary.Int("sent") != 2 || summary.Int("replies") != 2 {
		t.Errorf("summary after the restart %s", summary.Raw)
	}
	posts := slices.DeleteFunc(s.GroupPosts(group, members...), func(p stack.Post) bool { return p.ReplyTo == 4 })
	var order []string
	for _, p := range posts {
		order = append(order, p.Bot)
	}
	if want := []string{"chat", "voice", "painter", "chat", "voice", "painter", "chat", "voice"}; !slices.Equal(order, want) {
		t.Fatalf("the group got %v, want turns 1-2 once and turn 3 once: %v", order, want)
	}
	if posts[6].ReplyTo != posts[4].ID || posts[7].ReplyTo != posts[3].ID {
		t.Errorf("resumed replies answer %d and %d, want the comments %d and %d", posts[6].ReplyTo, posts[7].ReplyTo, posts[4].ID, posts[3].ID)
	}
	m := readManifest(t, summary.Str("manifest"))
	if len(m.Files) != 8 {
		t.Errorf("manifest lists %d files, want 8: %v", len(m.Files), m.Files)
	}
}

type manifest struct {
	Question string         `json:"question"`
	Members  []string       `json:"members"`
	Files    []string       `json:"files"`
	Items    []*engine.Item `json:"items"`
}

func readManifest(t *testing.T, path string) manifest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
