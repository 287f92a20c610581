// Package claudetest holds test doubles for the Claude Code CLI, for the
// tests of this module and the offline demo:
//
//   - the fake CLI below, for unit tests that need no real CLI;
//   - Model, a scripted Anthropic Messages API that the REAL CLI talks to
//     (see its doc for the script), with CLIPath/RequireCLI to find the CLI
//     `make test` installs, CLIRun to drive it turn by turn, and stand-in
//     MCP servers for tests that do not build brainbot;
//   - ProcessesWithEnv and ProcessesUnder, to prove no CLI or MCP server
//     outlived a request.
//
// # Fake CLI
//
// The fake CLI is the test binary itself acting as `claude` (the helper
// process pattern of os/exec's tests). A test package opts in with
//
//	func TestMain(m *testing.M) {
//		claudetest.RunFakeCLIIfRequested()
//		os.Exit(m.Run())
//	}
//
// and configures the driver with Command: os.Args[0] and
// Env: claudetest.FakeCLIEnv(). The fake accepts exactly the flags the
// driver passes (an unknown flag, --dangerously-skip-permissions included,
// makes it exit 1 like a usage error) and insists on the ones the driver
// must pass. It speaks stream-json shaped like Claude Code 2.1.328:
// system/init at the start of every turn, assistant messages, user
// tool_result messages, a result per turn; it keeps reading stdin after a
// result and exits when stdin is closed (status 1 if a turn failed).
//
// Like the real CLI it refuses to run when CLAUDECODE is set (as inside a
// Claude Code session).
//
// Sessions live in files under <working dir>/.fake-sessions/<id>:
// --session-id creates one (an existing id is refused), --resume of an
// unknown id prints an error_during_execution result and then "No
// conversation found with session ID: <id>" on stderr, and exits 1, as the
// real CLI does (HoldStderrEnv holds that stderr line back). A
// user message is answered "You said: <text>", followed by
// " (message N)" when it is the N-th message (N > 1) of the session, so a
// resume is visible. A message whose text starts with "/" is answered
// "/<name> isn't available in this environment.", as the real CLI run
// with --disable-slash-commands (which the fake insists on) answers it.
//
// The --mcp-config must name our two servers over HTTP on loopback with a
// bearer token, as the driver writes it. Like the real CLI, the fake
// connects to them as it starts, before it reads any input (an MCP
// initialize request to each, in the background; failures are ignored),
// unless NoConnectEnv is set: a CLI stuck in its start-up. A message naming
// mcp__tts__text_to_speech or mcp__image-gen__generate_image is a turn 2:
// the fake reads the JSON arguments object from the line that starts with
// "{", calls the tool on its server with the configured headers (mcp-go's
// streamable HTTP client) as the real CLI does, and answers with a
// tool_use, a tool_result carrying the server's answer and a short text.
// A tool missing from --allowedTools is denied as the real CLI denies it.
//
// --max-turns ends a turn needing more model round trips (a tool call and
// the answer to its result are two) with an error_max_turns result;
// --max-budget-usd ends the turn whose running cost (0.0025 a turn) passes
// it with error_max_budget_usd, as the real CLI does.
//
// Directives in the text of a turn-1 message select behaviours:
//
//	#fail       the turn ends in an is_error result "API Error: 400 ..."
//	#hang       after init print nothing more and never exit until killed
//	#exit       after init write a stderr line and exit with status 3
//	#garbage    print a line that is not JSON before the reply
//	#unknown    mix four events of types the driver skips into the turn
//	#ignoreterm ignore SIGTERM, then hang
//	#grandchild start a grandchild process that inherits stdout, then hang
//	#setsid     start a grandchild detached in a session of its own, its
//	            standard files closed, and reply "grandchild <pid>"
//	#note       reply "note: <the message's note>": the text block of
//	            brainbot's that may open a message (sysprompt.Note), or
//	            "none"
//	#slow       wait about a second before replying
//	#stoppable  go on until the next stdin line, an interrupt control
//	            request, then end the turn as the real CLI does
//	            (error_during_execution) and keep running
//	#long       reply with 6000 characters in paragraphs
//	#empty      reply with no text at all
//	#env        reply with the fake's environment, one NAME=value a line,
//	            sorted
//	#calltool   turn 1 calls each allowed tool on its own (filename
//	            "turn1-own-choice") before replying
//	#notool     turn 2 answers with text and calls no tool
//	#toolerror  turn 2's tool_result is an error
//	#denied     turn 2's tool call is refused (system/permission_denied and
//	            the result's permission_denials)
//
// FakeProcesses lists the fake CLIs (and their grandchildren) this test
// binary started that are still alive, for leak checks.
package claudetest

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"brainbot/sysprompt"
	"brainbot/toolspec"
)

