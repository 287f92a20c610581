package main

import (
	"flag"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"brainbot/output"
)

func parseConfig(t *testing.T, env map[string]string, args ...string) (Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, _, err := loadConfig(fs, args, environ, everySetting)
	return cfg, err
}

func TestConfigDefaults(t *testing.T) {
	c, err := parseConfig(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantBrains, _ := filepath.Abs("brains")
	wantData, _ := filepath.Abs("data")
	wantPanels, _ := filepath.Abs("panels")
	want := Config{
		BrainsDir:      wantBrains,
		PanelsDir:      wantPanels,
		DataDir:        wantData,
		TelegramAPIURL: "https://api.telegram.org",
		ClaudeCmd:      "claude",
		ClaudeBare:     "auto",
		SpeechEarly:    "on",
		LogLevel:       "info",
		MaxClaude:      4,
		MaxWaiting:     50,
		MaxWait:        2 * time.Minute,
		MaxWarm:        defaultMaxWarm(),
		WarmIdle:       10 * time.Minute,
		Spares:         1,
		SpareIdle:      10 * time.Minute,
		Grace:          30 * time.Second,
	}
	if c != want {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}
}

func TestConfigEnvAndFlags(t *testing.T) {
	env := map[string]string{
		"BRAINBOT_BRAINS":        "/srv/brains",
		"BRAINBOT_PANELS":        "/srv/panels",
		"BRAINBOT_DATA":          "/srv/data",
		"TELEGRAM_API_URL":       "http://127.0.0.1:8081/",
		"CLAUDE_CMD":             "/opt/claude",
		"BRAINBOT_CLAUDE_BARE":   "off",
		"OPENAI_BASE_URL":        "http://127.0.0.1:9000/v1",
		"BRAINBOT_LOG_LEVEL":     "debug",
		"BRAINBOT_LOG_FORMAT":    "json",
		"BRAINBOT_LOG_FILE":      "/var/log/brainbot.log",
		"BRAINBOT_MAX_CLAUDE":    "8",
		"BRAINBOT_GRACE":         "5s",
		"BRAINBOT_AUDIO_MAX_AGE": "720h",
		"BRAINBOT_IMAGE_MAX_MB":  "512",
		"BRAINBOT_SPARES":        "0",
		"BRAINBOT_SPEECH_EARLY":  "off",
	}
	c, err := parseConfig(t, env, "-log-level", "warn", "-max-claude", "2")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		BrainsDir:      "/srv/brains",
		PanelsDir:      "/srv/panels",
		DataDir:        "/srv/data",
		TelegramAPIURL: "http://127.0.0.1:8081", // trailing slash trimmed
		ClaudeCmd:      "/opt/claude",
		ClaudeBare:     "off",
		OpenAIBaseURL:  "http://127.0.0.1:9000/v1",
		SpeechEarly:    "off",
		LogLevel:       "warn", // the flag wins over the variable
		LogFormat:      "json",
		LogFile:        "/var/log/brainbot.log",
		MaxClaude:      2,
		MaxWaiting:     50,
		MaxWait:        2 * time.Minute,
		MaxWarm:        defaultMaxWarm(),
		WarmIdle:       10 * time.Minute,
		SpareIdle:      10 * time.Minute,
		Grace:          5 * time.Second,
		AudioRetention: output.Retention{MaxAge: 720 * time.Hour},
		ImageRetention: output.Retention{MaxBytes: 512 << 20},
	}
	if c != want {
		t.Errorf("config:\n got %+v\nwant %+v", c, want)
	}
}

