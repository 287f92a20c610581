package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"brainbot/bot/panel/engine"
)

// A panel rehearsed in `brainbot chat`: the members are the brains beside
// the brain file, the panel file is in -panels, and /panel typed in a
// group chat runs the three turns on the screen.

// chatPanelFolders writes brains (by file name) into a brains folder and
// panels into a panels folder, and returns both.
func chatPanelFolders(t *testing.T, brains, panels map[string]string) (brainsDir, panelsDir string) {
	t.Helper()
	brainsDir, panelsDir = t.TempDir(), t.TempDir()
	for name, yaml := range brains {
		writeFile(t, filepath.Join(brainsDir, name), yaml)
	}
	for name, yaml := range panels {
		writeFile(t, filepath.Join(panelsDir, name), yaml)
	}
	return brainsDir, panelsDir
}

// panelSpeakers are the names that start the members' lines, in order,
// with the member each replies to, if any.
var panelSpeakers = regexp.MustCompile(`(?m)^((?:Chat|Voice|Painter)(?: \(to (?:Chat|Voice|Painter)\))?): `)

func TestEndToEndChatRehearsesAPanel(t *testing.T) {
	brains, panels := chatPanelFolders(t,
		map[string]string{"chat.yaml": panelChatBrain, "voice.yaml": panelVoiceBrain, "painter.yaml": panelPainterBrain},
		map[string]string{"talk.yaml": "members: [chat, voice, painter]\n"})
	p := startChatFile(t, nil, filepath.Join(brains, "chat.yaml"), "-chat", "group", "-panels", panels)
	// The next line is served once the panel has ended: its answer comes
	// after the panel's last turn.
	if _, err := io.WriteString(p.stdin, "/panel should cities ban cars?\n@chat and now?\n"); err != nil {
		t.Fatal(err)
	}
	run := p.end()
	if run.code != 0 {
		t.Errorf("exit code %d, want 0: the panel and the message were answered", run.code)
	}
	panelOut, after, ok := strings.Cut(run.stdout, "you: @chat and now?\n")
	if !ok {
		t.Fatalf("the chat did not go on after the panel:\n%s", run.stdout)
	}
	var order []string
	for _, m := range panelSpeakers.FindAllStringSubmatch(panelOut, -1) {
		order = append(order, m[1])
	}
	// Scripted model: each member comments on the first other member's
	// answer, so Painter's got no comment and Painter does not reply; a
	// member replies to the first comment on its answer.
	if want := []string{"Chat", "Voice", "Painter", "Chat (to Voice)", "Voice (to Chat)", "Painter (to Chat)", "Chat (to Voice)",
		"Voice (to Chat)"}; !slices.Equal(order, want) {
		t.Errorf("the members spoke in the order %v, want %v", order, want)
	}
	if !strings.HasPrefix(panelOut, "you: /panel should cities ban cars?\nChat: ") {
		t.Errorf("the panel's first answer does not follow the question")
	}
	if !strings.HasPrefix(after, "Chat: You said: ") {
		t.Errorf("the message after the panel got %q", after)
	}
	if strings.Contains(run.stdout, "(no answer") {
		t.Error("the panel is reported as a message without an answer")
	}
}

// What keeps a chat from a panel gets a line of its own, and the chat
// goes on.
func TestEndToEndChatSaysWhyNoPanelRuns(t *testing.T) {
	brains, panels := chatPanelFolders(t,
		map[string]string{"chat.yaml": panelChatBrain, "voice.yaml": panelVoiceBrain, "narrator.yaml": narratorBrain},
		map[string]string{"talk.yaml": "members: [chat, voice, painter]\n", "broken.yaml": "members: [narrator]\n"})
	for _, c := range []struct {
		name, brain, chat, want string
	}{
		{"a member is no brain beside it", "chat.yaml", "group",
			"Chat: Panel talk needs the brains chat, voice, painter beside " + filepath.Join(brains, "chat.yaml") + "; not there (or not valid): painter.\n"},
		{"a brain on no panel, a panel file broken", "narrator.yaml", "group",
			"Narrator: Narrator is on no panel of " + panels + ": a panel's file there lists it among its members.\nThe panel files have problems:\n" + filepath.Join(panels, "broken.yaml") + ":1"},
		{"a private chat", "chat.yaml", "private",
			"Chat: Panels run in groups: start the chat with -chat group and send /panel <question>.\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startChatFile(t, nil, filepath.Join(brains, c.brain), "-chat", c.chat, "-panels", panels)
			if _, err := io.WriteString(p.stdin, "/panel is jazz music?\n"); err != nil {
				t.Fatal(err)
			}
			run := p.end()
			if !strings.Contains(run.stdout, "you: /panel is jazz music?\n"+c.want) {
				t.Errorf("the chat's output lacks %q", c.want)
			}
		})
	}
}