const (
	// fakeEnv makes the test binary act as the CLI ("1") or as the idle
	// grandchild of #grandchild ("grandchild").
	fakeEnv = "BRAINBOT_FAKE_CLAUDE"
	// ownerEnv marks every fake process with the pid of the test binary
	// that started it, so FakeProcesses finds them even after they have
	// been re-parented.
	ownerEnv = "BRAINBOT_FAKE_CLAUDE_OWNER"
	// StartupErrorEnv, when set, makes the fake CLI fail before its
	// system/init with an error_during_execution result carrying the
	// variable's value as its error, and exit 1: a failure at start that
	// is not an unknown session.
	StartupErrorEnv = "BRAINBOT_FAKE_CLAUDE_STARTUP_ERROR"
	// HoldStderrEnv, when set, makes a failed start (an unknown --resume
	// id, StartupErrorEnv) write its stderr line only once stdin is
	// closed, after its result line: see fakeCLI.lastWords.
	HoldStderrEnv = "BRAINBOT_FAKE_CLAUDE_HOLD_STDERR"
	// SessionsEnv set to "real" makes the fake keep its sessions where the
	// real CLI does (<CLAUDE_CONFIG_DIR or $HOME/.claude>/projects/<cwd
	// slug>/<id>.jsonl, see claude.SessionFile), so that moving that file
	// moves the session, as brainbot's cluster mode does.
	SessionsEnv = "BRAINBOT_FAKE_CLAUDE_SESSIONS"
	// DelayEnv, a duration, makes every turn take that long (benchmarks).
	DelayEnv = "BRAINBOT_FAKE_CLAUDE_DELAY"
	// NoConnectEnv, when set, makes the fake skip connecting to its MCP
	// servers as it starts: to the driver, a CLI whose start-up hangs.
	NoConnectEnv = "BRAINBOT_FAKE_CLAUDE_NO_CONNECT"

	fakeModel = "claude-fake-1"
	turnCost  = 0.0025
)

// FakeCLIEnv returns the environment entries that make the test binary,
// started as the CLI, act as the fake CLI.
func FakeCLIEnv() []string {
	return []string{fakeEnv + "=1", ownerEnv + "=" + strconv.Itoa(os.Getpid())}
}

