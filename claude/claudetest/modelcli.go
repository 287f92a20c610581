package claudetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// cliInstallPath is where `make test` installs the real CLI from npm,
// relative to the module root.
const cliInstallPath = ".cache/claude-code-2.1.328/node_modules/@anthropic-ai/claude-code-linux-x64/claude"

// ErrNoCLI means the real Claude Code CLI is not installed.
var ErrNoCLI = errors.New("claudetest: real Claude Code CLI not found")

// CLIPath finds the real Claude Code CLI: $CLAUDE_CMD when set, else the
// copy `make test` installs under the module root.
func CLIPath() (string, error) {
	if p := os.Getenv("CLAUDE_CMD"); p != "" {
		return exec.LookPath(p)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: no module root above the working directory", ErrNoCLI)
		}
		dir = parent
	}
	p := filepath.Join(dir, cliInstallPath)
	if _, err := exec.LookPath(p); err != nil {
		return "", fmt.Errorf("%w: set CLAUDE_CMD or run `make test` to install it at %s", ErrNoCLI, p)
	}
	return p, nil
}

// TB is what RequireCLI needs of a *testing.T or *testing.B. Taking it
// rather than testing.TB keeps package testing out of the programs built
// on this package (cmd/demo), whose flags it would otherwise register.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// RequireCLI returns the real CLI's path, or skips the test when it is not
// installed — except under CI (env CI set), where the test fails.
func RequireCLI(t TB) string {
	t.Helper()
	p, err := CLIPath()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI needs the real CLI: %v", err)
		}
		t.Skipf("skipping real-CLI test: %v", err)
	}
	return p
}

// UserLine is the stream-json stdin line carrying one user message.
func UserLine(text string) []byte {
	line, _ := json.Marshal(map[string]any{ // strings only: cannot fail
		"type":               "user",
		"message":            map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": text}}},
		"parent_tool_use_id": nil,
		"session_id":         "",
	})
	return append(line, '\n')
}

// CLIRun is one run of the real CLI in stream-json mode.
type CLIRun struct {
	Path string   // the CLI executable
	Args []string // after the executable
	Dir  string   // working directory
	Env  []string // the whole environment (include HOME and Model.Env)
}

// Turns sends each text as a user message once the previous turn's result
// line arrived, closes stdin after the last, and returns the CLI's whole
// stdout once it exited. The CLI and its children (MCP servers) run in
// their own process group, killed when ctx ends.
func (r CLIRun) Turns(ctx context.Context, texts ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, r.Path, r.Args...)
	cmd.Dir, cmd.Env = r.Dir, r.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// Whatever happens below, no process of the group outlives the run.
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)

	var out bytes.Buffer
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 0, 64<<10), 16<<20)
	sent := 0
	send := func() {
		if sent < len(texts) {
			_, _ = stdin.Write(UserLine(texts[sent])) // a dead CLI shows in Wait
			sent++
		}
		if sent == len(texts) {
			stdin.Close()
		}
	}
	send()
	for lines.Scan() {
		out.Write(lines.Bytes())
		out.WriteByte('\n')
		var ev struct{ Type string }
		if json.Unmarshal(lines.Bytes(), &ev) == nil && ev.Type == "result" {
			send()
		}
	}
	if err := cmd.Wait(); err != nil {
		return out.Bytes(), fmt.Errorf("claude CLI: %w; stderr: %s", err, tail(stderr.Bytes(), 2000))
	}
	if sent < len(texts) || lines.Err() != nil {
		return out.Bytes(), fmt.Errorf("claude CLI ended after %d of %d turns (%v); stderr: %s", sent, len(texts), lines.Err(), tail(stderr.Bytes(), 2000))
	}
	return out.Bytes(), nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