// A panel that speaks shows each member's voice note as a path, and a
// chat in a temporary folder keeps the notes when it ends.
func TestEndToEndChatKeepsAPanelsVoiceNotes(t *testing.T) {
	brains, panels := chatPanelFolders(t,
		map[string]string{"chat.yaml": panelChatBrain, "voice.yaml": panelVoiceBrain},
		map[string]string{"duo.yaml": "members: [chat, voice]\nspeak: true\n"})
	p := startChatFile(t, nil, filepath.Join(brains, "chat.yaml"), "-chat", "group", "-panels", panels, "-state", "")
	if _, err := io.WriteString(p.stdin, "/panel is jazz music?\n"); err != nil {
		t.Fatal(err)
	}
	run := p.end()
	notes := regexp.MustCompile(`(?m)^(Chat|Voice)(?: \(to \w+\))?: \[voice message\] (\S+) \(\d+ bytes`).FindAllStringSubmatch(run.stdout, -1)
	if len(notes) != 6 { // two answers, two comments, two replies
		t.Fatalf("%d voice notes printed, want 6", len(notes))
	}
	for _, n := range notes {
		if _, err := os.Stat(n[2]); err != nil {
			t.Errorf("%s's voice note is gone once the chat ended: %v", n[1], err)
		}
	}
}

// Ctrl-C while a panel runs stops it, as it stops an answer: the chat goes
// on, the next /panel runs (the stopped one is over, not left running in
// the group), and the exit code says the first did not end whole.
func TestEndToEndChatCtrlCStopsAPanel(t *testing.T) {
	brains, panels := chatPanelFolders(t,
		map[string]string{"chat.yaml": panelChatBrain, "voice.yaml": panelVoiceBrain},
		map[string]string{"duo.yaml": "members: [chat, voice]\n"})
	p := startChatFile(t, nil, filepath.Join(brains, "chat.yaml"), "-chat", "group", "-panels", panels)
	p.s.Model.Hold(engine.HoldMarker) // turn 3 waits: the panel is stopped in it
	if _, err := io.WriteString(p.stdin, "/panel is jazz music?\n"); err != nil {
		t.Fatal(err)
	}
	p.waitOutput("Voice (to Chat): comment of chat\n")
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	p.waitOutput("(the panel stops)\n")
	p.s.Model.Hold("")
	if _, err := io.WriteString(p.stdin, "/panel is rock music?\n"); err != nil {
		t.Fatal(err)
	}
	p.waitOutput("you: /panel is rock music?\nChat: You said: ")
	run := p.end()
	_, second, _ := strings.Cut(run.stdout, "you: /panel is rock music?\n")
	if n := len(panelSpeakers.FindAllString(second, -1)); n != 6 {
		t.Errorf("the second panel wrote %d messages, want 6: two answers, two comments, two replies", n)
	}
	if run.code != 1 {
		t.Errorf("exit code %d, want 1: the stopped panel did not end whole", run.code)
	}
}

// A chat killed during a panel leaves it unfinished in its state folder;
// a chat started on that folder resumes none, and runs the next /panel.
func TestEndToEndChatEndsThePanelAKilledChatLeft(t *testing.T) {
	brains, panels := chatPanelFolders(t,
		map[string]string{"chat.yaml": panelChatBrain, "voice.yaml": panelVoiceBrain},
		map[string]string{"duo.yaml": "members: [chat, voice]\n"})
	state := filepath.Join(t.TempDir(), "state")
	args := []string{"-chat", "group", "-panels", panels, "-state", state}
	killed := startChatFile(t, nil, filepath.Join(brains, "chat.yaml"), args...)
	killed.s.Model.Hold(engine.HoldMarker)
	if _, err := io.WriteString(killed.stdin, "/panel is jazz music?\n"); err != nil {
		t.Fatal(err)
	}
	killed.waitOutput("Voice (to Chat): comment of chat\n")
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed.end()

	p := startChatFile(t, nil, filepath.Join(brains, "chat.yaml"), args...)
	if _, err := io.WriteString(p.stdin, "/panel is rock music?\n"); err != nil {
		t.Fatal(err)
	}
	run := p.end()
	if n := len(panelSpeakers.FindAllString(run.stdout, -1)); n != 6 || run.code != 0 {
		t.Errorf("the next chat wrote %d messages of the panel (exit code %d), want 6 (0)", n, run.code)
	}
}