// RunFakeCLIIfRequested acts as the fake CLI and exits when the
// environment asks for it (see FakeCLIEnv); otherwise it returns at once.
// Call it first in TestMain.
func RunFakeCLIIfRequested() {
	switch os.Getenv(fakeEnv) {
	case "1":
		os.Exit(runFakeCLI(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	case "grandchild":
		hang()
	}
}

// FakeProcesses returns the pids of live processes started (directly or
// not) as fake CLIs by this test binary.
func FakeProcesses() []int {
	var pids []int
	for _, p := range ProcessesWithEnv(ownerEnv + "=" + strconv.Itoa(os.Getpid())) {
		pids = append(pids, p.PID)
	}
	return pids
}

func hang() {
	for {
		time.Sleep(time.Hour)
	}
}

// options are the CLI flags the driver passes.
type options struct {
	print, verbose, strictMCP, noSlash       bool
	inputFormat, outputFormat                string
	sessionID, resume                        string
	systemPromptFile, snapshot, model, tools string
	mcpConfig, allowedTools, permissionMode  string
	settingSources                           string
	toolsSet                                 bool
	servers                                  map[string]mcpServer
	maxTurns                                 int
	maxBudget                                float64
	partial                                  bool
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("claude", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.print, "p", false, "print mode")
	fs.BoolVar(&o.verbose, "verbose", false, "verbose")
	fs.BoolVar(&o.partial, "include-partial-messages", false, "stream_event deltas")
	fs.BoolVar(&o.strictMCP, "strict-mcp-config", false, "only --mcp-config servers")
	fs.BoolVar(&o.noSlash, "disable-slash-commands", false, "no skills or commands")
	fs.StringVar(&o.settingSources, "setting-sources", "user,project,local", "settings read")
	fs.Bool("bare", false, "minimal mode")
	fs.StringVar(&o.inputFormat, "input-format", "text", "input format")
	fs.StringVar(&o.outputFormat, "output-format", "text", "output format")
	fs.StringVar(&o.sessionID, "session-id", "", "new session id")
	fs.StringVar(&o.resume, "resume", "", "session to resume")
	fs.StringVar(&o.systemPromptFile, "system-prompt-file", "", "system prompt file")
	fs.StringVar(&o.snapshot, "system-prompt-snapshot", "on", "on|off")
	fs.StringVar(&o.model, "model", fakeModel, "model")
	fs.StringVar(&o.tools, "tools", "default", "built-in tools")
	fs.StringVar(&o.mcpConfig, "mcp-config", "", "MCP config file")
	fs.StringVar(&o.allowedTools, "allowedTools", "", "allowed tools")
	fs.StringVar(&o.permissionMode, "permission-mode", "default", "permission mode")
	fs.IntVar(&o.maxTurns, "max-turns", 0, "model round trips per turn")
	fs.Float64Var(&o.maxBudget, "max-budget-usd", 0, "spending limit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	fs.Visit(func(f *flag.Flag) {
		o.toolsSet = o.toolsSet || f.Name == "tools"
	})
	var problems []string
	check := func(ok bool, problem string) {
		if !ok {
			problems = append(problems, problem)
		}
	}
	check(fs.NArg() == 0, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	check(o.print, "-p is required")
	check(o.inputFormat == "stream-json" && o.outputFormat == "stream-json", "stream-json input and output are required")
	check(o.verbose, "--output-format=stream-json requires --verbose")
	check((o.sessionID == "") != (o.resume == ""), "exactly one of --session-id and --resume is required")
	check(o.sessionID == "" || uuid.Validate(o.sessionID) == nil, "--session-id must be a valid UUID")
	// The driver's prompt is never on the command line, where any local
	// user reads it.
	_, statErr := os.Stat(o.systemPromptFile)
	check(o.systemPromptFile != "" && statErr == nil, "--system-prompt-file naming a readable file is required")
	check(o.snapshot == "off", "--system-prompt-snapshot off is required")
	check(o.toolsSet && o.tools == "", `--tools "" is required`)
	check(o.strictMCP, "--strict-mcp-config is required")
	check(o.noSlash, "--disable-slash-commands is required")
	check(o.settingSources == "user", "--setting-sources user is required")
	check(o.permissionMode == "dontAsk", "--permission-mode dontAsk is required")
	servers, err := readMCPConfig(o.mcpConfig)
	if err != nil {
		problems = append(problems, err.Error())
	}
	o.servers = servers
	if len(problems) > 0 {
		return o, errors.New(strings.Join(problems, "; "))
	}
	return o, nil
}

// mcpServer is an --mcp-config entry the way the driver writes them.
type mcpServer struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// readMCPConfig insists on our two servers over HTTP with a bearer token.
func readMCPConfig(path string) (map[string]mcpServer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--mcp-config: %w", err)
	}
	var cfg struct {
		MCPServers map[string]mcpServer `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("--mcp-config: %w", err)
	}
	for _, name := range []string{toolspec.SpeechServer, toolspec.ImageServer} {
		s, ok := cfg.MCPServers[name]
		if !ok || s.Type != "http" || !strings.HasPrefix(s.URL, "http://127.0.0.1:") || !strings.HasPrefix(s.Headers["Authorization"], "Bearer ") {
			return nil, fmt.Errorf("--mcp-config: server %q missing or not a loopback http server with a bearer token", name)
		}
	}
	return cfg.MCPServers, nil
}

// fakeCLI is one run of the fake.
type fakeCLI struct {
	opts       options
	stdout     io.Writer
	stderr     io.Writer
	sessionID  string
	sessions   string // the session files' folder
	sessionExt string // their extension
	directives map[string]bool
	firstText  string           // the first turn-1 text, for image prompts
	denials    []map[string]any // of the current turn, for its result
	failed     bool
	seq        int
	cost       float64 // spent so far by this process
}

func runFakeCLI(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if os.Getenv("CLAUDECODE") != "" {
		// The real CLI refuses to run nested in a Claude Code session.
		fmt.Fprintln(stderr, "Error: Claude Code cannot be launched inside another Claude Code session.")
		return 1
	}
	opts, err := parseOptions(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	c := &fakeCLI{opts: opts, stdout: stdout, stderr: stderr, sessions: ".fake-sessions", directives: map[string]bool{}}
	if os.Getenv(SessionsEnv) == "real" {
		c.sessions, c.sessionExt = realSessions(), ".jsonl"
	}
	if msg := os.Getenv(StartupErrorEnv); msg != "" {
		c.emit(c.resultEvent(resultFields{subtype: "error_during_execution", isError: true, errors: []string{msg}}))
		c.lastWords(stdin, "Error: "+msg)
		return 1
	}
	if err := c.openSession(stdin); err != nil {
		return 1
	}
	if os.Getenv(NoConnectEnv) == "" {
		go c.connectServers()
	}
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for in.Scan() {
		note, text, id, err := userText(in.Bytes())
		if err != nil {
			fmt.Fprintln(stderr, "error: bad stream-json input:", err)
			return 1
		}
		n, err := c.countMessage()
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		c.emit(c.initEvent())
		if strings.Contains(text, "#stoppable") {
			if !c.awaitInterrupt(in) {
				return 1
			}
			continue
		}
		if name, command := strings.CutPrefix(text, "/"); command {
			// As the real CLI run with --disable-slash-commands answers
			// a message that reads as a command: the model never sees it.
			name, _, _ = strings.Cut(name, " ")
			c.emit(c.resultEvent(resultFields{subtype: "success", result: "/" + name + " isn't available in this environment."}))
			continue
		}
		if strings.Contains(text, toolspec.SpeechTool) || strings.Contains(text, toolspec.ImageTool) {
			c.toolTurn(text)
		} else {
			c.textTurn(note, text, n)
		}
		if id != "" {
			// As CLI 2.1.328 does for a message with a uuid: a line
			// after the turn's result, which a warm process's next
			// request reads first.
			c.emit(map[string]any{"type": "command_lifecycle", "command_uuid": id, "state": "completed",
				"uuid": uuid.NewString(), "session_id": c.sessionID})
		}
	}
	if c.failed {
		return 1
	}
	return 0
}

// awaitInterrupt runs a turn that goes on until the next stdin line, which
// must be an interrupt control request: it is answered as CLI 2.1.328
// answers one (control_response, a user event, an error_during_execution
// result), and the process goes on.
func (c *fakeCLI) awaitInterrupt(in *bufio.Scanner) bool {
	if !in.Scan() {
		return false
	}
	var ctl struct {
		Type      string `json:"type"`
		RequestID string `json:"request_id"`
		Request   struct {
			Subtype string `json:"subtype"`
		} `json:"request"`
	}
	if err := json.Unmarshal(in.Bytes(), &ctl); err != nil || ctl.Type != "control_request" || ctl.Request.Subtype != "interrupt" || ctl.RequestID == "" {
		fmt.Fprintf(c.stderr, "error: want an interrupt control request with a request_id, got %s\n", in.Bytes())
		return false
	}
	c.emit(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": ctl.RequestID}})
	c.emit(map[string]any{"type": "user", "session_id": c.sessionID,
		"message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "[Request interrupted by user]"}}}})
	c.emit(c.resultEvent(resultFields{subtype: "error_during_execution", isError: true, turns: 1,
		errors: []string{"[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=null"}}))
	return true
}

func (c *fakeCLI) sessionFile() string { return filepath.Join(c.sessions, c.sessionID+c.sessionExt) }

// realSessions is the real CLI's session folder for the working directory.
func realSessions() string {
	dir := os.Getenv("CLAUDE_CONFIG_DIR")
	if dir == "" {
		dir = filepath.Join(os.Getenv("HOME"), ".claude")
	}
	slug := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, mustGetwd())
	return filepath.Join(dir, "projects", slug)
}

// openSession creates or finds the session as the real CLI would.
func (c *fakeCLI) openSession(stdin io.Reader) error {
	if c.opts.resume != "" {
		c.sessionID = c.opts.resume
		if _, err := os.Stat(c.sessionFile()); err != nil {
			msg := "No conversation found with session ID: " + c.sessionID
			c.emit(c.resultEvent(resultFields{subtype: "error_during_execution", isError: true, errors: []string{msg}, turns: 0}))
			c.lastWords(stdin, msg)
			return err
		}
		return nil
	}
	c.sessionID = c.opts.sessionID
	if _, err := os.Stat(c.sessionFile()); err == nil {
		fmt.Fprintf(c.stderr, "Error: Session ID %s is already in use.\n", c.sessionID)
		return os.ErrExist
	}
	if err := os.MkdirAll(c.sessions, 0o700); err != nil {
		fmt.Fprintln(c.stderr, "error:", err)
		return err
	}
	return os.WriteFile(c.sessionFile(), []byte("0"), 0o600)
}

// lastWords writes msg on stderr before a failed start exits. The real
// CLI writes it after its result line; with HoldStderrEnv set the fake
// writes it only once its stdin is closed, the latest a CLI can, so a
// driver that assembles its error at the result line loses it every time.
func (c *fakeCLI) lastWords(stdin io.Reader, msg string) {
	if os.Getenv(HoldStderrEnv) != "" {
		_, _ = io.Copy(io.Discard, stdin)
	}
	fmt.Fprintln(c.stderr, msg)
}

// countMessage records one more user message in the session file and
// returns how many the session holds now.
func (c *fakeCLI) countMessage() (int, error) {
	data, err := os.ReadFile(c.sessionFile())
	if err != nil {
		return 0, err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	n++
	return n, os.WriteFile(c.sessionFile(), []byte(strconv.Itoa(n)), 0o600)
}

// userText checks a stdin line is a stream-json user message with one
// text block, after a note of brainbot's (sysprompt.Note) or not, and a
// uuid or not, and returns the note, the text and the uuid.
func userText(line []byte) (note, text, id string, err error) {
	var msg struct {
		Type    string `json:"type"`
		Message struct {
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"message"`
		ParentToolUseID *string `json:"parent_tool_use_id"`
		SessionID       *string `json:"session_id"`
		// UUID names the message in the transcript, as the real CLI
		// takes it (claude.Request.MessageID).
		UUID string `json:"uuid"`
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&msg); err != nil {
		return "", "", "", err
	}
	content := msg.Message.Content
	if len(content) == 2 && content[0].Type == "text" && sysprompt.IsNote(content[0].Text) {
		note, content = content[0].Text, content[1:]
	}
	if msg.Type != "user" || msg.Message.Role != "user" || len(content) != 1 ||
		content[0].Type != "text" || msg.ParentToolUseID != nil || msg.SessionID == nil ||
		msg.UUID != "" && uuid.Validate(msg.UUID) != nil {
		return "", "", "", fmt.Errorf("not a user message with one text block: %s", line)
	}
	return note, content[0].Text, msg.UUID, nil
}

func parseDirectives(text string) map[string]bool {
	d := map[string]bool{}
	for _, f := range strings.Fields(text) {
		if strings.HasPrefix(f, "#") {
			d[f] = true
		}
	}
	return d
}

func (c *fakeCLI) textTurn(note, text string, n int) {
	if d, err := time.ParseDuration(os.Getenv(DelayEnv)); err == nil {
		time.Sleep(d)
	}
	c.directives = parseDirectives(text)
	if c.firstText == "" {
		c.firstText = text
	}
	d := c.directives
	switch {
	case d["#exit"]:
		fmt.Fprintln(c.stderr, "fake claude: simulated crash")
		os.Exit(3)
	case d["#hang"]:
		hang()
	case d["#ignoreterm"]:
		signal.Ignore(syscall.SIGTERM)
		hang()
	case d["#grandchild"]:
		c.startGrandchild()
		hang()
	}
	if d["#slow"] {
		time.Sleep(time.Second)
	}
	if d["#garbage"] {
		fmt.Fprintln(c.stdout, "this is not JSON {")
	}
	c.emitUnknown()
	if d["#calltool"] {
		// Like a model that uses an allowed tool unasked in turn 1.
		for _, tool := range []string{toolspec.SpeechTool, toolspec.ImageTool} {
			if c.allowed(tool) {
				c.useTool(tool, map[string]any{"text": text, "prompt": text, "filename": "turn1-own-choice"})
			}
		}
		if c.stoppedAtMaxTurns(2) {
			return
		}
	}
	if d["#fail"] {
		msg := `API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":"fake failure"}}`
		c.emit(c.assistant(textBlock(msg)))
		c.emit(c.resultEvent(resultFields{subtype: "success", isError: true, result: msg, turns: 1}))
		c.failed = true
		return
	}
	reply := "You said: " + text
	if n > 1 {
		reply += fmt.Sprintf(" (message %d)", n)
	}
	switch {
	case d["#long"]:
		reply = longReply()
	case d["#empty"]:
		reply = ""
	case d["#env"]:
		env := os.Environ()
		slices.Sort(env)
		reply = strings.Join(env, "\n")
	case d["#setsid"]:
		reply = c.startDetached()
	case d["#note"]:
		reply = "note: " + cmp.Or(note, "none")
	}
	if reply != "" {
		c.stream(reply)
		c.emit(c.assistant(textBlock(reply)))
	}
	c.emitUnknown()
	c.emit(c.resultEvent(resultFields{subtype: "success", result: reply, turns: 1, denials: c.denials}))
	c.denials = nil
}

// stoppedAtMaxTurns ends the turn as the real CLI does when it needs
// rounds model round trips and --max-turns allows fewer: the result
// error_max_turns, after the tool ran.
func (c *fakeCLI) stoppedAtMaxTurns(rounds int) bool {
	if c.opts.maxTurns <= 0 || rounds <= c.opts.maxTurns {
		return false
	}
	c.emit(c.resultEvent(resultFields{subtype: "error_max_turns", isError: true, turns: rounds,
		errors: []string{fmt.Sprintf("Reached maximum number of turns (%d)", c.opts.maxTurns)}}))
	c.failed = true
	return true
}

// emitUnknown writes two events of types the driver skips (#unknown).
func (c *fakeCLI) emitUnknown() {
	if !c.directives["#unknown"] {
		return
	}
	c.emit(map[string]any{"type": "system", "subtype": "status", "status": "requesting", "session_id": c.sessionID, "uuid": uuid.NewString()})
	c.emit(map[string]any{"type": "rate_limit_event", "rate_limit_info": map[string]any{"status": "allowed", "resetsAt": 1700000000}, "session_id": c.sessionID, "uuid": uuid.NewString()})
}

func (c *fakeCLI) startGrandchild() {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(c.stderr, "error:", err)
		return
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fakeEnv+"=grandchild")
	cmd.Stdout = os.Stdout // keeps the driver's stdout pipe open
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(c.stderr, "error:", err)
	}
}

