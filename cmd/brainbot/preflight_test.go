package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/mcp/openaitest"
)

// Authentication answers of `claude auth status --json`, as 2.1.328 prints
// them.
const (
	authAPIKey = `{"loggedIn": true, "authMethod": "api_key", "apiProvider": "firstParty", "apiKeySource": "ANTHROPIC_API_KEY"}`
	authToken  = `{"loggedIn": true, "authMethod": "oauth_token", "apiProvider": "firstParty"}`
	authNone   = `{"loggedIn": false, "authMethod": "none", "apiProvider": "firstParty"}`
)

// fakeClaude writes a stand-in CLI that answers --version with version
// and `auth status` with auth (exit 1 when not logged in, as the real one).
func fakeClaude(t *testing.T, version, auth string) string {
	t.Helper()
	authExit := 0
	if strings.Contains(auth, `"loggedIn": false`) {
		authExit = 1
	}
	path := filepath.Join(t.TempDir(), "claude")
	script := fmt.Sprintf("#!/bin/sh\ncase \"$1\" in\n--version) echo '%s' ;;\nauth) echo '%s'; exit %d ;;\n*) exit 64 ;;\nesac\n", version, auth, authExit)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// site is a brainbot installation for the preflight: brains, folders, a
// Telegram stand-in and a stand-in CLI, and the environment naming them.
type site struct {
	brains, data string
	telegram     *telegramtest.Server
	openAI       *openaitest.Server
	env          []string
}

func newSite(t *testing.T, brains map[string]string, env ...string) *site {
	t.Helper()
	s := &site{brains: t.TempDir(), data: filepath.Join(t.TempDir(), "data"), telegram: telegramtest.NewServer(), openAI: openaitest.NewServer()}
	t.Cleanup(s.telegram.Close)
	t.Cleanup(s.openAI.Close)
	for name, content := range brains {
		writeFile(t, filepath.Join(s.brains, name), content)
	}
	s.env = append([]string{
		"BRAINBOT_BRAINS=" + s.brains,
		"BRAINBOT_DATA=" + s.data,
		"TELEGRAM_API_URL=" + s.telegram.URL,
		"CLAUDE_CMD=" + fakeClaude(t, "2.1.328 (Claude Code)", authAPIKey),
		"ANTHROPIC_API_KEY=sk-ant-test-key-0123456789",
		"OPENAI_API_KEY=" + testOpenAIKey,
		"OPENAI_BASE_URL=" + s.openAI.URL,
	}, env...)
	return s
}

// doctor runs `brainbot doctor` on the site with extra variables (later
// ones win).
func (s *site) doctor(t *testing.T, env ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runMain(t, append(append([]string(nil), s.env...), env...), "doctor")
}

func brainWith(tokenEnv, extra string) string {
	return fmt.Sprintf("name: Bot\nsystem_prompt: hi\ntelegram:\n  token_env: %s\n%s", tokenEnv, extra)
}

const (
	// Shaped like BotFather's tokens: <bot id>:<35 characters>.
	chatToken    = "111111:AAchat-secret-token-0123456789abcdx"
	voiceToken   = "222222:AAvoice-secret-token-012345678abcxx"
	revokedToken = "333333:AArevoked-secret-token-01234567axxx"
	painterToken = "444444:AApainter-secret-token-01234567axxx"
)

func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l) {
			t.Errorf("output lacks %q:\n%s", l, out)
		}
	}
}

