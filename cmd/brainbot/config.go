package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"

	"brainbot/admin"
	"brainbot/output"
	"brainbot/state/jetstream"
)

// Config is everything brainbot reads from its environment and flags. It
// is read in one place (readConfig, for every subcommand), checked in one
// place (validate) and then normalised (normalize); every error names the
// variable and the flag it came from.
type Config struct {
	BrainsDir      string
	PanelsDir      string
	DataDir        string
	TelegramAPIURL string
	ClaudeCmd      string
	ClaudeBare     string // auto, on or off: see claudeBare
	OpenAIBaseURL  string // empty: OpenAI's own
	// OpenAIKey is for the voice and image tools and voice messages in.
	// It has no flag: flags show in ps.
	OpenAIKey string
	// SpeechEarly (on, off): a voice answer is spoken while the model
	// writes it and sent once turn two's tool reports it; off speaks it
	// in turn two's tool call and sends it after the turn (the flow
	// before 2026-11, kept to compare and as a way back).
	SpeechEarly string

	LogLevel  string
	LogFormat string // json, console, or empty for "console on a terminal, else json"
	LogFile   string

	MaxClaude int
	// MaxWaiting and MaxWait bound one bot's requests waiting for a
	// Claude slot, in number and in time.
	MaxWaiting int
	MaxWait    time.Duration
	Grace      time.Duration
	// MaxWarm is how many idle conversations keep their CLI process, and
	// WarmIdle how long an unused one is kept. Spares is how many CLI
	// processes each bot keeps started for its next new conversations
	// (within MaxWarm), and SpareIdle how long an unused one is kept
	// before a fresh one replaces it.
	MaxWarm   int
	WarmIdle  time.Duration
	Spares    int
	SpareIdle time.Duration
	// SparesMemory caps the memory all spares hold, beside the budget of
	// kept CLIs: a share of the machine's ("25%") or a size ("400MB");
	// "" none; see sparesMemory.
	SparesMemory string
	// HTTPAddr is the admin address ("": off): /healthz, /readyz and
	// /metrics for monitors, and with AdminToken (which an address off
	// loopback needs) the admin's calls too. The token has no flag: flags
	// show in ps. AdminSocket is the admin socket, where the admin's own
	// commands call ("": admin.sock in the data folder).
	HTTPAddr    string
	AdminToken  string
	AdminSocket string

	// Retention prunes organised voice notes and images (off by default).
	AudioRetention, ImageRetention output.Retention

	// NATSURL joins the instances sharing the bots through NATS JetStream
	// ("": one instance, state in SQLite). NATSPartitions spreads the
	// conversations; Instance names this instance among them.
	NATSURL        string
	NATSPartitions int
	NATSReplicas   int
	Instance       string
	// WebhookURL has Telegram post updates to <WebhookURL>/<bot id>
	// instead of polling; WebhookAddr is where this
	// instance listens for them.
	WebhookURL  string
	WebhookAddr string
}

// defaultWebhookAddr is where webhook calls are served when
// BRAINBOT_WEBHOOK_ADDR is empty.
const defaultWebhookAddr = ":8443"

// setting ties one Config field to its environment variable and flag, so
// that the default, the help text and the error messages agree.
type setting struct {
	env, flag, usage, def string // flag is empty for a variable without one
	// set parses a value into the Config.
	set func(c *Config, v string) error
}