// Every invalid setting is reported, each naming its variable and flag.
func TestConfigErrorsNameTheSetting(t *testing.T) {
	tests := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"BRAINBOT_LOG_LEVEL": "loud"}, nil, `BRAINBOT_LOG_LEVEL (-log-level) "loud": must be debug, info, warn or error`},
		{nil, []string{"-log-level", "fatal"}, `BRAINBOT_LOG_LEVEL (-log-level) "fatal": must be debug, info, warn or error`},
		{map[string]string{"BRAINBOT_LOG_FORMAT": "xml"}, nil, `BRAINBOT_LOG_FORMAT (-log-format) "xml": must be json or console`},
		{map[string]string{"TELEGRAM_API_URL": "api.telegram.org"}, nil, `TELEGRAM_API_URL (-telegram-api-url) "api.telegram.org": must be an http(s) URL`},
		{map[string]string{"OPENAI_BASE_URL": "ftp://x"}, nil, `OPENAI_BASE_URL (-openai-base-url) "ftp://x": must be an http(s) URL`},
		{map[string]string{"BRAINBOT_MAX_CLAUDE": "many"}, nil, `BRAINBOT_MAX_CLAUDE (-max-claude) "many": invalid syntax`},
		{nil, []string{"-max-claude", "0"}, `BRAINBOT_MAX_CLAUDE (-max-claude) "0": must be at least 1`},
		{map[string]string{"BRAINBOT_GRACE": "soon"}, nil, `BRAINBOT_GRACE (-grace) "soon": time: invalid duration "soon"`},
		{nil, []string{"-grace", "-1s"}, `BRAINBOT_GRACE (-grace) "-1s": must not be negative`},
		{nil, []string{"-claude-cmd", ""}, `CLAUDE_CMD (-claude-cmd) "": must name the Claude Code CLI`},
		{nil, []string{"-data", ""}, `BRAINBOT_DATA (-data) "": must name a folder`},
		{nil, []string{"-claude-bare", "yes"}, `BRAINBOT_CLAUDE_BARE (-claude-bare) "yes": must be auto, on or off`},
		{map[string]string{"BRAINBOT_AUDIO_MAX_AGE": "a month"}, nil, `BRAINBOT_AUDIO_MAX_AGE (-audio-max-age) "a month": time: invalid duration "a month"`},
		{nil, []string{"-image-max-age", "-1h"}, `BRAINBOT_IMAGE_MAX_AGE (-image-max-age) "-1h0m0s": must not be negative`},
		{nil, []string{"-audio-max-mb", "-5"}, `BRAINBOT_AUDIO_MAX_MB (-audio-max-mb) "-5": must not be negative`},
		{map[string]string{"BRAINBOT_IMAGE_MAX_MB": "2GB"}, nil, `BRAINBOT_IMAGE_MAX_MB (-image-max-mb) "2GB": invalid syntax`},
		{nil, []string{"-spares", "-1"}, `BRAINBOT_SPARES (-spares) "-1": must be 0 (none) or more`},
		{map[string]string{"BRAINBOT_SPARE_IDLE": "0s"}, nil, `BRAINBOT_SPARE_IDLE (-spare-idle) "0s": must be more than 0`},
		{nil, []string{"-http-addr", ":9464"}, `BRAINBOT_HTTP_ADDR (-http-addr) ":9464": is reachable from other machines: serve it on 127.0.0.1, or set BRAINBOT_ADMIN_TOKEN`},
		{map[string]string{"BRAINBOT_HTTP_ADDR": "10.0.0.5:9464"}, nil, `BRAINBOT_HTTP_ADDR (-http-addr) "10.0.0.5:9464": is reachable from other machines`},
		{map[string]string{"BRAINBOT_HTTP_ADDR": "0.0.0.0:9464", "BRAINBOT_ADMIN_TOKEN": "short"}, nil, `BRAINBOT_ADMIN_TOKEN "…": must be at least 16 characters`},
		{map[string]string{"BRAINBOT_SPEECH_EARLY": "yes"}, nil, `BRAINBOT_SPEECH_EARLY (-speech-early) "yes": must be on or off`},
	}
	for _, tt := range tests {
		_, err := parseConfig(t, tt.env, tt.args...)
		if err == nil {
			t.Errorf("env %v args %v: no error, want %q", tt.env, tt.args, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("env %v args %v:\n got %q\nwant %q", tt.env, tt.args, err, tt.want)
		}
	}
}

func TestConfigReportsAllErrors(t *testing.T) {
	_, err := parseConfig(t, map[string]string{"BRAINBOT_LOG_LEVEL": "loud", "BRAINBOT_LOG_FORMAT": "xml"})
	if err == nil || !strings.Contains(err.Error(), "BRAINBOT_LOG_LEVEL") || !strings.Contains(err.Error(), "BRAINBOT_LOG_FORMAT") {
		t.Fatalf("want both settings named, got %v", err)
	}
}

func TestClaudeBare(t *testing.T) {
	tests := []struct {
		setting string
		env     map[string]string
		want    bool
	}{
		{"on", nil, true},
		{"off", map[string]string{"ANTHROPIC_API_KEY": "k"}, false},
		{"auto", nil, false}, // a `claude` login: --bare would lose it
		{"auto", map[string]string{"ANTHROPIC_API_KEY": "k"}, true},
		{"auto", map[string]string{"CLAUDE_CODE_USE_BEDROCK": "1"}, true},
	}
	for _, tt := range tests {
		if got := claudeBare(tt.setting, func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("claudeBare(%q, %v) = %v, want %v", tt.setting, tt.env, got, tt.want)
		}
	}
}

