package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"brainbot/cmd/internal/stack"
	"brainbot/output"
)

// `brainbot chat` end to end: the built binary with a script piped in,
// the real Claude Code CLI, our MCP tools, and the stand-ins for the model
// and OpenAI (no Telegram: the chat needs no token). What the author reads
// is its standard output and exit code.

// chatRun is one `brainbot chat` that ran to its end.
type chatRun struct {
	code           int
	stdout, stderr string
	state          string // its -state folder
	// data is BRAINBOT_DATA, the service's state: the chat must leave it
	// alone.
	data string
}

// chatProcess is a `brainbot chat` running against the stand-ins.
type chatProcess struct {
	t     *testing.T
	s     *stack.Stack
	cmd   *exec.Cmd
	stdin io.WriteCloser
	run   chatRun
	// out is its standard output so far; grew is signalled when it grows.
	mu     sync.Mutex
	out    bytes.Buffer
	grew   chan struct{}
	stderr bytes.Buffer
	done   chan struct{}
}

// startChat starts `brainbot chat args... brainFile` (brainFile written
// from brainYAML) against the stand-ins, its standard input a pipe.
func startChat(t *testing.T, brainYAML string, args ...string) *chatProcess {
	t.Helper()
	return startChatEnv(t, nil, brainYAML, args...)
}

// startChatEnv is startChat with env added to the stand-ins' environment
// (the last assignment of a variable wins).
func startChatEnv(t *testing.T, env []string, brainYAML string, args ...string) *chatProcess {
	t.Helper()
	brainFile := filepath.Join(t.TempDir(), "persona.yaml")
	writeFile(t, brainFile, brainYAML)
	return startChatFile(t, env, brainFile, args...)
}

// startChatFile is startChatEnv with the brain file given: the brains
// beside it are a panel's members.
func startChatFile(t *testing.T, env []string, brainFile string, args ...string) *chatProcess {
	t.Helper()
	s, _ := standIns(t)
	p := &chatProcess{t: t, s: s, run: chatRun{state: filepath.Join(t.TempDir(), "chat-state"), data: s.DataDir},
		grew: make(chan struct{}, 1), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	p.cmd = exec.CommandContext(ctx, brainbotBinary(t), append(append([]string{"chat", "-state", p.run.state}, args...), brainFile)...)
	p.cmd.Env = append(s.Env(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p, &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		err := p.cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			p.run.code = exit.ExitCode()
		} else if err != nil {
			p.run.code = -1
		}
	}()
	return p
}

// Write takes the chat's standard output.
func (p *chatProcess) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out.Write(b)
	select {
	case p.grew <- struct{}{}:
	default:
	}
	return len(b), nil
}

func (p *chatProcess) stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitOutput waits until the chat has written text.
func (p *chatProcess) waitOutput(text string) {
	p.t.Helper()
	for !strings.Contains(p.stdout(), text) {
		select {
		case <-p.grew:
		case <-p.done:
			if !strings.Contains(p.stdout(), text) {
				p.t.Fatalf("the chat ended without writing %q:\n%s\n%s", text, p.stdout(), p.stderr.String())
			}
		}
	}
}

// end closes the chat's input (Ctrl-D) and waits for it to exit.
func (p *chatProcess) end() chatRun {
	p.t.Helper()
	p.stdin.Close()
	<-p.done
	p.run.stdout, p.run.stderr = p.stdout(), p.stderr.String()
	p.t.Logf("brainbot chat exited %d\nstdout:\n%s\nstderr:\n%s", p.run.code, p.run.stdout, p.run.stderr)
	return p.run
}

// runChat pipes script into `brainbot chat args... brainFile` (brainFile
// written from brainYAML) against the stand-ins.
func runChat(t *testing.T, brainYAML, script string, args ...string) chatRun {
	t.Helper()
	p := startChat(t, brainYAML, args...)
	if _, err := io.WriteString(p.stdin, script); err != nil {
		t.Fatal(err)
	}
	return p.end()
}

// chatVoiceNote finds the path of the voice note the chat printed.
var chatVoiceNote = regexp.MustCompile(`(?m)^Speaker: \[voice message\] (\S+) \((\d+) bytes, ([0-9.]+) s\)$`)

