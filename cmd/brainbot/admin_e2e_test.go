package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode"

	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
)

// The admin's door, set up as the package sets it up (the admin address
// on loopback, no admin token): a user's transcript, and forgetting the
// user, are the admin's alone. Another local account reaches the address
// and gets no transcript and forgets nobody; it cannot open the admin
// socket, though its folder is open to all here; a page in the admin's
// browser, through the tunnel an admin opens to the socket, neither reads
// it under a rebound name nor forgets with a form. The admin's own
// commands, with the service's environment file, do both, and show what
// the user wrote as text, never as what a terminal acts on.
func TestEndToEndOnlyTheAdminGetsIn(t *testing.T) {
	open := worldReadableDir(t)
	socket := filepath.Join(open, "admin.sock")
	s := startStack(t, stack.Config{
		Brainbot: brainbotBinary(t), ClaudeCmd: claudetest.RequireCLI(t), Dir: t.TempDir(), Logs: testLogs(t), EnvFile: true,
		Brains: map[string]string{"narrator.yaml": narratorBrain},
		Env:    []string{"BRAINBOT_HTTP_ADDR=127.0.0.1:0", "BRAINBOT_ADMIN_SOCKET=" + socket},
	}, nil)
	const user = 703
	const secret = "zebra-42"
	wantText(t, ask(t, s, "narrator", user, "my secret is "+secret+" \x1b]0;owned\x07\x1b[2J\u202eevil"))
	addr := "http://" + adminAddr(t, s)
	show := "/conversations/show?bot=narrator&chat=703"

	// Any local account, at the address: monitors' calls only.
	for _, c := range []struct{ method, path string }{{"GET", show}, {"GET", "/conversations"}, {"GET", "/status"}, {"POST", "/forget?user=703"}} {
		req, _ := http.NewRequest(c.method, addr+c.path, nil)
		resp, body := roundTrip(t, req)
		if resp.StatusCode != http.StatusForbidden || strings.Contains(body, secret) || strings.Contains(body, "narrator") {
			t.Errorf("%s %s at the address = %d %q, want 403 and nothing of it", c.method, c.path, resp.StatusCode, body)
		}
	}
	if code, body := get(t, addr+"/metrics"); code != http.StatusOK || !strings.Contains(body, "brainbot_") {
		t.Errorf("/metrics = %d, want it open to a local Prometheus", code)
	}

	// Another account, at the socket: the kernel refuses it, and so do
	// the commands it runs.
	if os.Getuid() == 0 {
		if err := dialAsNobody(t, socket); !errors.Is(err, syscall.EACCES) {
			t.Errorf("nobody connecting to the admin socket: %v, want permission denied", err)
		}
		out, err := runAsNobody(t, socketEnv(socket), "conversations", "show", "-bot", "narrator", "-chat", "703")
		if err == nil || strings.Contains(out, secret) || !strings.Contains(out, "is the service's user's") {
			t.Errorf("brainbot conversations show as nobody: %v\n%s", err, out)
		}
		if out, err := runAsNobody(t, socketEnv(socket), "forget", "-user", "703"); err == nil {
			t.Errorf("brainbot forget as nobody: %s", out)
		}
	} else {
		t.Log("not root: the refusal of another account is not tried")
	}

	// A page in the admin's browser, through a tunnel to the socket.
	if code, body := socketCall(t, socket, "GET", show, "evil.example:9464", nil); code != http.StatusForbidden || strings.Contains(body, secret) {
		t.Errorf("under a rebound name: %d %q", code, body)
	}
	crossSite := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-www-form-urlencoded"}
	if code, body := socketCall(t, socket, "POST", "/forget?user=703", "localhost:9464", crossSite); code != http.StatusForbidden {
		t.Errorf("a cross-site form's forget: %d %q", code, body)
	}

	// The admin: root, with the service's environment file.
	admin := []string{"-env-file", s.EnvFilePath()}
	if list := listConversations(t, nil, admin...); len(list) != 1 || list[0].User != user {
		t.Fatalf("after every refusal the admin lists %+v, want the user's conversation", list)
	}
	code, shown, stderr := runMain(t, nil, append([]string{"conversations", "show", "-bot", "narrator", "-chat", "703"}, admin...)...)
	if code != exitOK || !strings.Contains(shown, secret+` \x1b]0;owned\x07\x1b[2J\u202eevil`) || !printableText(shown) {
		t.Errorf("conversations show = %d: %q %s", code, shown, stderr)
	}
	if _, body := socketCall(t, socket, "GET", show, "", nil); !strings.Contains(body, secret) || !printableText(body) {
		t.Errorf("the text form: %q", body)
	}
	if code, out, stderr := runMain(t, nil, append([]string{"forget", "-user", "703"}, admin...)...); code != exitOK {
		t.Errorf("forget = %d: %s%s", code, out, stderr)
	}
	if list := listConversations(t, nil, admin...); len(list) != 0 {
		t.Errorf("after the admin's forget: %+v", list)
	}
}