// validate reports problems and changes nothing: making paths absolute and
// trimming the URL is normalize's job (issue 10).
func TestConfigValidateOnlyValidates(t *testing.T) {
	c := Config{
		BrainsDir: "brains", PanelsDir: "panels", DataDir: "data", TelegramAPIURL: "http://127.0.0.1:8081/",
		ClaudeCmd: "claude", ClaudeBare: "auto", SpeechEarly: "on", LogLevel: "info", MaxClaude: 1,
		MaxWaiting: 1, MaxWait: time.Second, WarmIdle: time.Minute, SpareIdle: time.Minute,
	}
	before := c
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if c != before {
		t.Errorf("validate changed the config:\n got %+v\nwant %+v", c, before)
	}
}

// An env file is read as systemd reads EnvironmentFile=: comments, quotes
// and spaces as systemd takes them, and lines that assign nothing skipped.
func TestReadEnvFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "brainbot.env")
	writeFile(t, path, `# tokens
; also a comment
VOICE_TOKEN=123:abc

  BRAINBOT_DATA = /var/lib/brainbot/data
QUOTED="a \"b\" c\\d"
SINGLE='x "y" z'
HALF="open
EMPTY=
not an assignment
export LATER=1
`)
	got, err := readEnvFile(path)
	want := []string{"VOICE_TOKEN=123:abc", "BRAINBOT_DATA=/var/lib/brainbot/data", `QUOTED=a "b" c\d`, `SINGLE=x "y" z`, `HALF="open`, "EMPTY="}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("readEnvFile = %q, %v\nwant %q", got, err, want)
	}
}

// -env-file: its variables win over the environment, as systemd's
// EnvironmentFile= wins over Environment=, and flags win over both; the
// command's environment then holds them (tokens, keys).
func TestConfigEnvFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "brainbot.env")
	writeFile(t, path, "BRAINBOT_DATA=/srv/data\nBRAINBOT_MAX_CLAUDE=6\nVOICE_TOKEN=123:abc\n")
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	environ := []string{"BRAINBOT_DATA=/elsewhere", "BRAINBOT_BRAINS=/srv/brains", "BRAINBOT_MAX_CLAUDE=3"}
	cfg, env, err := loadConfig(fs, []string{"-env-file", path, "-max-claude", "2"}, environ, everySetting)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/srv/data" || cfg.BrainsDir != "/srv/brains" || cfg.MaxClaude != 2 {
		t.Errorf("data %s, brains %s, max claude %d; want the file's, the environment's and the flag's", cfg.DataDir, cfg.BrainsDir, cfg.MaxClaude)
	}
	if v, _ := lookupIn(env, "VOICE_TOKEN"); v != "123:abc" {
		t.Errorf("VOICE_TOKEN = %q in the command's environment", v)
	}
	if len(environ) != 3 {
		t.Errorf("the caller's environment was changed: %q", environ)
	}
	fs = flag.NewFlagSet("usage", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, _, err := loadConfig(fs, []string{"-env-file", path + ".missing"}, nil, settingsNamed()); err == nil || !strings.HasPrefix(err.Error(), "-env-file: open ") {
		t.Errorf("a missing env file: %v", err)
	}
}

// The admin endpoint serves loopback without a token, anywhere else only
// with one; the token never shows in an error.
func TestAdminAddressNeedsATokenOffLoopback(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:9464", "[::1]:9464", "localhost:9464"} {
		if _, err := parseConfig(t, map[string]string{"BRAINBOT_HTTP_ADDR": addr}); err != nil {
			t.Errorf("%s without a token: %v", addr, err)
		}
	}
	const token = "a-token-of-some-length-0123456789"
	c, err := parseConfig(t, map[string]string{"BRAINBOT_HTTP_ADDR": ":9464", "BRAINBOT_ADMIN_TOKEN": token})
	if err != nil || c.AdminToken != token {
		t.Errorf("every interface with a token: %v (token %q)", err, c.AdminToken)
	}
	_, err = parseConfig(t, map[string]string{"BRAINBOT_ADMIN_TOKEN": "tooshort-secret"})
	if err == nil || strings.Contains(err.Error(), "tooshort-secret") {
		t.Errorf("a short token: %v, want an error that does not show it", err)
	}
}