func TestDoctorAllGood(t *testing.T) {
	s := newSite(t, map[string]string{
		"chat.yaml":    brainWith("CHAT_TOKEN", ""),
		"voice.yaml":   brainWith("VOICE_TOKEN", "tts:\n  enabled: true\n"),
		"limited.yaml": brainWith("LIMITED_TOKEN", ""),
	}, "CHAT_TOKEN="+chatToken, "VOICE_TOKEN="+voiceToken)
	code, stdout, stderr := s.doctor(t)
	if code != exitOK {
		t.Errorf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	wantLines(t, stdout,
		"ok    claude CLI: Claude Code 2.1.328 at ",
		"ok    model credentials: API key from ANTHROPIC_API_KEY\n",
		"ok    data folder: "+s.data+" is writable\n",
		"ok    brains folder: 3 brain files in "+s.brains+"\n",
		"ok    OpenAI key: OPENAI_API_KEY accepted by "+s.openAI.URL+"\n",
		"ok    bot chat: @"+telegramtest.Username(chatToken)+" (token from $CHAT_TOKEN)\n",
		"ok    bot voice: @"+telegramtest.Username(voiceToken)+" (token from $VOICE_TOKEN)\n",
		"warn  bot limited: not started: LIMITED_TOKEN not set: set LIMITED_TOKEN in brainbot's environment and restart it, "+
			"or write the token to a file named by telegram.token_file instead: that needs no restart\n",
	)
	if want := "2 of 3 bots would run (chat, voice); skipped: limited (LIMITED_TOKEN not set)\n"; !strings.HasSuffix(stdout, want) {
		t.Errorf("last line: want %q in\n%s", want, stdout)
	}
	if _, err := os.Stat(s.data); err == nil {
		t.Errorf("doctor created the data folder %s: run it as another user and that user owns it", s.data)
	}
}

func TestDoctorClaudeCLI(t *testing.T) {
	tests := []struct {
		name, cli string // cli: a version to answer, or a path
		code      int
		want      string
	}{
		{"missing", "/nonexistent/claude", exitError,
			`fail  claude CLI: CLAUDE_CMD (-claude-cmd) "/nonexistent/claude": not found: install the CLI, sudo npm install --prefix /opt/claude-code @anthropic-ai/claude-code@2.1.328 (docs/install.md), and set CLAUDE_CMD to its path`},
		{"older", "2.0.5 (Claude Code)", exitError,
			"fail  claude CLI: Claude Code 2.0.5 at %s is older than 2.1.328, the oldest brainbot supports: install 2.1.328: sudo npm install --prefix /opt/claude-code @anthropic-ai/claude-code@2.1.328 (docs/install.md)"},
		{"newer", "2.3.0 (Claude Code)", exitOK,
			"warn  claude CLI: Claude Code 2.3.0 at %s is newer than 2.1.328, the newest brainbot was tested with"},
		{"not claude", "cat 9.1", exitError, `fail  claude CLI: CLAUDE_CMD (-claude-cmd) "%s": not the Claude Code CLI: --version printed "cat 9.1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t, nil)
			cli := tt.cli
			if !strings.HasPrefix(cli, "/") {
				cli = fakeClaude(t, tt.cli, authAPIKey)
			}
			code, stdout, _ := s.doctor(t, "CLAUDE_CMD="+cli)
			want := tt.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, cli)
			}
			if code != tt.code || !strings.Contains(stdout, want) {
				t.Errorf("exit %d (want %d), output:\n%s\nwant the line %q", code, tt.code, stdout, want)
			}
		})
	}
}

func TestDoctorCredentials(t *testing.T) {
	tests := []struct {
		name, auth string
		env        []string
		code       int
		want       string
	}{
		{"none", authNone, nil, exitError,
			"fail  model credentials: none: set ANTHROPIC_API_KEY, or CLAUDE_CODE_OAUTH_TOKEN to the token `claude setup-token` prints (a Claude subscription), or a provider (CLAUDE_CODE_USE_BEDROCK, CLAUDE_CODE_USE_VERTEX, CLAUDE_CODE_USE_FOUNDRY) with its credentials\n"},
		{"oauth token", authToken, nil, exitOK, "ok    model credentials: OAuth token (CLAUDE_CODE_OAUTH_TOKEN)\n"},
		{"oauth token with --bare", authToken, []string{"BRAINBOT_CLAUDE_BARE=on"}, exitError,
			`fail  model credentials: BRAINBOT_CLAUDE_BARE (-claude-bare) "on" runs the CLI with --bare, which cannot use an OAuth token`},
		{"unreadable answer", "Usage: claude [options]", nil, exitOK,
			"warn  model credentials: could not read `claude auth status --json`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t, nil)
			env := append([]string{"ANTHROPIC_API_KEY=", "HOME=/home/bots", "CLAUDE_CMD=" + fakeClaude(t, "2.1.328 (Claude Code)", tt.auth)}, tt.env...)
			code, stdout, _ := s.doctor(t, env...)
			if code != tt.code || !strings.Contains(stdout, tt.want) {
				t.Errorf("exit %d (want %d), output:\n%s\nwant the line %q", code, tt.code, stdout, tt.want)
			}
		})
	}
}

func TestDoctorFolders(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	writeFile(t, file, "not a folder")
	tests := []struct {
		name string
		env  string
		want string
	}{
		{"data folder in a file", "BRAINBOT_DATA=" + file + "/data",
			`fail  data folder: BRAINBOT_DATA (-data) "` + file + `/data": cannot write there: `},
		{"log file in a file", "BRAINBOT_LOG_FILE=" + file + "/brainbot.log",
			`fail  log file: BRAINBOT_LOG_FILE (-log-file) "` + file + `/brainbot.log": cannot write it: `},
		{"no brains folder", "BRAINBOT_BRAINS=/nonexistent/brains",
			`fail  brains folder: BRAINBOT_BRAINS (-brains) "/nonexistent/brains": no such folder`},
		{"brains folder is a file", "BRAINBOT_BRAINS=" + file,
			`fail  brains folder: BRAINBOT_BRAINS (-brains) "` + file + `": not a folder`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, _ := newSite(t, nil).doctor(t, tt.env)
			if code != exitError || !strings.Contains(stdout, tt.want) {
				t.Errorf("exit %d (want %d), output:\n%s\nwant the line %q", code, exitError, stdout, tt.want)
			}
		})
	}
}

func TestDoctorBots(t *testing.T) {
	s := newSite(t, map[string]string{
		"chat.yaml":    brainWith("CHAT_TOKEN", ""),
		"twin.yaml":    brainWith("TWIN_TOKEN", ""),
		"mangled.yaml": brainWith("MANGLED_TOKEN", ""),
		"revoked.yaml": brainWith("REVOKED_TOKEN", ""),
		"painter.yaml": brainWith("PAINTER_TOKEN", "image:\n  enabled: true\nstt:\n  enabled: false\n"),
		"broken.yaml":  brainWith("BROKEN_TOKEN", "tts:\n  speed: 9\n"),
	}, "CHAT_TOKEN="+chatToken, "TWIN_TOKEN="+chatToken,
		"MANGLED_TOKEN=bot"+voiceToken, "REVOKED_TOKEN="+revokedToken,
		"PAINTER_TOKEN="+painterToken, "OPENAI_API_KEY=")
	s.telegram.Unauthorize(revokedToken)
	code, stdout, _ := s.doctor(t)
	if code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
	wantLines(t, stdout,
		"ok    bot chat: @"+telegramtest.Username(chatToken),
		"fail  bot twin: "+filepath.Join(s.brains, "twin.yaml")+":4: telegram.token_env: TWIN_TOKEN holds the same token as CHAT_TOKEN of "+filepath.Join(s.brains, "chat.yaml")+"; Telegram allows one bot per token",
		"fail  bot mangled: "+filepath.Join(s.brains, "mangled.yaml")+":4: telegram.token_env: MANGLED_TOKEN does not hold a BotFather token",
		"fail  bot revoked: token rejected by Telegram (revoked, or mistyped): copy it again from @BotFather",
		"fail  bot painter: it paints (image.enabled) but OPENAI_API_KEY is not set: its image replies will fail",
		"warn  voice messages in: OPENAI_API_KEY is not set: chat, mangled, revoked, twin answer voice messages with messages.text_only (stt.enabled: false says it is meant)",
		"fail  brain broken.yaml: "+filepath.Join(s.brains, "broken.yaml")+":6: tts.speed: must be between 0.25 and 4.0, got 9\n",
		"1 of 6 bots would run (chat); failing (see above): mangled, painter, revoked, twin; skipped: broken.yaml (invalid brain file)\n",
	)
	for _, secret := range []string{chatToken, voiceToken, "revoked-secret-token"} {
		if strings.Contains(stdout, secret) {
			t.Errorf("a token is in the output:\n%s", stdout)
		}
	}
}

// doctor checks OPENAI_API_KEY with one cheap call, as it checks bot
// tokens: a key OpenAI refuses fails the check and the bots that need it,
// and the last line agrees with the lines above it.
func TestDoctorOpenAIKey(t *testing.T) {
	brains := map[string]string{
		"chat.yaml":    brainWith("CHAT_TOKEN", ""),
		"voice.yaml":   brainWith("VOICE_TOKEN", "tts:\n  enabled: true\n"),
		"painter.yaml": brainWith("PAINTER_TOKEN", "image:\n  enabled: true\n"),
	}
	tokens := []string{"CHAT_TOKEN=" + chatToken, "VOICE_TOKEN=" + voiceToken, "PAINTER_TOKEN=" + painterToken}
	tests := []struct {
		name    string
		prepare func(*openaitest.Server)
		env     []string
		code    int
		want    []string
	}{
		{"accepted", nil, nil, exitOK, []string{
			"ok    OpenAI key: OPENAI_API_KEY accepted by ",
			"\n3 of 3 bots would run (chat, painter, voice)\n"}},
		{"refused", func(o *openaitest.Server) { o.RequireKey("sk-another-key") }, nil, exitError, []string{
			"fail  OpenAI key: OPENAI_API_KEY refused by OpenAI (401 invalid_api_key: Incorrect API key provided.): copy a key again from https://platform.openai.com/api-keys; until then voice and image replies and voice messages in fail\n",
			"fail  bot voice: it speaks (tts.enabled) but OpenAI refuses OPENAI_API_KEY: its voice replies will fail\n",
			"fail  bot painter: it paints (image.enabled) but OpenAI refuses OPENAI_API_KEY: its image replies will fail\n",
			"\n1 of 3 bots would run (chat); failing (see above): painter, voice\n"}},
		{"not set", nil, []string{"OPENAI_API_KEY="}, exitError, []string{
			"fail  bot voice: it speaks (tts.enabled) but OPENAI_API_KEY is not set: its voice replies will fail\n",
			"fail  bot painter: it paints (image.enabled) but OPENAI_API_KEY is not set: its image replies will fail\n",
			"\n1 of 3 bots would run (chat); failing (see above): painter, voice\n"}},
		{"unreachable", nil, []string{"OPENAI_BASE_URL=http://127.0.0.1:9/v1"}, exitError, []string{
			"fail  OpenAI key: no answer to GET /models from http://127.0.0.1:9/v1: ",
			"fail  bot voice: it speaks (tts.enabled) but OpenAI does not answer: its voice replies will fail\n",
			"\n1 of 3 bots would run (chat); failing (see above): painter, voice\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t, brains, tokens...)
			if tt.prepare != nil {
				tt.prepare(s.openAI)
			}
			code, stdout, _ := s.doctor(t, tt.env...)
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			wantLines(t, stdout, tt.want...)
			if strings.Contains(stdout, testOpenAIKey) {
				t.Errorf("the key is in the output:\n%s", stdout)
			}
			if tt.name == "not set" && len(s.openAI.Requests()) > 0 {
				t.Error("doctor called OpenAI without a key")
			}
		})
	}
}

// A brain's token file is read as run reads it: its bot is checked with
// Telegram, a file that is not there yet skips the bot, and one brainbot
// cannot read fails it, naming the file.
func TestDoctorTokenFiles(t *testing.T) {
	s := newSite(t, map[string]string{
		"filed.yaml":  "name: Filed\nsystem_prompt: hi\ntelegram:\n  token_file: filed.token\n",
		"later.yaml":  "name: Later\nsystem_prompt: hi\ntelegram:\n  token_file: $CREDENTIALS_DIRECTORY/later\n",
		"folder.yaml": "name: Folder\nsystem_prompt: hi\ntelegram:\n  token_file: /\n",
		"piped.yaml":  "name: Piped\nsystem_prompt: hi\ntelegram:\n  token_file: piped.token\n",
		"shared.yaml": "name: Shared\nsystem_prompt: hi\ntelegram:\n  token_file: shared.token\n",
	})
	filed, shared, piped := filepath.Join(s.brains, "filed.token"), filepath.Join(s.brains, "shared.token"), filepath.Join(s.brains, "piped.token")
	writeFile(t, filed, chatToken+"\n")
	writeFile(t, shared, revokedToken+"\n")
	if err := os.Chmod(filed, 0o600); err != nil {
		t.Fatal(err)
	}
	// A named pipe: reading it waited for a writer, and doctor hung.
	if err := unix.Mkfifo(piped, 0o600); err != nil {
		t.Fatal(err)
	}
	creds := t.TempDir()
	code, stdout, _ := s.doctor(t, "CREDENTIALS_DIRECTORY="+creds)
	if code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
	wantLines(t, stdout,
		"ok    bot filed: @"+telegramtest.Username(chatToken)+" (token from file filed.token)\n",
		"fail  bot folder: telegram.token_file in "+filepath.Join(s.brains, "folder.yaml")+": / is a directory, not a regular file\n",
		"fail  bot piped: telegram.token_file in "+filepath.Join(s.brains, "piped.yaml")+": "+piped+" is a named pipe, not a regular file\n",
		"warn  bot shared: token file "+shared+" is readable by every user of this machine (mode 0644): chmod o-r "+shared+"\n",
		"warn  bot later: not started: token file "+filepath.Join(creds, "later")+" does not exist: write the token to "+
			filepath.Join(creds, "later")+", then save the brain file again: no restart needed\n",
		"skipped: folder (token file not readable), later (token file "+filepath.Join(creds, "later")+" does not exist), piped (token file not readable)\n")
	if strings.Contains(stdout, "token file "+filed+" is readable") {
		t.Errorf("a token file of mode 0600 is called readable by every user:\n%s", stdout)
	}

	// Written while brainbot runs: the next load of the brain finds it.
	writeFile(t, filepath.Join(creds, "later"), voiceToken)
	_, stdout, _ = s.doctor(t, "CREDENTIALS_DIRECTORY="+creds)
	wantLines(t, stdout, "ok    bot later: @"+telegramtest.Username(voiceToken)+" (token from file $CREDENTIALS_DIRECTORY/later)\n")
}

// An admin logged in with `claude` learns that the login does not reach
// the bots, each of which has a config folder of its own, and what to do.
func TestDoctorOperatorLogin(t *testing.T) {
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, ".claude", ".credentials.json"), `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x","refreshToken":"sk-ant-ort01-y"}}`)
	s := newSite(t, nil)
	code, stdout, _ := s.doctor(t, "ANTHROPIC_API_KEY=", "HOME="+home, "CLAUDE_CMD="+fakeClaude(t, "2.1.328 (Claude Code)", authNone))
	want := "fail  model credentials: the `claude` login in " + filepath.Join(home, ".claude", ".credentials.json") +
		" does not reach the bots (each bot's Claude CLI has a config folder of its own): run `claude setup-token` as this user and set CLAUDE_CODE_OAUTH_TOKEN to the token it prints, or set ANTHROPIC_API_KEY\n"
	if code != exitError || !strings.Contains(stdout, want) {
		t.Errorf("exit %d, output:\n%s\nwant the line %q", code, stdout, want)
	}
}

// The preflight's questions to the CLI run as a bot's CLI would: with the
// allow-list of the environment (no bot token, no OpenAI key) and a config
// folder of their own, never the operator's, gone afterwards.
func TestPreflightProbesRunAsABotsCLI(t *testing.T) {
	out, home := t.TempDir(), t.TempDir()
	cli := filepath.Join(t.TempDir(), "claude")
	writeFile(t, cli, "#!/bin/sh\nenv > "+out+"/$1\ncase \"$1\" in\n--version) echo '2.1.328 (Claude Code)' ;;\nauth) echo '"+authAPIKey+"' ;;\nesac\n")
	if err := os.Chmod(cli, 0o755); err != nil {
		t.Fatal(err)
	}
	s := newSite(t, nil)
	if code, stdout, _ := s.doctor(t, "CLAUDE_CMD="+cli, "HOME="+home, "NARRATOR_TOKEN=123456:narrator-secret", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
	for _, probe := range []string{"--version", "auth"} {
		data, err := os.ReadFile(filepath.Join(out, probe))
		if err != nil {
			t.Fatalf("%s was not asked: %v", probe, err)
		}
		env := map[string]string{}
		for _, kv := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		for _, secret := range []string{"NARRATOR_TOKEN", "OPENAI_API_KEY", "BRAINBOT_DATA"} {
			if _, ok := env[secret]; ok {
				t.Errorf("%s: the CLI got %s", probe, secret)
			}
		}
		if env["ANTHROPIC_API_KEY"] == "" || env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] != "1" {
			t.Errorf("%s: the CLI lacks the model's variables: %v", probe, env)
		}
		config := env["CLAUDE_CONFIG_DIR"]
		if config == "" || env["HOME"] == home || strings.HasPrefix(config, home) {
			t.Errorf("%s: HOME %q CLAUDE_CONFIG_DIR %q, want a folder of the probe's own", probe, env["HOME"], config)
		}
		if _, err := os.Stat(config); !os.IsNotExist(err) {
			t.Errorf("%s: the probe's folder %s is still there: %v", probe, config, err)
		}
	}
	if left, _ := os.ReadDir(home); len(left) != 0 {
		t.Errorf("the operator's HOME got %v", left)
	}
}

// The preflight asks the real CLI, which knows every way it can
// authenticate.
func TestPreflightRealCLI(t *testing.T) {
	cli := claudetest.RequireCLI(t)
	s := newSite(t, nil, "CLAUDE_CMD="+cli, "HOME="+t.TempDir(), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	code, stdout, _ := s.doctor(t)
	wantLines(t, stdout, "ok    claude CLI: Claude Code "+testedClaudeVersion+" at "+cli+"\n",
		"ok    model credentials: API key from ANTHROPIC_API_KEY\n")
	if code != exitOK {
		t.Errorf("exit %d, want 0:\n%s", code, stdout)
	}

	code, stdout, _ = s.doctor(t, "ANTHROPIC_API_KEY=")
	wantLines(t, stdout, "fail  model credentials: none: ")
	if code != exitError {
		t.Errorf("without credentials: exit %d, want %d", code, exitError)
	}

	// The operator's `claude` login is not the bots'.
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, ".claude", ".credentials.json"),
		`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x","refreshToken":"sk-ant-ort01-y","expiresAt":4102444800000,"scopes":["user:inference"]}}`)
	code, stdout, _ = s.doctor(t, "ANTHROPIC_API_KEY=", "HOME="+home)
	wantLines(t, stdout, "fail  model credentials: the `claude` login in ")
	if code != exitError {
		t.Errorf("with the operator's login: exit %d, want %d", code, exitError)
	}
}

// The tested version is the one the Makefile installs for the tests.
func TestTestedClaudeVersionIsTheMakefiles(t *testing.T) {
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CLAUDE_VERSION\s*:?=\s*(\S+)`).FindSubmatch(makefile)
	if m == nil || string(m[1]) != testedClaudeVersion {
		t.Errorf("Makefile CLAUDE_VERSION = %q, testedClaudeVersion = %q: raise both together", m, testedClaudeVersion)
	}
}

func TestCompareVersions(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"2.1.328", "2.1.328", 0}, {"2.1.99", "2.1.328", -1}, {"2.10.0", "2.9.9", 1}, {"3.0.0", "2.1.328", 1},
	} {
		if got := compareVersions(tt.a, tt.b); got != tt.want {
			t.Errorf("compareVersions(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// syncBuffer is a bytes.Buffer that run's logger and the test can share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startRun runs `brainbot run` in-process until the returned stop is
// called, which returns its exit code.
func startRun(t *testing.T, env []string) (stderr *syncBuffer, stop func() int) {
	t.Helper()
	stderr = &syncBuffer{}
	return stderr, startRunTo(t, env, stderr)
}

// startRunTo is startRun logging to stderr.
func startRunTo(t *testing.T, env []string, stderr io.Writer) (stop func() int) {
	t.Helper()
	m := &Main{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: stderr, Environ: append(env, "BRAINBOT_LOG_FORMAT=json")}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- m.Run(ctx, []string{"run"}) }()
	return func() int {
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(time.Minute):
			t.Fatal("run did not stop")
			return -1
		}
	}
}

func waitForLog(t *testing.T, logs *syncBuffer, text string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q:\n%s", text, logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// run logs one line saying which bots run and why the others do not; a
// bot without a token is a warning, not an error.
func TestRunLogsWhichBotsRun(t *testing.T) {
	s := newSite(t, map[string]string{
		"chat.yaml":    brainWith("CHAT_TOKEN", ""),
		"limited.yaml": brainWith("LIMITED_TOKEN", ""),
	}, "CHAT_TOKEN="+chatToken)
	logs, stop := startRun(t, s.env)
	waitForLog(t, logs, `"msg":"1 of 2 bots running (chat); skipped: limited (LIMITED_TOKEN not set)"`)
	waitForLog(t, logs, `"msg":"bot not started: no token"`)
	if code := stop(); code != exitOK {
		t.Errorf("exit %d, want 0", code)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "bot not started: no token") && !strings.Contains(line, `"level":"warn"`) {
			t.Errorf("a skipped bot is logged above warn: %s", line)
		}
	}
}

// run refuses to start on a problem no bot could work around: exit 2,
// the reason logged, no bot polling.
func TestRunRefusesToStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	writeFile(t, file, "not a folder")
	tests := []struct {
		name, env, want string
	}{
		{"wrong CLAUDE_CMD", "CLAUDE_CMD=/nonexistent/claude", `"detail":"CLAUDE_CMD (-claude-cmd) \"/nonexistent/claude\": not found`},
		{"unwritable log file", "BRAINBOT_LOG_FILE=" + file + "/brainbot.log", `"detail":"BRAINBOT_LOG_FILE (-log-file) \"` + file + `/brainbot.log\": cannot write it`},
		{"no brains folder", "BRAINBOT_BRAINS=/nonexistent/brains", `"detail":"BRAINBOT_BRAINS (-brains) \"/nonexistent/brains\": no such folder"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t, map[string]string{"chat.yaml": brainWith("CHAT_TOKEN", "")}, "CHAT_TOKEN="+chatToken)
			code, _, stderr := runMain(t, append(s.env, tt.env, "BRAINBOT_LOG_FORMAT=json"), "run")
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			wantLines(t, stderr, `"msg":"preflight check failed"`, tt.want, `"msg":"brainbot not started: fix the failed checks above (brainbot doctor runs them all)"`)
			if strings.Contains(stderr, "telegram bot polling") {
				t.Errorf("a bot started:\n%s", stderr)
			}
		})
	}
}
