package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"brainbot/claude"
)

// The Claude Code CLI releases brainbot supports. The driver relies on
// flags and on stream-json behaviour (docs/claude-cli notes) that were
// checked on testedClaudeVersion; an older release may lack one (--bare
// came in 2.1.81) and fail every request, which is what this check is
// for. Raise testedClaudeVersion with the Makefile's CLAUDE_VERSION once
// `make test` passes on the new release.
const (
	minClaudeVersion    = "2.1.328"
	testedClaudeVersion = "2.1.328"
)

// installClaude says how to install the tested CLI, as docs/install.md
// does (a release has no Makefile; in a checkout, make run and make doctor
// install it themselves).
const installClaude = "sudo npm install --prefix /opt/claude-code @anthropic-ai/claude-code@" + testedClaudeVersion +
	" (docs/install.md)"

// checkClaude runs the CLI to learn its version, then asks it whether it
// has credentials for the model.
func (m *Main) checkClaude(ctx context.Context, cfg Config, r *report) {
	version, err := m.claudeVersion(ctx, cfg.ClaudeCmd)
	if err != nil {
		r.fatal(checkClaude, fmt.Sprintf("%s %q: %v", lookupSetting("CLAUDE_CMD").name(), cfg.ClaudeCmd, err))
		return
	}
	r.claudeVersion = version
	switch {
	case compareVersions(version, minClaudeVersion) < 0:
		r.fatal(checkClaude, fmt.Sprintf("Claude Code %s at %s is older than %s, the oldest brainbot supports: install %s: %s",
			version, cfg.ClaudeCmd, minClaudeVersion, testedClaudeVersion, installClaude))
		return
	case compareVersions(version, testedClaudeVersion) > 0:
		r.warn(checkClaude, fmt.Sprintf("Claude Code %s at %s is newer than %s, the newest brainbot was tested with: it should work; if replies fail, install %s",
			version, cfg.ClaudeCmd, testedClaudeVersion, testedClaudeVersion))
	default:
		r.ok(checkClaude, fmt.Sprintf("Claude Code %s at %s", version, cfg.ClaudeCmd))
	}
	m.checkCredentials(ctx, cfg, r)
}

