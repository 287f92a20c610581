package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A binary built as make build and make dist build it says its version,
// its revision and the Claude CLI it finds, for `version` and --version.
func TestVersionStamped(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "brainbot")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7 -X main.revision=0123456789abcdef", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cli := fakeClaude(t, "2.1.328 (Claude Code)", authAPIKey)
	for _, arg := range []string{"version", "--version"} {
		cmd := exec.Command(bin, arg)
		cmd.Env = []string{"CLAUDE_CMD=" + cli}
		out, err := cmd.Output()
		want := "brainbot v9.8.7 (revision 0123456789abcdef)\nClaude Code 2.1.328 (" + cli + ")\n"
		if err != nil || string(out) != want {
			t.Errorf("brainbot %s = %q, %v; want %q", arg, out, err, want)
		}
	}
}

// Without a CLI, version still says brainbot's and why the CLI's is missing.
func TestVersionWithoutCLI(t *testing.T) {
	code, stdout, _ := runMain(t, []string{"CLAUDE_CMD=/nonexistent/claude"}, "--version")
	if code != exitOK || !strings.HasPrefix(stdout, "brainbot ") ||
		!strings.Contains(stdout, `Claude Code: CLAUDE_CMD (-claude-cmd) "/nonexistent/claude": not found`) {
		t.Errorf("exit %d, output:\n%s", code, stdout)
	}
}
