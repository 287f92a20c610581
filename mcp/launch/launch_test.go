package launch

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// helperEnv makes this test binary act as the launcher: it execs env(1)
// keeping KEEP_ME, as `brainbot mcp exec -keep KEEP_ME -- env` would.
const helperEnv = "LAUNCH_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		err := Exec(os.Environ(), "env", nil, []string{"KEEP_ME"})
		os.Stderr.WriteString(err.Error())
		os.Exit(127)
	}
	runLifeHelperIfRequested()
	os.Exit(m.Run())
}

// The server runs in the launcher's place with its own variables and the
// base: not the model's key, a bot's token, or the launcher's own marker.
func TestExecKeepsOnlyTheBaseAndTheServersOwn(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{helperEnv + "=1", "PATH=/usr/bin:/bin", "HOME=/var/lib/brainbot/claude/home/bot-x", "LANG=C.UTF-8", "LC_TIME=de_DE.UTF-8",
		"TMPDIR=/tmp/cli-1", "https_proxy=http://proxy:3128", "KEEP_ME=brain-secret",
		"ANTHROPIC_API_KEY=sk-ant-secret", "ANTHROPIC_BASE_URL=http://127.0.0.1:9", "NARRATOR_TOKEN=123:secret",
		"CLAUDE_CONFIG_DIR=/var/lib/brainbot/claude/home/bot-x/.claude", "AWS_SECRET_ACCESS_KEY=secret"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	slices.Sort(got)
	want := []string{"HOME=/var/lib/brainbot/claude/home/bot-x", "KEEP_ME=brain-secret", "LANG=C.UTF-8", "LC_TIME=de_DE.UTF-8",
		"PATH=/usr/bin:/bin", "TMPDIR=/tmp/cli-1", "https_proxy=http://proxy:3128"}
	if !slices.Equal(got, want) {
		t.Errorf("the server's environment\n got %q\nwant %q", got, want)
	}
}

// A command that is not there is an error naming it, before anything runs.
func TestExecMissingCommand(t *testing.T) {
	err := Exec([]string{"PATH=/nonexistent"}, "no-such-server", nil, nil)
	if err == nil || !strings.Contains(err.Error(), `"no-such-server" is not in PATH (/nonexistent)`) {
		t.Errorf("err = %v", err)
	}
}

// The arguments name the server's variables, sorted, and keep the
// server's own arguments apart, even one that looks like a flag.
func TestArgs(t *testing.T) {
	got := Args("npx", []string{"-y", "@acme/server"}, map[string]string{"ZONE": "UTC", "API_KEY": "k"})
	want := []string{"mcp", "exec", "-keep", "API_KEY", "-keep", "ZONE", "--", "npx", "-y", "@acme/server"}
	if !slices.Equal(got, want) {
		t.Errorf("Args\n got %q\nwant %q", got, want)
	}
}