// startDetached starts a grandchild the way a daemon leaves: a session
// and process group of its own, nothing of the CLI's open. Only its
// process's parent can still find it.
func (c *fakeCLI) startDetached() string {
	self, err := os.Executable()
	if err != nil {
		return "error: " + err.Error()
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fakeEnv+"=grandchild")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("grandchild %d", cmd.Process.Pid)
}

func longReply() string {
	var b strings.Builder
	for p := 0; b.Len() < 6000; p++ {
		if p > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "Paragraph %d. %s", p+1, strings.Repeat("This is a long answer that goes on. ", 12))
	}
	return b.String()[:6000]
}

// toolTurn answers a turn-2 message naming one of our tools.
func (c *fakeCLI) toolTurn(text string) {
	tool := toolspec.SpeechTool
	if strings.Contains(text, toolspec.ImageTool) {
		tool = toolspec.ImageTool
	}
	d := c.directives
	if d["#notool"] {
		reply := "I would rather just talk."
		c.emit(c.assistant(textBlock(reply)))
		c.emit(c.resultEvent(resultFields{subtype: "success", result: reply, turns: 1}))
		return
	}
	args, err := toolArgs(text)
	if err != nil {
		fmt.Fprintln(c.stderr, "fake claude: no tool arguments in the message:", err)
		args = map[string]any{}
	}
	if tool == toolspec.ImageTool {
		args["prompt"] = "An illustration of: " + c.firstText
	}
	failed := c.useTool(tool, args)
	if c.stoppedAtMaxTurns(2) { // the call, and the answer to its result
		return
	}
	reply := "Done."
	if failed {
		reply = "The tool did not work."
	}
	c.emit(c.assistant(textBlock(reply)))
	c.emit(c.resultEvent(resultFields{subtype: "success", result: reply, turns: 2, denials: c.denials}))
	c.denials = nil
}