var settings = []setting{
	{"BRAINBOT_BRAINS", "brains", "folder of brain files", "./brains",
		func(c *Config, v string) error { c.BrainsDir = v; return nil }},
	{"BRAINBOT_PANELS", "panels", "folder of panel files (several brains answering one question in a group: /panel); it need not exist", "./panels",
		func(c *Config, v string) error { c.PanelsDir = v; return nil }},
	{"BRAINBOT_DATA", "data", "state root: sessions store, audio-output/, image-output/, Claude working dirs", "./data",
		func(c *Config, v string) error { c.DataDir = v; return nil }},
	{"TELEGRAM_API_URL", "telegram-api-url", "Bot API base URL", "https://api.telegram.org",
		func(c *Config, v string) error { c.TelegramAPIURL = v; return nil }},
	{"CLAUDE_CMD", "claude-cmd", "path of the Claude Code CLI", "claude",
		func(c *Config, v string) error { c.ClaudeCmd = v; return nil }},
	{"BRAINBOT_CLAUDE_BARE", "claude-bare", "run the CLI with --bare (none of this account's Claude Code hooks, plugins or CLAUDE.md; faster start): on, off, or auto = on when ANTHROPIC_API_KEY or a cloud provider is configured", "auto",
		func(c *Config, v string) error { c.ClaudeBare = v; return nil }},
	{"OPENAI_BASE_URL", "openai-base-url", "OpenAI API base URL for the MCP servers (empty: OpenAI's)", "",
		func(c *Config, v string) error { c.OpenAIBaseURL = v; return nil }},
	{"OPENAI_API_KEY", "", "OpenAI API key for the voice and image tools and voice messages in", "",
		func(c *Config, v string) error { c.OpenAIKey = v; return nil }},
	{"BRAINBOT_SPEECH_EARLY", "speech-early", "on: speak a voice answer (and a speaking panel member's answer and reply) while the model writes it, and send it as soon as it is made; off: speak it after the answer is written, and send it after the model's closing words (slower; for comparison)", "on",
		func(c *Config, v string) error { c.SpeechEarly = v; return nil }},
	{"BRAINBOT_LOG_LEVEL", "log-level", "debug, info, warn or error", "info",
		func(c *Config, v string) error { c.LogLevel = v; return nil }},
	{"BRAINBOT_LOG_FORMAT", "log-format", "json or console (default: console on a terminal, else json)", "",
		func(c *Config, v string) error { c.LogFormat = v; return nil }},
	{"BRAINBOT_LOG_FILE", "log-file", "also write logs to this file, rotated", "",
		func(c *Config, v string) error { c.LogFile = v; return nil }},
	{"BRAINBOT_MAX_CLAUDE", "max-claude", "Claude processes running at once; the rest wait. Default: 4, fewer where the memory holds fewer answering at once (brainbot doctor counts them)", "",
		func(c *Config, v string) (err error) {
			if v == "" {
				c.MaxClaude = defaultMaxClaude()
				return nil
			}
			c.MaxClaude, err = strconv.Atoi(v)
			return err
		}},
	{"BRAINBOT_MAX_WAITING", "max-waiting", "requests of one bot that may wait for a Claude process; more get the brain's busy message", "50",
		func(c *Config, v string) (err error) { c.MaxWaiting, err = strconv.Atoi(v); return err }},
	{"BRAINBOT_MAX_WAIT", "max-wait", "how long a request may wait for a Claude process before it gets the brain's busy message", "2m",
		func(c *Config, v string) (err error) { c.MaxWait, err = time.ParseDuration(v); return err }},
	{"BRAINBOT_MAX_WARM", "max-warm", "conversations whose Claude process is kept alive between messages (a follow-up then skips the CLI's start); 0: none. Default: as many as the memory holds (brainbot doctor counts them), kept within the memory as it is used", "",
		func(c *Config, v string) (err error) {
			if v == "" {
				c.MaxWarm = defaultMaxWarm()
				return nil
			}
			c.MaxWarm, err = strconv.Atoi(v)
			return err
		}},
	{"BRAINBOT_WARM_IDLE", "warm-idle", "how long an unused conversation's Claude process is kept; after a restart, the conversations active within it get theirs back ahead of their next message", "10m",
		func(c *Config, v string) (err error) { c.WarmIdle, err = time.ParseDuration(v); return err }},
	{"BRAINBOT_SPARES", "spares", "Claude processes each bot keeps started ahead of its next new conversations (a new conversation then skips the CLI's start too); counted in max-warm, which ends the kept processes wanted least lately when it is full; 0: none", "1",
		func(c *Config, v string) (err error) { c.Spares, err = strconv.Atoi(v); return err }},
	{"BRAINBOT_SPARES_MEMORY", "spares-memory", "an optional cap on the memory all spares together hold, at ~175 MB each, beside the one budget of kept CLIs (max-warm and the memory in use) they count in anyway: a share of the machine's memory (its cgroup's limit, as systemd's MemoryMax, when lower) or a size in MB (400MB); empty: no cap of their own", "",
		func(c *Config, v string) error { c.SparesMemory = v; return nil }},
	{"BRAINBOT_SPARE_IDLE", "spare-idle", "how long an unused spare is kept before a fresh one replaces it", "10m",
		func(c *Config, v string) (err error) { c.SpareIdle, err = time.ParseDuration(v); return err }},
	{"BRAINBOT_HTTP_ADDR", "http-addr", "serve /healthz, /readyz and /metrics at this address, e.g. 127.0.0.1:9464 (empty: off), and with BRAINBOT_ADMIN_TOKEN /status and the conversations too; off loopback it needs BRAINBOT_ADMIN_TOKEN", "",
		func(c *Config, v string) error { c.HTTPAddr = v; return nil }},
	{"BRAINBOT_ADMIN_TOKEN", "", "bearer token the admin address asks of every call but /healthz (a browser signs in at /login); needed to serve it anywhere but loopback, and for the admin's calls there", "",
		func(c *Config, v string) error { c.AdminToken = v; return nil }},
	{"BRAINBOT_ADMIN_SOCKET", "admin-socket", "the admin socket, a Unix socket only the service's user and root may open: brainbot status, conversations and forget call the service there (empty: admin.sock in the data folder)", "",
		func(c *Config, v string) error { c.AdminSocket = v; return nil }},
	{"BRAINBOT_GRACE", "grace", "on SIGTERM, how long requests in flight may finish", "30s",
		func(c *Config, v string) (err error) { c.Grace, err = time.ParseDuration(v); return err }},
	{"BRAINBOT_AUDIO_MAX_AGE", "audio-max-age", "delete voice notes older than this (0: keep)", "0",
		func(c *Config, v string) (err error) {
			c.AudioRetention.MaxAge, err = time.ParseDuration(v)
			return err
		}},
	{"BRAINBOT_AUDIO_MAX_MB", "audio-max-mb", "keep at most this many MB of voice notes, oldest deleted first (0: no limit)", "0",
		func(c *Config, v string) error { return parseMB(v, &c.AudioRetention.MaxBytes) }},
	{"BRAINBOT_IMAGE_MAX_AGE", "image-max-age", "delete images older than this (0: keep)", "0",
		func(c *Config, v string) (err error) {
			c.ImageRetention.MaxAge, err = time.ParseDuration(v)
			return err
		}},
	{"BRAINBOT_NATS_URL", "nats-url", "share the bots with other instances through NATS JetStream at this URL, e.g. nats://10.0.0.5:4222 (empty: this instance alone, state in SQLite; see docs/scaling.md)", "",
		func(c *Config, v string) error { c.NATSURL = v; return nil }},
	{"BRAINBOT_NATS_PARTITIONS", "nats-partitions", "with BRAINBOT_NATS_URL: partitions the conversations are spread over, the same on every instance (empty: 16)", "",
		func(c *Config, v string) (err error) {
			if v == "" {
				return nil
			}
			c.NATSPartitions, err = strconv.Atoi(v)
			return err
		}},
	{"BRAINBOT_NATS_REPLICAS", "nats-replicas", "with BRAINBOT_NATS_URL: copies JetStream keeps of brainbot's streams and buckets, 3 on a three-node NATS cluster (empty: 1)", "",
		func(c *Config, v string) (err error) {
			if v == "" {
				return nil
			}
			c.NATSReplicas, err = strconv.Atoi(v)
			return err
		}},
	{"BRAINBOT_INSTANCE", "instance", "with BRAINBOT_NATS_URL: this instance's name, unique among them (default: host name and process id)", "",
		func(c *Config, v string) error { c.Instance = v; return nil }},
	{"BRAINBOT_WEBHOOK_URL", "webhook-url", "have Telegram post updates to <this URL>/<bot id> (https; with BRAINBOT_NATS_URL reaching any instance, e.g. through a load balancer) instead of polling (empty: poll)", "",
		func(c *Config, v string) error { c.WebhookURL = v; return nil }},
	{"BRAINBOT_WEBHOOK_ADDR", "webhook-addr", "with BRAINBOT_WEBHOOK_URL: where this instance listens for Telegram's calls, host:port (empty: :8443)", "",
		func(c *Config, v string) error { c.WebhookAddr = v; return nil }},
	{"BRAINBOT_IMAGE_MAX_MB", "image-max-mb", "keep at most this many MB of images, oldest deleted first (0: no limit)", "0",
		func(c *Config, v string) error { return parseMB(v, &c.ImageRetention.MaxBytes) }},
}