func TestEndToEndChat(t *testing.T) {
	script := strings.Join([]string{
		"Good morning!", // a voice answer: the brain speaks
		"/voice",        // the user switches to text
		"How are you?",  // a text answer
		"#ask",          // a question with options...
		"2",             // ...answered by its number
		"/reset",
		"Are you there?", // a new session: message 1 again
	}, "\n") + "\n"
	run := runChat(t, speakerBrain, script, "-user", "42", "-first-name", "Grace")
	if run.code != 0 {
		t.Fatalf("exit code %d, want 0: every message was answered", run.code)
	}

	voice := chatVoiceNote.FindStringSubmatch(run.stdout)
	if voice == nil {
		t.Fatalf("no voice note printed with its path, size and duration:\n%s", run.stdout)
	}
	if dir := filepath.Join(run.state, "audio-output", "bot-persona", "user-42"); filepath.Dir(voice[1]) != dir {
		t.Errorf("voice note at %s, want it organised in %s", voice[1], dir)
	}
	if info, err := os.Stat(voice[1]); err != nil || info.Size() == 0 {
		t.Errorf("the voice note printed is not there: %v", err)
	}
	if _, err := os.Stat(output.SidecarPath(voice[1])); err != nil {
		t.Errorf("the voice note has no sidecar: %v", err)
	}

	for _, want := range []string{
		"you: /voice\nSpeaker: Voice replies are off: I will answer in text.\n",
		"you: How are you?\nSpeaker: You said: How are you? (message 2)\n",
		// The question, its options numbered, the choice, and the model's
		// answer to it.
		"Which city?\n  1. Paris\n  2. Rome\n  3. Lisbon\nyou: 2\n  → Rome\nSpeaker: You said: Rome (message 4)\n",
		"you: /reset\nSpeaker: Done: we start a new conversation. What shall we talk about?\n",
		"you: Are you there?\nSpeaker: You said: Are you there? (message 1)\n",
	} {
		if !strings.Contains(run.stdout, want) {
			t.Errorf("the chat's output lacks %q", want)
		}
	}
	// The chat keeps its state in its own folder, never the service's.
	if entries, err := os.ReadDir(run.data); err != nil || len(entries) > 0 {
		t.Errorf("BRAINBOT_DATA %s was written to (%d entries, %v)", run.data, len(entries), err)
	}
	if _, err := os.Stat(filepath.Join(run.state, "brainbot.log")); err != nil {
		t.Errorf("no brainbot.log in the chat's state folder: %v", err)
	}
}

// A message that gets no answer (the model fails) makes the exit code say
// so, for the author who scripts a conversation; the user sees the brain's
// error message, as in Telegram.
func TestEndToEndChatExitCodeSaysAnAnswerFailed(t *testing.T) {
	run := runChat(t, narratorBrain, "Hello\n#fail\n")
	if run.code != 1 {
		t.Errorf("exit code %d, want 1: one message got no answer", run.code)
	}
	for _, want := range []string{
		"Narrator: You said: Hello (message 1)\n",
		"you: #fail\nNarrator: Sorry, something went wrong",
		"(no answer: see brainbot.log",
	} {
		if !strings.Contains(run.stdout, want) {
			t.Errorf("the chat's output lacks %q", want)
		}
	}
}

// Ctrl-C while an answer is written stops it, as /stop does in Telegram:
// what was written stays on the screen, the chat goes on, and the exit
// code says that answer did not come whole.
func TestEndToEndChatCtrlCStopsTheAnswer(t *testing.T) {
	p := startChat(t, narratorBrain)
	p.s.Model.SetPace(100 * time.Millisecond) // about ten seconds for the whole answer
	if _, err := io.WriteString(p.stdin, "tell me a story #long\n"); err != nil {
		t.Fatal(err)
	}
	p.waitOutput("Paragraph 2.")
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	p.waitOutput("Narrator: Stopped. What next?\n")
	p.s.Model.SetPace(0)
	if _, err := io.WriteString(p.stdin, "still there?\n"); err != nil {
		t.Fatal(err)
	}
	p.waitOutput("Narrator: You said: still there? (message 2)\n")
	run := p.end()
	if strings.Contains(run.stdout, "Paragraph 40.") {
		t.Error("the whole answer was written after Ctrl-C")
	}
	if strings.Contains(run.stdout, "(no answer") {
		t.Error("a stopped answer is reported as a failure")
	}
	if run.code != 1 {
		t.Errorf("exit code %d, want 1: the stopped answer did not come whole", run.code)
	}
}