// useTool emits a tool_use of tool and its tool_result (and a denial when
// the tool is not allowed or #denied is set); it reports whether the call
// failed.
func (c *fakeCLI) useTool(tool string, args map[string]any) (failed bool) {
	d := c.directives
	input, _ := json.Marshal(args)
	id := "toolu_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:24]
	c.emit(c.assistant(map[string]any{"type": "tool_use", "id": id, "name": tool, "input": json.RawMessage(input)}))

	var content string
	isError := true
	switch {
	case d["#denied"] || !c.allowed(tool):
		content = fmt.Sprintf("Claude requested permissions to use %s, but you haven't granted it yet.", tool)
		c.emit(map[string]any{"type": "system", "subtype": "permission_denied", "tool_name": tool, "tool_use_id": id,
			"decision_reason_type": "mode", "message": content, "uuid": uuid.NewString(), "session_id": c.sessionID})
		c.denials = append(c.denials, map[string]any{"tool_name": tool, "tool_use_id": id, "tool_input": json.RawMessage(input)})
	case d["#toolerror"]:
		content = "Error: the OpenAI request failed with status 500"
	default:
		content, isError = c.callTool(tool, args)
	}
	c.emit(c.toolResult(id, content, isError))
	return isError
}

func (c *fakeCLI) allowed(tool string) bool {
	for _, t := range strings.FieldsFunc(c.opts.allowedTools, func(r rune) bool { return r == ',' || r == ' ' }) {
		if t == tool {
			return true
		}
	}
	return false
}