func parseMB(v string, bytes *int64) error {
	mb, err := strconv.ParseInt(v, 10, 64)
	*bytes = mb << 20
	return err
}

func formatMB(bytes int64) string { return strconv.FormatInt(bytes>>20, 10) }

// settingFlags chooses the settings a subcommand takes as flags.
type settingFlags func(setting) bool

// everySetting: run and doctor take every setting as a flag.
func everySetting(setting) bool { return true }

// settingsNamed takes the settings of these variables as flags (none when
// no variable is named).
func settingsNamed(envs ...string) settingFlags {
	return func(s setting) bool { return slices.Contains(envs, s.env) }
}

// envFileUsage explains -env-file, which every admin subcommand takes.
const envFileUsage = "read variables (settings, tokens, keys) from this file of KEY=value lines, as systemd's EnvironmentFile= does, " +
	"e.g. the service's /etc/brainbot/brainbot.env; they win over the environment, flags win over both"

// loadConfig is readConfig for a subcommand: the settings flagged chooses
// are registered on fs as flags, with -env-file, and parsed from args. A
// flag wins over the variables of the env file, which win over environ (as
// systemd's EnvironmentFile= wins over Environment=). It returns the
// environment the command runs with: environ and the env file's variables
// after it. The arguments after the flags are fs.Args().
func loadConfig(fs *flag.FlagSet, args, environ []string, flagged settingFlags) (Config, []string, error) {
	flags := make(map[string]*string, len(settings))
	for _, s := range settings {
		if s.flag != "" && flagged(s) {
			flags[s.flag] = fs.String(s.flag, s.def, fmt.Sprintf("%s (env %s)", s.usage, s.env))
		}
	}
	envFile := fs.String("env-file", "", envFileUsage)
	if err := fs.Parse(args); err != nil {
		return Config{}, nil, err
	}
	if *envFile != "" {
		vars, err := readEnvFile(*envFile)
		if err != nil {
			return Config{}, nil, fmt.Errorf("-env-file: %w", err)
		}
		environ = append(slices.Clip(environ), vars...)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	getenv := func(name string) string { v, _ := lookupIn(environ, name); return v }
	cfg, err := readConfig(func(s setting) string {
		if v, ok := flags[s.flag]; ok && given[s.flag] {
			return *v
		}
		return envOrDefault(s, getenv)
	})
	return cfg, environ, err
}

// loadConfig is the package's loadConfig on m's environment, which from
// then on holds the env file's variables too: tokens, keys and the
// variables brains' MCP servers reference are looked up there.
func (m *Main) loadConfig(fs *flag.FlagSet, args []string, flagged settingFlags) (Config, error) {
	cfg, environ, err := loadConfig(fs, args, m.Environ, flagged)
	if environ != nil {
		m.Environ = environ
	}
	return cfg, err
}

// runConfig reads the configuration of run and doctor: every setting as
// a flag, and no other argument. Its errors are usage errors.
func (m *Main) runConfig(fs *flag.FlagSet, args []string) (Config, error) {
	cfg, err := m.loadConfig(fs, args, everySetting)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err != nil {
		return Config{}, usageError{err}
	}
	return cfg, nil
}

// envConfig is readConfig for the mcp subcommands, which brainbot starts
// itself with their environment: that environment alone.
func envConfig(getenv func(string) string) (Config, error) {
	return readConfig(func(s setting) string { return envOrDefault(s, getenv) })
}

// lookupIn looks a variable up in environ, KEY=value strings (the last
// assignment wins, as in the C library).
func lookupIn(environ []string, name string) (string, bool) {
	for i := len(environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(environ[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// readEnvFile reads a file of KEY=value lines as systemd's EnvironmentFile=
// does: lines starting with # or ; and lines that assign no variable are
// skipped (systemd ignores them too), spaces around the value are trimmed,
// and a value in matching single or double quotes loses them (a
// double-quoted value reads \" and \\ as " and \). Line continuations and
// the other escapes systemd knows are not read: the example file has none.
func readEnvFile(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var vars []string
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if key = strings.TrimSpace(key); ok && envVarName.MatchString(key) {
			vars = append(vars, key+"="+unquoteEnvValue(strings.TrimSpace(value)))
		}
	}
	return vars, nil
}

// envVarName is what systemd takes as a variable name.
var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func unquoteEnvValue(v string) string {
	if len(v) < 2 || v[0] != v[len(v)-1] || (v[0] != '"' && v[0] != '\'') {
		return v
	}
	inner := v[1 : len(v)-1]
	if v[0] == '\'' {
		return inner
	}
	return strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(inner)
}

func envOrDefault(s setting, getenv func(string) string) string {
	if v := getenv(s.env); v != "" {
		return v
	}
	return s.def
}

// readConfig parses every setting's value, validates the result and
// normalises it. It reports every problem at once.
func readConfig(value func(setting) string) (Config, error) {
	var c Config
	var errs []error
	for _, s := range settings {
		if err := s.set(&c, value(s)); err != nil {
			errs = append(errs, settingError(s, value(s), err))
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	if err := c.validate(); err != nil {
		return Config{}, err
	}
	return c, c.normalize()
}

// settingError names the setting, and the value unless it is a secret.
func settingError(s setting, value string, err error) error {
	var numErr *strconv.NumError
	if errors.As(err, &numErr) {
		err = numErr.Err
	}
	return fmt.Errorf("%s %q: %w", s.name(), value, err)
}

// name is how messages name the setting: its variable and its flag.
func (s setting) name() string {
	if s.flag == "" {
		return s.env
	}
	return fmt.Sprintf("%s (-%s)", s.env, s.flag)
}

func lookupSetting(env string) setting {
	for _, s := range settings {
		if s.env == env {
			return s
		}
	}
	panic("no setting " + env)
}

// validate checks the settings that parsed, and changes nothing; each
// error names the variable and flag so an admin knows what to fix.
func (c *Config) validate() error {
	var errs []error
	bad := func(env, value, msg string) {
		errs = append(errs, settingError(lookupSetting(env), value, errors.New(msg)))
	}
	if c.BrainsDir == "" {
		bad("BRAINBOT_BRAINS", c.BrainsDir, "must name a folder")
	}
	if c.PanelsDir == "" {
		bad("BRAINBOT_PANELS", c.PanelsDir, "must name a folder")
	}
	if c.DataDir == "" {
		bad("BRAINBOT_DATA", c.DataDir, "must name a folder")
	}
	if !isHTTPURL(c.TelegramAPIURL) {
		bad("TELEGRAM_API_URL", c.TelegramAPIURL, "must be an http(s) URL")
	}
	if c.OpenAIBaseURL != "" && !isHTTPURL(c.OpenAIBaseURL) {
		bad("OPENAI_BASE_URL", c.OpenAIBaseURL, "must be an http(s) URL")
	}
	if c.ClaudeCmd == "" {
		bad("CLAUDE_CMD", c.ClaudeCmd, "must name the Claude Code CLI")
	}
	if c.ClaudeBare != "auto" && c.ClaudeBare != "on" && c.ClaudeBare != "off" {
		bad("BRAINBOT_CLAUDE_BARE", c.ClaudeBare, "must be auto, on or off")
	}
	// ParseLevel also takes dpanic, panic and fatal, which would hide every
	// error, and reads "" as info.
	if level, err := zapcore.ParseLevel(c.LogLevel); err != nil || level > zapcore.ErrorLevel || c.LogLevel == "" {
		bad("BRAINBOT_LOG_LEVEL", c.LogLevel, "must be debug, info, warn or error")
	}
	if c.SpeechEarly != "on" && c.SpeechEarly != "off" {
		bad("BRAINBOT_SPEECH_EARLY", c.SpeechEarly, "must be on or off")
	}
	if c.LogFormat != "" && c.LogFormat != "json" && c.LogFormat != "console" {
		bad("BRAINBOT_LOG_FORMAT", c.LogFormat, "must be json or console")
	}
	if c.MaxClaude < 1 {
		bad("BRAINBOT_MAX_CLAUDE", strconv.Itoa(c.MaxClaude), "must be at least 1")
	}
	if c.Grace < 0 {
		bad("BRAINBOT_GRACE", c.Grace.String(), "must not be negative")
	}
	if c.MaxWaiting < 1 {
		bad("BRAINBOT_MAX_WAITING", strconv.Itoa(c.MaxWaiting), "must be at least 1")
	}
	if c.MaxWait <= 0 {
		bad("BRAINBOT_MAX_WAIT", c.MaxWait.String(), "must be more than 0")
	}
	if c.MaxWarm < 0 {
		bad("BRAINBOT_MAX_WARM", strconv.Itoa(c.MaxWarm), "must be 0 (none) or more")
	}
	if c.WarmIdle <= 0 {
		bad("BRAINBOT_WARM_IDLE", c.WarmIdle.String(), "must be more than 0")
	}
	if c.Spares < 0 {
		bad("BRAINBOT_SPARES", strconv.Itoa(c.Spares), "must be 0 (none) or more")
	}
	if _, _, err := sparesMemory(c.SparesMemory, 0, ""); err != nil {
		bad("BRAINBOT_SPARES_MEMORY", c.SparesMemory, err.Error())
	}
	if c.SpareIdle <= 0 {
		bad("BRAINBOT_SPARE_IDLE", c.SpareIdle.String(), "must be more than 0")
	}
	if c.HTTPAddr != "" {
		host, _, err := net.SplitHostPort(c.HTTPAddr)
		switch {
		case err != nil:
			bad("BRAINBOT_HTTP_ADDR", c.HTTPAddr, "must be host:port, e.g. 127.0.0.1:9464")
		case !isLoopback(host) && c.AdminToken == "":
			bad("BRAINBOT_HTTP_ADDR", c.HTTPAddr, "is reachable from other machines: serve it on 127.0.0.1, or set BRAINBOT_ADMIN_TOKEN, which every call but /healthz must then bring (Authorization: Bearer ...)")
		}
	}
	if c.AdminToken != "" && len(c.AdminToken) < minAdminToken {
		bad("BRAINBOT_ADMIN_TOKEN", "…", fmt.Sprintf("must be at least %d characters (openssl rand -hex 32 makes one)", minAdminToken))
	}
	if c.NATSURL != "" {
		for _, u := range strings.Split(c.NATSURL, ",") {
			if p, err := url.Parse(strings.TrimSpace(u)); err != nil || !slices.Contains([]string{"nats", "tls", "ws", "wss"}, p.Scheme) || p.Host == "" {
				bad("BRAINBOT_NATS_URL", jetstream.Redact(c.NATSURL), "must be nats:// (or tls://, ws://, wss://) URLs, comma-separated")
				break
			}
		}
	}
	if c.WebhookURL != "" {
		if !isHTTPURL(c.WebhookURL) {
			bad("BRAINBOT_WEBHOOK_URL", c.WebhookURL, "must be an https URL (http only for tests)")
		}
		if _, _, err := net.SplitHostPort(cmp.Or(c.WebhookAddr, defaultWebhookAddr)); err != nil {
			bad("BRAINBOT_WEBHOOK_ADDR", c.WebhookAddr, "must be host:port, e.g. :8443")
		}
	}
	if c.NATSReplicas < 0 || c.NATSReplicas > 5 {
		bad("BRAINBOT_NATS_REPLICAS", strconv.Itoa(c.NATSReplicas), "must be 1 to 5 (empty: 1)")
	}
	if c.NATSPartitions < 0 || c.NATSPartitions > 1024 {
		bad("BRAINBOT_NATS_PARTITIONS", strconv.Itoa(c.NATSPartitions), "must be 1 to 1024 (empty: 16)")
	}
	for _, r := range []struct {
		ageEnv, mbEnv string
		retention     output.Retention
	}{
		{"BRAINBOT_AUDIO_MAX_AGE", "BRAINBOT_AUDIO_MAX_MB", c.AudioRetention},
		{"BRAINBOT_IMAGE_MAX_AGE", "BRAINBOT_IMAGE_MAX_MB", c.ImageRetention},
	} {
		if r.retention.MaxAge < 0 {
			bad(r.ageEnv, r.retention.MaxAge.String(), "must not be negative")
		}
		if r.retention.MaxBytes < 0 {
			bad(r.mbEnv, formatMB(r.retention.MaxBytes), "must not be negative")
		}
	}
	return errors.Join(errs...)
}

// normalize puts valid settings in the form the rest of the program
// needs: absolute folders (the CLI's working dirs and the MCP servers it
// spawns run elsewhere) and a Bot API URL without a trailing slash.
func (c *Config) normalize() error {
	var err error
	if c.DataDir, err = filepath.Abs(c.DataDir); err != nil {
		return fmt.Errorf("BRAINBOT_DATA (-data): %w", err)
	}
	if c.BrainsDir, err = filepath.Abs(c.BrainsDir); err != nil {
		return fmt.Errorf("BRAINBOT_BRAINS (-brains): %w", err)
	}
	if c.PanelsDir, err = filepath.Abs(c.PanelsDir); err != nil {
		return fmt.Errorf("BRAINBOT_PANELS (-panels): %w", err)
	}
	c.TelegramAPIURL = strings.TrimRight(c.TelegramAPIURL, "/")
	return nil
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// claudeBare decides BRAINBOT_CLAUDE_BARE. --bare starts the CLI faster
// and skips hooks, plugins and memory files altogether, but authenticates
// only with an API key or a cloud provider; auto uses it whenever one of
// those is configured, so CLAUDE_CODE_OAUTH_TOKEN keeps working without it.
func claudeBare(setting string, getenv func(string) string) bool {
	switch setting {
	case "on":
		return true
	case "off":
		return false
	}
	for _, v := range []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY"} {
		if getenv(v) != "" {
			return true
		}
	}
	return false
}

// defaultMaxWarm keeps as many processes as the box holds by doctor's
// count (keptCLIs: four fifths of its memory at twice an idle CLI's
// own each; 4 where the memory cannot be read): the pool's budget of
// the memory measured keeps them within what the box has as they grow.
func defaultMaxWarm() int {
	memory, _ := machineMemory()
	if memory <= 0 {
		return 4
	}
	return max(1, keptCLIs(memory, idleCLIOwnMB, cliSharedMB))
}

// defaultMaxClaude runs 4 Claude processes at once, or as many as the
// box holds answering where that is fewer (answeringCLIs: 3 on 1 GB).
func defaultMaxClaude() int {
	memory, _ := machineMemory()
	if memory <= 0 {
		return maxAnswering
	}
	return answeringCLIs(memory, idleCLIOwnMB, cliSharedMB)
}

// adminSocket is the admin socket's path.
func (c Config) adminSocket() string {
	return cmp.Or(c.AdminSocket, filepath.Join(c.DataDir, admin.SocketName))
}

// minAdminToken is the shortest BRAINBOT_ADMIN_TOKEN taken: a guessable
// one would open the bots' names, costs and conversations' metadata.
const minAdminToken = 16

// isLoopback says whether a listen host only this machine reaches: a
// loopback IP or localhost. An empty host or 0.0.0.0 listens on every
// interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