// claudeVersionRE finds the version in `claude --version`: "2.1.328 (Claude Code)".
var claudeVersionRE = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)\b`)

// claudeVersion runs `CLI --version` and returns the version it prints.
func (m *Main) claudeVersion(ctx context.Context, cli string) (string, error) {
	out, err := m.runClaude(ctx, cli, "--version")
	if err != nil {
		return "", err
	}
	v := claudeVersionRE.FindString(strings.TrimSpace(string(out)))
	if v == "" {
		return "", fmt.Errorf("not the Claude Code CLI: --version printed %q", firstLine(out))
	}
	return v, nil
}

// compareVersions compares two x.y.z versions numerically.
func compareVersions(a, b string) int {
	return slices.Compare(versionParts(a), versionParts(b))
}

func versionParts(v string) []int {
	m := claudeVersionRE.FindStringSubmatch(v)
	if m == nil {
		return nil
	}
	parts := make([]int, 3)
	for i := range parts {
		parts[i], _ = strconv.Atoi(m[i+1]) // digits only: cannot fail below 2^63
	}
	return parts
}

// authStatus is what `claude auth status --json` says (2.1.328).
type authStatus struct {
	LoggedIn         bool   `json:"loggedIn"`
	AuthMethod       string `json:"authMethod"` // api_key, claude.ai, oauth_token, third_party, none
	APIProvider      string `json:"apiProvider"`
	APIKeySource     string `json:"apiKeySource"`
	SubscriptionType string `json:"subscriptionType"`
}

// checkCredentials asks the CLI itself, which knows every way it can
// authenticate (API key, a provider, a `claude` login, an OAuth token, an
// apiKeyHelper); it answers offline.
func (m *Main) checkCredentials(ctx context.Context, cfg Config, r *report) {
	const check = "model credentials"
	// It exits 1 when there are none, after printing the same JSON.
	out, runErr := m.runClaude(ctx, cfg.ClaudeCmd, "auth", "status", "--json")
	var st authStatus
	if err := json.Unmarshal(out, &st); err != nil {
		if runErr != nil {
			err = runErr
		}
		r.warn(check, fmt.Sprintf("could not read `claude auth status --json` (%v): the first request will tell", err))
		return
	}
	bare := claudeBare(cfg.ClaudeBare, m.getenv)
	switch {
	case !st.LoggedIn && m.operatorLogin() != "":
		r.fatal(check, fmt.Sprintf("the `claude` login in %s does not reach the bots (each bot's Claude CLI has a config folder of its own): "+
			"run `claude setup-token` as this user and set CLAUDE_CODE_OAUTH_TOKEN to the token it prints, or set ANTHROPIC_API_KEY", m.operatorLogin()))
	case !st.LoggedIn:
		r.fatal(check, "none: set ANTHROPIC_API_KEY, or CLAUDE_CODE_OAUTH_TOKEN to the token `claude setup-token` prints (a Claude subscription), "+
			"or a provider (CLAUDE_CODE_USE_BEDROCK, CLAUDE_CODE_USE_VERTEX, CLAUDE_CODE_USE_FOUNDRY) with its credentials")
	case bare && (st.AuthMethod == "oauth_token" || st.AuthMethod == "claude.ai"):
		r.fatal(check, fmt.Sprintf(`%s %q runs the CLI with --bare, which cannot use an OAuth token: set ANTHROPIC_API_KEY, or use "auto"`,
			lookupSetting("BRAINBOT_CLAUDE_BARE").name(), cfg.ClaudeBare))
	default:
		r.ok(check, st.describe())
	}
}

// operatorLogin is the file of the `claude` login of brainbot's user, ""
// if there is none. The bots do not use it: copies of a login break one
// another, the CLI rotating its refresh token (checked on 2.1.328), so a
// subscription reaches them as CLAUDE_CODE_OAUTH_TOKEN.
func (m *Main) operatorLogin() string {
	dir := m.getenv("CLAUDE_CONFIG_DIR")
	if dir == "" {
		dir = filepath.Join(m.getenv("HOME"), ".claude")
	}
	path := filepath.Join(dir, ".credentials.json")
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

func (st authStatus) describe() string {
	switch st.AuthMethod {
	case "api_key":
		return "API key from " + st.APIKeySource
	case "claude.ai":
		return "claude login"
	case "oauth_token":
		return "OAuth token (CLAUDE_CODE_OAUTH_TOKEN)"
	case "third_party":
		return "cloud provider " + st.APIProvider
	}
	return st.AuthMethod
}

// runClaude runs the CLI with args as a bot's CLI runs (claude.ProbeEnv:
// the allow-list of brainbot's environment, a config folder of its own,
// removed afterwards), and returns its standard output; an error carries
// the start of its stderr.
func (m *Main) runClaude(ctx context.Context, cli string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	cmd, cleanup, err := m.probeCommand(ctx, cli, args...)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		err = errors.New("not found: install the CLI, " + installClaude + ", and set CLAUDE_CMD to its path")
	case ctx.Err() != nil:
		err = fmt.Errorf("no answer within %v", preflightTimeout)
	case errors.As(err, &exitErr) && stderr.Len() > 0:
		err = fmt.Errorf("%w: %s", err, firstLine(stderr.Bytes()))
	}
	return stdout.Bytes(), err
}

// probeCommand is the CLI with args run as a bot's CLI runs
// (claude.ProbeEnv): in a folder of its own, its home, config folder and
// working directory, that cleanup removes. A CLI started in a git
// checkout reads it (about 10 MB more at its start).
func (m *Main) probeCommand(ctx context.Context, cli string, args ...string) (cmd *exec.Cmd, cleanup func(), err error) {
	home, err := os.MkdirTemp("", "brainbot-claude-probe-")
	if err != nil {
		return nil, nil, err
	}
	cmd = exec.CommandContext(ctx, cli, args...)
	cmd.Env = claude.ProbeEnv(m.Environ, home)
	cmd.Dir = home
	cmd.WaitDelay = time.Second // a child holding the pipes open must not hold us
	return cmd, func() { os.RemoveAll(home) }, nil
}

// firstLine is the first line of out, cut short, for an error message.
func firstLine(out []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if len(line) > 200 {
		line = line[:200] + "..."
	}
	return line
}