// toolArgs reads the JSON object on the line of the message that starts
// with "{".
func toolArgs(text string) (map[string]any, error) {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "{") {
			var args map[string]any
			err := json.Unmarshal([]byte(line), &args)
			return args, err
		}
	}
	return nil, errors.New("no line starts with {")
}

// connectServers connects to each of our MCP servers, as the real CLI
// does as it starts.
func (c *fakeCLI) connectServers() {
	for _, server := range []string{toolspec.SpeechServer, toolspec.ImageServer} {
		if mc, err := c.connect(server, time.Minute); err == nil {
			mc.Close()
		}
	}
}

// connect opens an MCP session with server from --mcp-config, with the
// configured headers, as the real CLI does.
func (c *fakeCLI) connect(server string, timeout time.Duration) (*client.Client, error) {
	s := c.opts.servers[server]
	mc, err := client.NewStreamableHttpClient(s.URL, transport.WithHTTPHeaders(s.Headers))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var init mcpgo.InitializeRequest
	init.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcpgo.Implementation{Name: "claude-fake", Version: "2.1.328-fake"}
	if _, err := mc.Initialize(ctx, init); err != nil {
		mc.Close()
		return nil, fmt.Errorf("MCP server %s: %w", server, err)
	}
	return mc, nil
}

// callTool calls tool on its server, as the real CLI does; it returns the
// result's text and whether it is an error.
func (c *fakeCLI) callTool(tool string, args map[string]any) (string, bool) {
	server, name := toolspec.SpeechServer, toolspec.SpeechToolName
	if tool == toolspec.ImageTool {
		server, name = toolspec.ImageServer, toolspec.ImageToolName
	}
	// The driver bounds the fake.
	mc, err := c.connect(server, 5*time.Minute)
	if err != nil {
		return "Error: " + err.Error(), true
	}
	defer mc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var req mcpgo.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := mc.CallTool(ctx, req)
	if err != nil {
		return "Error: " + err.Error(), true
	}
	var texts []string
	for _, content := range res.Content {
		if tc, ok := mcpgo.AsTextContent(content); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n"), res.IsError
}

// emit writes one stdout line.
func (c *fakeCLI) emit(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		panic(err) // our own maps: cannot happen
	}
	_, _ = c.stdout.Write(append(line, '\n'))
}