// A voice brain without an OpenAI key answers in text: the chat says why,
// once, without -v.
func TestEndToEndChatSaysWhyAVoiceBrainWrites(t *testing.T) {
	// No key, and no OpenAI to take one: the stand-in takes any.
	p := startChatEnv(t, []string{"OPENAI_API_KEY=", "OPENAI_BASE_URL=http://127.0.0.1:9/v1"}, speakerBrain)
	if _, err := io.WriteString(p.stdin, "Good morning!\n"); err != nil {
		t.Fatal(err)
	}
	run := p.end()
	if run.code != 0 {
		t.Errorf("exit code %d, want 0: the message got its answer, in text", run.code)
	}
	if !strings.Contains(run.stdout, "Speaker: You said: Good morning! (message 1)\n") {
		t.Error("the voice brain did not answer in text")
	}
	const why = "note: OPENAI_API_KEY is not set: Speaker answers in text, not with voice notes\n"
	if strings.Count(run.stderr, why) != 1 {
		t.Errorf("the chat's stderr does not say once %q", why)
	}
}

// A voice note shows with the words it says.
func TestEndToEndChatShowsWhatAVoiceNoteSays(t *testing.T) {
	run := runChat(t, speakerBrain, "Good morning!\n")
	voice := chatVoiceNote.FindStringSubmatch(run.stdout)
	if voice == nil {
		t.Fatalf("no voice note printed with its path, size and duration:\n%s", run.stdout)
	}
	if want := voice[0] + "\n  says: You said: Good morning! (message 1)\n"; !strings.Contains(run.stdout, want) {
		t.Errorf("the chat's output lacks %q", want)
	}
}

// chatFolders are the temporary state folders chats left in the stack's
// temporary folder.
func chatFolders(t *testing.T, s *stack.Stack) []string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(s.TempDir, "brainbot-chat-*"))
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// A chat in a temporary folder (no -state) removes it when it ends,
// unless it holds what the chat showed: voice notes and pictures, or the
// log of a message that got no answer. A chat that did not start leaves
// nothing.
func TestEndToEndChatCleansItsTemporaryFolder(t *testing.T) {
	t.Run("answered", func(t *testing.T) {
		p := startChat(t, narratorBrain, "-state", "")
		if _, err := io.WriteString(p.stdin, "Hello\n"); err != nil {
			t.Fatal(err)
		}
		if run := p.end(); run.code != 0 {
			t.Fatalf("exit code %d, want 0", run.code)
		}
		if left := chatFolders(t, p.s); len(left) > 0 {
			t.Errorf("the chat left %v", left)
		}
	})
	t.Run("not started", func(t *testing.T) {
		p := startChatEnv(t, []string{"CLAUDE_CMD=/nonexistent/claude"}, narratorBrain, "-state", "")
		if run := p.end(); run.code != 1 {
			t.Fatalf("exit code %d, want 1: there is no CLI", run.code)
		}
		if left := chatFolders(t, p.s); len(left) > 0 {
			t.Errorf("the chat that did not start left %v", left)
		}
	})
	t.Run("voice note", func(t *testing.T) {
		p := startChat(t, speakerBrain, "-state", "")
		if _, err := io.WriteString(p.stdin, "Hello\n"); err != nil {
			t.Fatal(err)
		}
		run := p.end()
		voice := chatVoiceNote.FindStringSubmatch(run.stdout)
		if voice == nil {
			t.Fatalf("no voice note printed:\n%s", run.stdout)
		}
		if _, err := os.Stat(voice[1]); err != nil {
			t.Errorf("the voice note shown is gone: %v", err)
		}
		left := chatFolders(t, p.s)
		if len(left) != 1 || !strings.Contains(run.stderr, "state is kept in "+left[0]) {
			t.Errorf("the chat left %v and said:\n%s", left, run.stderr)
		}
	})
}
