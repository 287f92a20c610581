package main

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"brainbot/bot/brain"
)

// The files an admin installs from deploy/ are checked here: systemd reads
// them with rules of its own (no comment after a value, no `export`), and
// they must agree with what brainbot does.

const (
	unitFile    = "../../deploy/brainbot.service"
	envFile     = "../../deploy/brainbot.env.example"
	exampleDir  = "../../brains"
	stateFolder = "/var/lib/"
)

// unitLine is one KEY=value line of a unit file.
type unitLine struct {
	section, key, value string
	line                int
}

// parseUnit reads a unit file as systemd does, and fails on what systemd
// would read differently from what its author meant.
func parseUnit(t *testing.T, path string) []unitLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []unitLine
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		switch {
		case text == "" || text[0] == '#' || text[0] == ';':
			continue
		case strings.HasPrefix(text, "[") && strings.HasSuffix(text, "]"):
			section = text
			continue
		}
		key, value, ok := strings.Cut(text, "=")
		if !ok {
			t.Errorf("%s:%d: not KEY=value: %q", path, n, text)
			continue
		}
		if hasInlineComment(value) {
			t.Errorf("%s:%d: a comment after a value is part of the value in systemd: %q", path, n, text)
		}
		lines = append(lines, unitLine{section, key, value, n})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

var inlineComment = regexp.MustCompile(`\s[#;]`)

func hasInlineComment(value string) bool { return inlineComment.MatchString(value) }

func unitValues(lines []unitLine, section, key string) []string {
	var values []string
	for _, l := range lines {
		if l.section == section && l.key == key {
			values = append(values, l.value)
		}
	}
	return values
}

func TestSystemdUnit(t *testing.T) {
	lines := parseUnit(t, unitFile)
	one := func(section, key string) string {
		t.Helper()
		v := unitValues(lines, section, key)
		if len(v) != 1 {
			t.Errorf("%s %s= is set %d times, want once", section, key, len(v))
			return ""
		}
		return v[0]
	}
	for key, want := range map[string]string{
		"User":                     "brainbot",
		"NoNewPrivileges":          "yes",
		"ProtectSystem":            "strict",
		"PrivateTmp":               "yes",
		"ProtectHome":              "yes",
		"KillSignal":               "SIGTERM",
		"Restart":                  "on-failure",
		"RestartPreventExitStatus": strconv.Itoa(exitUsage), // run's "not started: configuration problem"
	} {
		if got := one("[Service]", key); got != want {
			t.Errorf("[Service] %s=%s, want %s", key, got, want)
		}
	}
	state := stateFolder + one("[Service]", "StateDirectory")
	if got := one("[Service]", "WorkingDirectory"); got != state {
		t.Errorf("WorkingDirectory=%s, want the state folder %s", got, state)
	}
	env := map[string]string{}
	for _, kv := range unitValues(lines, "[Service]", "Environment") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	// brainbot's HOME and the data folder, where each bot's CLI has its
	// own, are in the state folder: the one writable place.
	if env["HOME"] != state || !strings.HasPrefix(env["BRAINBOT_DATA"], state) {
		t.Errorf("HOME=%s and BRAINBOT_DATA=%s, want both in the state folder %s", env["HOME"], env["BRAINBOT_DATA"], state)
	}
	if f := one("[Service]", "EnvironmentFile"); !filepath.IsAbs(f) {
		t.Errorf("EnvironmentFile=%s, want an absolute path", f)
	}
	if exec := one("[Service]", "ExecStart"); !strings.HasSuffix(exec, "/brainbot run") {
		t.Errorf("ExecStart=%s, want .../brainbot run", exec)
	}
	stop, err := time.ParseDuration(one("[Service]", "TimeoutStopSec"))
	if grace, _ := time.ParseDuration(lookupSetting("BRAINBOT_GRACE").def); err != nil || stop <= grace {
		t.Errorf("TimeoutStopSec=%v (%v), want more than BRAINBOT_GRACE's default %v", stop, err, grace)
	}
	if one("[Install]", "WantedBy") == "" {
		t.Error("no [Install] WantedBy=: systemctl enable would not start it at boot")
	}
}

// systemd-analyze verify reads the unit as systemd would; any message it
// prints is a mistake (it exits 0 on most of them).
func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd); the unit is still parsed by TestSystemdUnit")
	}
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	// verify wants ExecStart's program to exist: use this test binary.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit = regexp.MustCompile(`(?m)^ExecStart=\S+`).ReplaceAll(unit, []byte("ExecStart="+self))
	// The lines shown commented out must work once uncommented.
	unit = regexp.MustCompile(`(?m)^#(LoadCredential=)`).ReplaceAll(unit, []byte("$1"))
	path := filepath.Join(t.TempDir(), "brainbot.service")
	if err := os.WriteFile(path, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// envAssignment is a line systemd reads as intended, and a shell as well:
// KEY=value with nothing to quote.
var envAssignment = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=([^\s"'#;\\$]*)$`)

// envKey starts a line meant as an assignment, commented out or not.
var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func TestEnvironmentFileExample(t *testing.T) {
	data, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		// A commented-out assignment must work once uncommented.
		text, commented := strings.CutPrefix(line, "#")
		if line == "" || commented && !envKey.MatchString(text) {
			continue
		}
		m := envAssignment.FindStringSubmatch(text)
		if m == nil {
			t.Errorf("%s:%d: want plain KEY=value (no export, quotes, spaces or comments after it): %q", envFile, n+1, line)
			continue
		}
		keys[m[1]] = true
		if strings.HasPrefix(m[1], "BRAINBOT_") && !slices.ContainsFunc(settings, func(s setting) bool { return s.env == m[1] }) {
			t.Errorf("%s:%d: %s is not a brainbot setting", envFile, n+1, m[1])
		}
	}
	brains, err := brain.LoadDir(exampleDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range brains {
		if !keys[b.Telegram.TokenEnv] {
			t.Errorf("%s does not show %s, the token variable of the example brain %s", envFile, b.Telegram.TokenEnv, b.ID)
		}
	}
	for _, k := range []string{"CLAUDE_CMD", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"} {
		if !keys[k] {
			t.Errorf("%s does not show %s", envFile, k)
		}
	}

	// What the file sets, as -env-file reads it: the unit's folders (so
	// admin commands given the file find them), and metrics on loopback.
	set, err := readEnvFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range unitValues(parseUnit(t, unitFile), "[Service]", "Environment") {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "BRAINBOT_") && !slices.Contains(set, kv) {
			t.Errorf("%s does not set %s as the unit does", envFile, kv)
		}
	}
	addr, _ := lookupIn(set, "BRAINBOT_HTTP_ADDR")
	if host, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(host).IsLoopback() {
		t.Errorf("%s sets BRAINBOT_HTTP_ADDR=%q, want metrics on by default, on loopback", envFile, addr)
	}
}