func textBlock(text string) map[string]any { return map[string]any{"type": "text", "text": text} }

func (c *fakeCLI) initEvent() map[string]any {
	return map[string]any{
		"type": "system", "subtype": "init", "cwd": mustGetwd(), "session_id": c.sessionID,
		"tools": []string{toolspec.ImageTool, toolspec.SpeechTool}, "model": c.opts.model, "permissionMode": c.opts.permissionMode,
		"mcp_servers":    []map[string]string{{"name": toolspec.SpeechServer, "status": "connected"}, {"name": toolspec.ImageServer, "status": "connected"}},
		"slash_commands": []string{"compact", "context", "cost"}, "apiKeySource": "ANTHROPIC_API_KEY",
		"claude_code_version": "2.1.328-fake", "output_style": "default", "uuid": uuid.NewString(),
	}
}

func mustGetwd() string {
	wd, _ := os.Getwd()
	return wd
}

// stream sends text as the real CLI does with --include-partial-messages
// before the whole message: a text block's start, then its pieces.
func (c *fakeCLI) stream(text string) {
	if !c.opts.partial {
		return
	}
	event := func(ev map[string]any) {
		c.emit(map[string]any{"type": "stream_event", "event": ev, "session_id": c.sessionID, "parent_tool_use_id": nil, "uuid": uuid.NewString()})
	}
	event(map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	for len(text) > 0 {
		piece := text[:min(8, len(text))]
		for !utf8.ValidString(piece) && len(piece) < len(text) {
			piece = text[:len(piece)+1]
		}
		text = text[len(piece):]
		event(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": piece}})
	}
	event(map[string]any{"type": "content_block_stop", "index": 0})
}

func (c *fakeCLI) assistant(block map[string]any) map[string]any {
	c.seq++
	return map[string]any{
		"type": "assistant",
		"message": map[string]any{
			"id": fmt.Sprintf("msg_fake_%d", c.seq), "type": "message", "role": "assistant", "model": c.opts.model,
			"content": []any{block}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 12, "output_tokens": 34, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "service_tier": "standard"},
		},
		"parent_tool_use_id": nil, "session_id": c.sessionID, "uuid": uuid.NewString(),
	}
}

func (c *fakeCLI) toolResult(id, text string, isError bool) map[string]any {
	return map[string]any{
		"type": "user",
		"message": map[string]any{"role": "user", "content": []any{map[string]any{
			"tool_use_id": id, "type": "tool_result", "content": []any{textBlock(text)}, "is_error": isError,
		}}},
		"parent_tool_use_id": nil, "session_id": c.sessionID, "uuid": uuid.NewString(),
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano),
	}
}