// printableText: s holds nothing a terminal acts on but new lines.
func printableText(s string) bool {
	for _, r := range s {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
			return false
		}
	}
	return true
}

// worldReadableDir is a folder every account may enter, as a careless
// admin might put the socket in: the socket's own mode must refuse.
func worldReadableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bb-open-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// nobody is the account of another local user.
var nobody = &syscall.Credential{Uid: 65534, Gid: 65534}

// runAsNobody runs brainbot with args as nobody: its output, and its error
// for an exit but 0.
func runAsNobody(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(worldReadableDir(t), "brainbot")
	copyFile(t, brainbotBinary(t), bin, 0o755)
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// dialAsNobodyEnv makes the test binary, run as nobody, dial the Unix
// socket it names and say how that went.
const dialAsNobodyEnv = "BRAINBOT_TEST_DIAL_UNIX"

// dialAsNobody dials the Unix socket at path from a process of nobody's.
func dialAsNobody(t *testing.T, path string) error {
	t.Helper()
	bin := filepath.Join(worldReadableDir(t), "dialer.test")
	copyFile(t, os.Args[0], bin, 0o755)
	cmd := exec.CommandContext(context.Background(), bin, "-test.run=^$")
	cmd.Env = []string{dialAsNobodyEnv + "=" + path}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the dialer failed: %v\n%s", err, out)
	}
	switch msg := strings.TrimSpace(string(out)); {
	case msg == "connected":
		return nil
	case strings.HasSuffix(msg, syscall.EACCES.Error()):
		return syscall.EACCES
	default:
		return errors.New(msg)
	}
}

// runDialerIfRequested is the dialer of dialAsNobody, in TestMain.
func runDialerIfRequested() {
	path := os.Getenv(dialAsNobodyEnv)
	if path == "" {
		return
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		os.Stdout.WriteString(err.Error() + "\n")
		os.Exit(0)
	}
	conn.Close()
	os.Stdout.WriteString("connected\n")
	os.Exit(0)
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// conversations show, of a voice answer: the voice note where it is, under
// its bot and user, and brainbot's request for it as brainbot's, not as
// the user's words.
func TestEndToEndConversationShowsFilesWhereTheyAre(t *testing.T) {
	s := newStack(t, nil)
	const user = 704
	if got := ask(t, s, "speaker", user, "tell me a story").Methods(); len(got) != 1 || got[0] != "sendVoice" {
		t.Fatalf("the speaker answered %v, want one voice note", got)
	}
	notes := organised(t, filepath.Join(s.DataDir, "audio-output", "bot-speaker", "user-704"))
	if len(notes) != 1 {
		t.Fatalf("voice notes %v", notes)
	}
	code, shown, stderr := runMain(t, socketEnv(adminSocket(t, s)), "conversations", "show", "-bot", "speaker", "-chat", "704")
	if code != exitOK || !strings.Contains(shown, "user:\n  tell me a story\n") || !strings.Contains(shown, "file: "+notes[0]+"\n") ||
		!strings.Contains(shown, "brainbot:\n  (asked the model to call mcp__tts__text_to_speech for the answer's file)") || strings.Contains(shown, "Please call") {
		t.Errorf("conversations show = %d:\n%s%s\nwant the note at %s and brainbot's request as its own", code, shown, stderr, notes[0])
	}
}
