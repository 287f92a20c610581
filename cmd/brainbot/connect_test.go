package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// check -connect starts a brain's servers: the example clock brain's
// (brainbot itself, found in PATH) lists its tool; a server that does not
// start, one that does not speak MCP (with what it said on stderr), and an
// allowed tool nobody offers are problems at their lines.
func TestCheckConnect(t *testing.T) {
	bin := brainbotBinary(t)
	path := "PATH=" + filepath.Dir(bin)
	code, stdout, stderr := runMain(t, []string{path}, "check", "-connect", "../../brains/clock.yaml")
	if code != exitOK || !strings.Contains(stdout, "    mcp server clock: now\n") {
		t.Fatalf("check -connect clock.yaml = %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	brain := filepath.Join(t.TempDir(), "tools.yaml")
	writeFile(t, brain, `name: Tools
telegram:
  token_env: TOOLS_TOKEN
system_prompt: hi
mcp_servers:
  t:
    command: `+toolServerBinary(t)+`
    env: {TOOL_PASSPHRASE: "${TOOL_PASSPHRASE}"}
  gone:
    command: /nonexistent/mcp-server
  mute:
    command: /bin/true
  noisy:
    command: /bin/sh
    args: [-c, "echo config file missing >&2; exit 3"]
  picky:
    command: /bin/sh
    args: [-c, 'if [ -n "$ANTHROPIC_API_KEY$TOOLS_TOKEN" ]; then echo got a secret >&2; exit 3; fi; exec "$0"', `+toolServerBinary(t)+`]
tools:
  allow: [mcp__t__echo, mcp__t__nosuch, mcp__gone, mcp__mute, mcp__noisy, mcp__picky]
`)
	// A server is started as the CLI starts it, with its own env and a
	// minimal base: the picky one refuses to run with a secret.
	code, stdout, stderr = runMain(t, []string{path, "ANTHROPIC_API_KEY=sk-ant-secret", "TOOLS_TOKEN=" + chatToken}, "check", "-connect", brain)
	if code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
	for _, want := range []string{
		"    note: not set, so the MCP servers would get them empty: TOOL_PASSPHRASE\n",
		"    mcp server t: echo, env, fail, hidden, sleep\n",
		"    mcp server picky: echo, env, fail, hidden, sleep\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{
		brain + ":9: mcp_servers.gone: did not answer initialize: ",
		"its stderr: brainbot mcp: exec /nonexistent/mcp-server: no such file or directory\n",
		brain + ":11: mcp_servers.mute: did not answer initialize: ",
		brain + ":13: mcp_servers.noisy: did not answer initialize: ",
		"; its stderr: config file missing\n",
		brain + ":20: tools.allow[1]: server t offers no tool nosuch; it offers echo, env, fail, hidden, sleep\n",
		"4 problem(s) in " + brain,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}