type resultFields struct {
	subtype string
	isError bool
	result  string
	errors  []string
	turns   int
	denials []map[string]any
}

func (c *fakeCLI) resultEvent(f resultFields) map[string]any {
	// Like the real CLI, total_cost_usd is the process's running total,
	// not the turn's.
	if f.turns > 0 {
		c.cost += turnCost
	}
	cost := c.cost
	if b := c.opts.maxBudget; b > 0 && cost > b && !f.isError {
		// The turn ran; its result says the process is over budget.
		f.subtype, f.isError, f.errors = "error_max_budget_usd", true, []string{fmt.Sprintf("Reached maximum budget ($%g)", b)}
		c.failed = true
	}
	r := map[string]any{
		"type": "result", "subtype": f.subtype, "is_error": f.isError, "duration_ms": 12, "duration_api_ms": 10,
		"num_turns": f.turns, "session_id": c.sessionID, "total_cost_usd": cost,
		"usage":              map[string]any{"input_tokens": 12, "output_tokens": 34, "service_tier": "standard"},
		"modelUsage":         map[string]any{},
		"permission_denials": append([]map[string]any{}, f.denials...),
		"uuid":               uuid.NewString(),
	}
	if f.errors != nil {
		r["errors"] = f.errors
	}
	if f.subtype == "success" {
		r["result"] = f.result
	}
	return r
}
