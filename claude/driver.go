package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"brainbot/claude/cliproc"
	"brainbot/claude/pool"
	"brainbot/claude/streamjson"
	"brainbot/reaper"
	"brainbot/sysprompt"
	"brainbot/ticket"
	"brainbot/toolspec"
)

// Config configures a Driver.
type Config struct {
	// Command is the CLI to run (CLAUDE_CMD): a name looked up in PATH or
	// a path.
	Command string
	// DataDir is BRAINBOT_DATA (absolute): the CLI's working directories
	// and the per-process MCP configs live in DataDir/claude.
	DataDir string
	// ToolsURL is the base URL of brainbot's MCP tool server
	// (mcp.ListenHTTP), and Tickets authorises its calls: the driver opens
	// a ticket for the one call a request's turn two makes.
	ToolsURL string
	Tickets  *ticket.Registry
	// Environ is brainbot's environment, the CLI's is built from (cliEnv's
	// allow-list): the process's with the variables of its env file
	// (-env-file) after them. Nil: the process's (os.Environ).
	Environ []string
	// Env holds extra environment entries for the CLI; they win over
	// inherited ones (see cliEnv), the bot's HOME, CLAUDE_CONFIG_DIR and
	// TMPDIR aside (the driver's).
	Env []string
	// Launcher is brainbot's own executable. Every stdio MCP server of a
	// request is started through it (package launch), with only its own
	// env and a minimal base, never the CLI's environment. A request with
	// such a server fails without it.
	Launcher string
	// Warm keeps conversations' CLI processes alive between requests.
	Warm WarmConfig
	// Waiting says how many requests wait for a Claude slot (the caller's
	// queue, ahead of Run): spares start only when none does. Nil: none
	// ever waits.
	Waiting func() int
	// cpuBusy stands in for the pool's CPU gauge in tests
	// (pool.Config.CPUBusy): whether brainbot's CPUs are all wanted.
	cpuBusy func() bool
	// Reaper starts the CLIs, each tied to this process's life, and takes
	// care of what they leave behind when it adopts (package reaper):
	// brainbot's, which outlives the driver. Without one the driver has
	// its own, which does not adopt.
	Reaper *reaper.Reaper
	// Bare runs the CLI with --bare: it skips hooks, plugins, CLAUDE.md
	// files and auto-memory altogether (each bot's config folder has none
	// of them anyway) and starts faster (~20%). It authenticates only with
	// ANTHROPIC_API_KEY, an apiKeyHelper or a cloud provider, not with a
	// `claude` login.
	Bare bool
	// Speak, when set, starts speaking a speech request's answer while
	// turn one streams (package mcp's Speaker.Begin): turn two's tool
	// call then only collects the audio. Nil: the tool call speaks the
	// text it is passed, after turn one (the flow before 2026-11).
	Speak func(ctx context.Context, settings toolspec.SpeechSettings) Utterance
	Log   *zap.Logger
}

// Utterance is an answer spoken while it is written (*mcp.Utterance).
type Utterance interface {
	ticket.Utterance
	// Write takes turn one's text so far, Finish its final text.
	Write(text string)
	Finish(text string)
	// Cancel stops what is still being spoken and waits for it.
	Cancel()
}

// Driver runs requests through the CLI. It is safe for concurrent use, but
// the requests of one conversation must come one at a time. Close it to
// end the warm processes.
type Driver struct {
	cfg    Config
	mcpDir string // the per-process --mcp-config files
	tmpDir string // the per-process temporary folders
	log    *zap.Logger
	pool   *pool.Pool[*live, Request]
	procs  *reaper.Reaper
	// ownProcs: procs is the driver's own, closed with it.
	ownProcs bool
	// raiseFailed says once that a spare taken keeps its low priority.
	raiseFailed sync.Once
	// prompts are the system prompt files the CLIs read.
	prompts promptFiles
	// prepared holds the bots whose sessions were moved in (prepareBot).
	prepared struct {
		mu   sync.Mutex
		bots map[string]bool
	}
}

const (
	defaultInactivityTimeout = 120 * time.Second
	defaultMaxDuration       = 10 * time.Minute
	// noConversation is how the CLI says a --resume id is unknown.
	noConversation = "No conversation found with session ID"
)

// New checks cfg and prepares DataDir/claude/mcp for the CLIs' MCP
// configs, removing any a crashed brainbot left: their tokens are dead.
// It readies the folders of the bots that ran before (prepareBots).
func New(cfg Config) (*Driver, error) {
	switch {
	case cfg.Command == "":
		return nil, errors.New("claude: Config.Command is empty")
	case !filepath.IsAbs(cfg.DataDir):
		return nil, fmt.Errorf("claude: Config.DataDir %q is not an absolute path", cfg.DataDir)
	case cfg.ToolsURL == "" || cfg.Tickets == nil:
		return nil, errors.New("claude: Config.ToolsURL and Config.Tickets name the MCP tool server; both are needed")
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Environ == nil {
		cfg.Environ = os.Environ()
	}
	cfg.Warm = cfg.Warm.withDefaults()
	d := &Driver{cfg: cfg, log: cfg.Log,
		mcpDir: filepath.Join(cfg.DataDir, "claude", "mcp"), tmpDir: filepath.Join(cfg.DataDir, "claude", "tmp")}
	for _, dir := range []string{d.mcpDir, d.tmpDir} {
		if err := freshDir(dir); err != nil {
			return nil, err
		}
	}
	d.prepared.bots = map[string]bool{}
	if err := d.prepareBots(); err != nil {
		return nil, err
	}
	d.procs = cfg.Reaper
	if d.procs == nil {
		var err error
		if d.procs, err = reaper.New(false); err != nil {
			return nil, err
		}
		d.ownProcs = true
	}
	d.pool = d.newPool()
	return d, nil
}

// freshDir empties dir, or makes it: what is in it belonged to CLIs of an
// earlier brainbot, all gone.
func freshDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("claude: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("claude: %w", err)
	}
	return nil
}

// args is the CLI's command line for req, with the process's MCP config.
func (d *Driver) args(req Request, mcpConfig string) []string {
	// Partial messages: the text arrives as the model writes it, for
	// replies streamed to the chat (Request.OnText).
	args := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--include-partial-messages"}
	// None of the CLI's own commands (/config, /insights, /heapdump...):
	// a user's words are never one (asWords says how they stay words).
	args = append(args, "--disable-slash-commands")
	// Only the settings of the bot's own config folder, which brainbot
	// writes (botSettings), not those of the working directory.
	args = append(args, "--setting-sources", "user")
	if req.Resume {
		args = append(args, "--resume", req.SessionID)
	} else {
		args = append(args, "--session-id", req.SessionID)
	}
	// Snapshot off: the brain's current prompt applies on every resume,
	// so an edited brain reaches existing conversations. The values of its
	// per-message variables come with each message (Run).
	// The prompt is in a file of the bot's (promptfile.go), named by its
	// text: the command line is anyone's to read.
	args = append(args, "--system-prompt-file", promptFile(d.dirs(req.BotID).home, processPrompt(req)), "--system-prompt-snapshot", "off")
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	// No built-in tools: a Telegram user must never reach a shell, files
	// or the web on our server. Only our two MCP tools, which the CLI may
	// call at any time but the tool server serves only for the ticket the
	// driver opens in turn two (package ticket), and the tools the request
	// allows of its own servers.
	args = append(args, "--tools", "", "--strict-mcp-config", "--mcp-config", mcpConfig)
	if d.cfg.Bare {
		args = append(args, "--bare")
	}
	allowed := []string{toolspec.SpeechTool, toolspec.ImageTool}
	if req.Questions {
		allowed = append(allowed, toolspec.QuestionTool)
	}
	allowed = append(allowed, req.AllowedTools...)
	args = append(args, "--allowedTools", strings.Join(allowed, ","))
	if req.JSONSchema != "" {
		args = append(args, "--json-schema", req.JSONSchema)
	}
	if req.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(req.MaxTurns))
	}
	return append(args, "--permission-mode", "dontAsk")
}

func checkRequest(req Request) error {
	_, knownFormat := toolspec.SpeechExt(speechSettings(req).Format)
	switch {
	case req.Mode != Text && req.Mode != Speech && req.Mode != Image:
		return fmt.Errorf("claude: unknown mode %d", req.Mode)
	case (req.Resume || req.SessionID != "") && uuid.Validate(req.SessionID) != nil:
		return fmt.Errorf("claude: session id %q is not a UUID", req.SessionID)
	case req.BotID == "" || strings.ContainsAny(req.BotID, `/\`):
		return fmt.Errorf("claude: bot id %q cannot name a working directory", req.BotID)
	case req.Mode != Text && req.FilePrefix == "":
		return fmt.Errorf("claude: a %v request needs a file prefix", req.Mode)
	case req.JSONSchema != "" && req.Mode != Text:
		return fmt.Errorf("claude: a %v request cannot carry a JSON schema", req.Mode)
	case req.JSONSchema != "" && !json.Valid([]byte(req.JSONSchema)):
		return errors.New("claude: the request's JSON schema is not JSON")
	case req.Mode == Speech && !knownFormat:
		return fmt.Errorf("claude: unsupported speech format %q", req.Speech.Format)
	}
	for name := range req.MCPServers {
		if toolspec.OurServer(name) {
			return fmt.Errorf("claude: the request's MCP server %q would replace ours", name)
		}
	}
	return nil
}

// workDir is the CLI's working directory for a bot. The path must not
// change: the CLI finds a session to resume by its working directory.
func (d *Driver) workDir(botID string) string {
	return filepath.Join(d.cfg.DataDir, "claude", "bot-"+botID)
}

// Run runs req through the CLI and returns what it produced: in the
// conversation's warm process when one fits (see WarmConfig), else in a
// new one, kept warm afterwards when the request went well.
//
// On error the returned *Result is still non-nil when the CLI got as far
// as reporting something (e.g. the turn-1 text and session id of a speech
// request whose tool failed), so a caller can fall back to text; the error
// says what went wrong (see the Err* values and the *Error types).
func (d *Driver) Run(ctx context.Context, req Request) (*Result, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	d.pool.RequestStarted() // spares start when no request runs (package pool)
	defer d.pool.RequestEnded()
	if req.InactivityTimeout <= 0 {
		req.InactivityTimeout = defaultInactivityTimeout
	}
	if req.MaxDuration <= 0 {
		req.MaxDuration = defaultMaxDuration
	}
	log := d.log
	if req.Log != nil {
		log = req.Log.Named("claude")
	}
	// What varies per message goes with it: the process may have been
	// started before it (a spare) or for an earlier one (a warm process).
	note := strings.TrimSpace(sysprompt.Note(req.SystemPrompt, req.PromptVars) + "\n" + req.Context)
	first, err := encodeUserLine(req.MessageID, note, req.Prompt, req.Attachments...)
	if err != nil {
		return nil, err
	}
	res, stale, err := d.run(ctx, req, log, first, true)
	if stale {
		// The warm process or spare died before it said anything: the
		// request runs again in a new one, which resumes the session (or
		// starts one of its own).
		log.Info("claude: warm process or spare gone; starting a new one")
		req.Retry = true // it may have recorded the message before it died
		res, _, err = d.run(ctx, req, log, first, false)
	}
	return res, err
}

// run runs req in a CLI, a warm one if allowed and one fits. stale reports
// that a warm process turned out dead before it said anything.
func (d *Driver) run(ctx context.Context, req Request, log *zap.Logger, first []byte, allowWarm bool) (res *Result, stale bool, err error) {
	if err := d.rewind(&req, log); err != nil {
		return nil, false, err
	}
	cli, warm, err := d.acquire(ctx, req, allowWarm)
	if err != nil {
		return nil, false, err
	}
	req.SessionID = cli.sessionID // a new conversation's may be the driver's choice
	// The CLI's tool calls carry its token; none is served until turn two
	// opens the ticket, and a warm process's last ticket is withdrawn.
	cli.tools.Serve(log)
	if req.Questions {
		cli.tools.AllowQuestion()
	}
	if req.Memory && req.Notes.User != 0 {
		cli.tools.AllowMemory(req.Notes)
	}
	cli.costBase = cli.lastCost
	cli.interrupted.Store(false)

	x := &exchange{
		req:     req,
		tool:    req.Mode.tool(),
		cli:     cli,
		res:     &Result{Warm: warm, Spare: cli.spare},
		log:     log.With(zap.Stringer("mode", req.Mode), zap.String("session", req.SessionID), zap.Bool("resume", req.Resume), zap.Bool("warm", warm), zap.Bool("spare", cli.spare)),
		results: map[string]streamjson.Block{},
		turn:    1,
		begun:   time.Now(),
		started: func() {},
	}
	if !warm && !cli.spare {
		// Its start takes the CPU spares would: they wait for it.
		x.started = d.pool.ColdStart()
		defer x.started()
	}
	x.toolLog = newToolLog(x.log)
	x.turnStart = x.begun
	x.seenInit = warm // a warm process said init long ago
	if x.tool != "" {
		x.res.FilePrefix, x.res.FileExt = req.FilePrefix, fileExt(req)
	}
	if req.Mode == Speech && d.cfg.Speak != nil {
		x.speech = d.cfg.Speak(ctx, speechSettings(req))
		// Whatever happens, nothing is spoken after the request: a
		// stopped or failed turn leaves no file, what was spoken is billed.
		defer func() {
			x.speech.Cancel()
			if res != nil {
				res.SpokenChars = x.speech.Spoken()
			}
		}()
	}
	x.send(first)
	// Only now can Interrupt reach it: an interrupt written before the
	// request's line would find no turn to stop, and the turn would run.
	d.pool.Busy(req.Conversation, cli)
	abort := x.loop(ctx)
	if abort != nil || !x.finished || x.failed != nil && !cli.interrupted.Load() {
		// The CLI died, must, or failed the turn: it is ended, and its
		// exit status and all of its stderr read, before the outcome is
		// decided. The CLI writes its reasons on stderr after the result
		// line (checked on 2.1.328), so an error assembled at the result
		// would lose them. An interrupted turn is no failure: the process
		// stays.
		cli.p.Shutdown()
	}
	if (warm || cli.spare) && abort == nil && !x.finished && x.events == 0 {
		d.pool.Done(req.Conversation, cli, false)
		return nil, true, nil
	}
	x.res.Total = time.Since(x.begun)
	x.res.ToolCalls = x.toolLog.close()
	err = x.outcome(abort)
	cli.requests++
	cli.sessionID = x.res.SessionID
	d.pool.Done(req.Conversation, cli, d.keep(cli, req, abort))
	switch {
	case errors.Is(err, ErrInterrupted):
		x.log.Info("claude request stopped", zap.Duration("total_ms", x.res.Total), zap.Float64("cost_usd", x.res.CostUSD))
	case err != nil:
		x.log.Warn("claude request failed", zap.Error(err), zap.Duration("total_ms", x.res.Total))
	default:
		x.log.Info("claude request done",
			zap.Duration("startup_ms", x.res.Startup), zap.Duration("turn1_ms", x.res.Turn1),
			zap.Duration("turn2_ms", x.res.Turn2), zap.Duration("total_ms", x.res.Total),
			zap.Float64("cost_usd", x.res.CostUSD), zap.Int("unknown_events", x.res.UnknownEvents))
	}
	return x.res, false, err
}

// acquire returns the conversation's warm process if it fits req, a
// spare for a new conversation whose session the driver names, else a new
// process (warm and cli.spare say which).
func (d *Driver) acquire(ctx context.Context, req Request, allowWarm bool) (cli *live, warm bool, err error) {
	fingerprint := d.fingerprint(req)
	d.followSpares(req)
	if req.Conversation != "" && allowWarm {
		// One that does not fit (another session after /reset, an edited
		// brain, or it died) is ended; one started ahead below real work
		// is raised when no Expect came first.
		if cli, ok := d.pool.TakeIdle(req.Conversation, func(cli *live) bool { return cli.fits(req, fingerprint) }); ok {
			cli.spare = false // if it was one, that was for the conversation's first request
			return cli, true, nil
		}
	}
	if req.SessionID == "" && !req.Resume {
		if allowWarm {
			if cli, ok := d.pool.TakeSpare(ctx, fingerprint); ok {
				cli.spare = true
				return cli, false, nil
			}
			if ctx.Err() != nil { // while it waited for a spare
				return nil, false, fmt.Errorf("claude: request abandoned: %w", context.Cause(ctx))
			}
		}
		req.SessionID = uuid.NewString()
	}
	cli, err = d.spawn(req, fingerprint, d.procs.Start)
	return cli, false, err
}

// spawn starts a CLI for req. It runs detached from the request's context,
// so it can outlive the request as a warm process: the driver ends it.
func (d *Driver) spawn(req Request, fingerprint string, start func(*exec.Cmd) error) (*live, error) {
	if err := d.prepareBot(req.BotID); err != nil {
		return nil, err
	}
	prompt, err := d.prompts.acquire(d.dirs(req.BotID).home, processPrompt(req))
	if err != nil {
		return nil, err
	}
	// Once: a second release would take the file from another CLI.
	dropPrompt := sync.OnceFunc(func() { d.prompts.release(prompt) })
	tools := d.cfg.Tickets.Connect()
	mcpConfig, err := d.writeMCPConfig(tools.Token(), req)
	if err != nil {
		tools.Close()
		dropPrompt()
		return nil, err
	}
	// The CLI copies every image it is sent into its temporary folder and
	// never removes them; a folder of the process's own goes with it.
	tmp, err := os.MkdirTemp(d.tmpDir, "cli-")
	if err != nil {
		tools.Close()
		os.Remove(mcpConfig)
		dropPrompt()
		return nil, fmt.Errorf("claude: temporary folder: %w", err)
	}
	cli := &live{tools: tools, mcpConfig: mcpConfig, tmpDir: tmp, dropPrompt: dropPrompt, fingerprint: fingerprint,
		sessionID: req.SessionID}
	if cli.p, err = cliproc.Start(context.Background(), d.procs, start, cliproc.Command{Path: d.cfg.Command, Args: d.args(req, mcpConfig),
		Dir: d.workDir(req.BotID), Env: d.env(req.BotID, tmp), MaxLine: streamjson.MaxLineSize}); err != nil {
		cli.release()
		return nil, err
	}
	return cli, nil
}

// processPrompt is the system prompt a process of req is started with:
// the values of its per-message variables come with each message (Run).
func processPrompt(req Request) string { return sysprompt.ForProcess(req.SystemPrompt, req.PromptVars) }

// env is the environment of a CLI of the bot whose temporary folder is
// tmp: the allow-list of Config.Environ, Config.Env, then the bot's own
// folders, which nothing overrides.
func (d *Driver) env(botID, tmp string) []string {
	extra := append(slices.Clone(d.cfg.Env), "TMPDIR="+tmp)
	return cliEnv(d.cfg.Environ, append(extra, d.dirs(botID).env()...))
}

// fingerprint is what a process is started with, but for its session and
// its own MCP config file: a warm process or a spare serves only requests
// with the same. The request's own servers and tool timeout are in the
// MCP config rather than on the command line, and the bot names the
// working directory and HOME (where the session is kept), so they count
// here too: two bots with the same brain share no spare. The system prompt
// counts as the process gets it: the values of its per-message variables
// are not in it (sysprompt.ForProcess).
func (d *Driver) fingerprint(req Request) string {
	req.SessionID, req.Resume = "", false
	servers, _ := json.Marshal(req.MCPServers) // strings only: cannot fail
	// The memory server is in the MCP config, not the arguments.
	memory := "memory=" + strconv.FormatBool(req.Memory)
	return strings.Join(append(d.args(req, ""), string(servers), memory, req.ToolTimeout.String(), req.BotID), "\x00")
}

// keep decides whether cli stays warm after a request: only a healthy
// process of a conversation, not worn out. One whose turn failed has
// already been ended (run).
func (d *Driver) keep(cli *live, req Request, abort error) bool {
	switch {
	case req.Conversation == "" || d.cfg.Warm.Max <= 0 || abort != nil || cli.p.HasExited():
		return false
	case cli.requests >= d.cfg.Warm.RecycleAfter:
		d.log.Info("claude: warm process recycled after its requests", zap.Int("requests", cli.requests))
		return false
	}
	if rss := residentMB(cli); rss >= d.cfg.Warm.RecycleMB {
		d.log.Info("claude: warm process recycled for its memory", zap.Int("rss_mb", rss))
		return false
	}
	return true
}

// Interrupt stops the turn the conversation's CLI is running (/stop, a
// stop button); the request ends with ErrInterrupted, its Result holding
// the text written so far and what the turn cost, and the conversation
// goes on: the session keeps the partial answer. false means nothing was
// running.
func (d *Driver) Interrupt(conversation string) bool {
	cli, ok := d.pool.Running(conversation)
	if !ok {
		return false
	}
	cli.interrupted.Store(true)
	return cli.p.Send(streamjson.InterruptLine(), cliproc.KillGrace) == nil
}

// End ends the conversation's warm process (/reset: its session is over;
// its transcript is replaced by one answered elsewhere) and returns once
// it exited.
func (d *Driver) End(conversation string) {
	d.pool.End(conversation)
}

// HasProcess reports whether the conversation has a CLI process here,
// running a request or idle between its messages.
func (d *Driver) HasProcess(conversation string) bool { return d.pool.Has(conversation) }

// Warm is how many idle CLI processes are kept now.
func (d *Driver) Warm() int { return d.pool.Warm() }

// CLIsOf counts the CLI processes kept for bot: warm ones (a
// conversation's, idle between its messages) and spares (ready or
// starting).
func (d *Driver) CLIsOf(bot string) (warm, spares int) { return d.pool.CLIsOf(bot) }

// Close ends every warm process. Requests still running end theirs when
// they finish.
func (d *Driver) Close() {
	d.pool.Close()
	if d.ownProcs {
		d.procs.Close()
	}
}

// exchange is one request's exchange with one CLI process (a Run has a
// second when a warm process turns out dead): which turn we are in and
// what the CLI has said so far.
type exchange struct {
	req  Request
	tool string // the MCP tool turn 2 must call; "" for Text
	cli  *live
	res  *Result
	log  *zap.Logger

	begun, turnStart time.Time
	turn             int
	seenInit         bool
	// started tells the pool that the CLI has started (its init).
	started   func()
	streamed  string // turn 1's text so far, from the deltas
	events    int    // stdout events read about the request
	turn1Text []string
	// speech speaks turn one's text as it streams (Config.Speak); nil
	// when the tool call speaks.
	speech Utterance
	// reported: OnFile was called.
	reported bool

	// Turn 2's calls of x.tool, in order, and its denials. A call Claude
	// makes on its own in turn 1 does not count: it cannot know the file
	// prefix the caller locates the file by.
	calls   []streamjson.Block
	denials []streamjson.Denial
	results map[string]streamjson.Block // tool_result blocks by tool_use_id
	// toolLog logs every tool call of the request, and its servers'
	// failures to start.
	toolLog *toolLog

	// finished: the last result the driver waits for has arrived (or a
	// failed one); stdin is closed and the CLI should exit.
	finished bool
	failed   *streamjson.TurnResult // a result with is_error
	failure  error                  // another reason the request failed
}

func (x *exchange) send(line []byte) {
	if err := x.cli.p.Send(line, x.req.InactivityTimeout); err != nil {
		// The CLI is gone or stuck: its exit or the watchdog decides.
		x.log.Warn("claude: writing stdin failed", zap.Error(err))
	}
}

// loop reads events until the request's last result, or until stdout
// ends (the CLI died). It returns an error only when the request must be
// cut short (timeouts, cancellation, broken framing); the process is then
// being terminated.
func (x *exchange) loop(ctx context.Context) error {
	p := x.cli.p
	inactivity := time.NewTimer(x.req.InactivityTimeout)
	defer inactivity.Stop()
	overall := time.NewTimer(x.req.MaxDuration)
	defer overall.Stop()
	exited := p.Exited()
	var drain <-chan time.Time
	for !x.finished {
		select {
		case l, ok := <-p.Lines():
			if !ok {
				return nil
			}
			ev, err := streamjson.ParseLine(l.N, l.Text, l.Err)
			if err != nil {
				p.Terminate()
				return err
			}
			inactivity.Reset(x.req.InactivityTimeout)
			if ev.Kind != streamjson.KindLifecycle && (ev.Type != "system" || ev.Kind == streamjson.KindInit) {
				// Lines that say nothing of the request are not an answer:
				// the CLI's word on a stdin line (command_lifecycle), and a
				// system line but init, which a spare prints (ui_invalidate)
				// while it waits, even one that died having served nothing.
				x.events++
			}
			x.handle(ev)
		case <-inactivity.C:
			p.Terminate()
			return &timeoutError{Inactivity: true, After: x.req.InactivityTimeout}
		case <-overall.C:
			p.Terminate()
			return &timeoutError{After: x.req.MaxDuration}
		case <-ctx.Done():
			p.Terminate()
			return fmt.Errorf("claude: request abandoned: %w", context.Cause(ctx))
		case <-exited:
			exited = nil
			drain = time.After(cliproc.DrainGrace)
		case <-drain:
			// The CLI has exited but something it started still holds
			// stdout; shutdown kills the group and closes the pipe.
			return nil
		}
	}
	return nil
}

func (x *exchange) handle(ev streamjson.Event) {
	if ce := x.log.Check(zap.DebugLevel, "claude: event"); ce != nil {
		ce.Write(zap.Stringer("kind", ev.Kind), zap.String("type", ev.Type), zap.String("subtype", ev.Subtype))
	}
	switch ev.Kind {
	case streamjson.KindInit:
		if !x.seenInit {
			x.seenInit = true
			x.started()
			x.res.Startup = time.Since(x.begun)
			x.turnStart = time.Now()
		}
		x.noteSession(ev.SessionID)
		x.toolLog.servers(ev.Servers)
	case streamjson.KindAssistant:
		for _, b := range ev.Blocks {
			if b.Type == "tool_use" {
				x.toolLog.called(b, x.turnText())
			}
			switch {
			case b.Type == "text" && x.turn == 1 && b.Text != "":
				x.turn1Text = append(x.turn1Text, b.Text)
			case b.Type == "tool_use" && b.Name == x.tool && x.turn == 2:
				x.calls = append(x.calls, b)
			}
		}
	case streamjson.KindUser:
		for _, b := range ev.Blocks {
			if b.Type == "tool_result" {
				x.results[b.ToolUseID] = b
				x.toolLog.answered(b)
				x.reportFile(b)
			}
		}
	case streamjson.KindPermissionDenied:
		x.toolLog.refused(ev.Denial)
		if x.turn == 2 {
			x.denials = append(x.denials, ev.Denial)
		}
	case streamjson.KindResult:
		x.endTurn(ev)
	case streamjson.KindTextStart:
		if x.turn == 1 && x.streamed != "" {
			x.streamed += "\n\n" // a new paragraph, as in Result.Text
		}
	case streamjson.KindTextDelta:
		if x.turn != 1 {
			break
		}
		x.streamed += ev.Delta
		if x.speech != nil {
			x.speech.Write(x.streamed)
		}
		if x.req.OnText != nil {
			x.req.OnText(x.streamed)
		}
	case streamjson.KindOther:
		if ev.Type != "stream_event" {
			x.res.UnknownEvents++
		}
	}
}

func (x *exchange) noteSession(id string) {
	if id != "" {
		x.res.SessionID = id
	}
}

func (x *exchange) endTurn(ev streamjson.Event) {
	if x.finished {
		return // a result after the one we waited for: not ours
	}
	r := ev.Result
	x.noteSession(ev.SessionID)
	// total_cost_usd is the process's running total (checked on CLI
	// 2.1.328): the request's is what it grew since the request began.
	x.res.CostUSD = r.CostUSD - x.cli.costBase
	x.cli.lastCost = r.CostUSD
	x.res.Tokens.Input += r.Tokens.Input
	x.res.Tokens.Output += r.Tokens.Output
	x.res.Tokens.CacheRead += r.Tokens.CacheRead
	x.res.Tokens.CacheWrite += r.Tokens.CacheWrite
	if x.turn == 1 {
		x.res.Turn1 = time.Since(x.turnStart)
		// Separate text blocks (around tool calls) are separate
		// paragraphs.
		x.res.Text = strings.Join(x.turn1Text, "\n\n")
		switch {
		case x.res.Text == "" && !r.IsError:
			x.res.Text = r.Text
		case x.res.Text == "" && x.cli.interrupted.Load():
			// What was streamed before the stop, if the CLI kept no
			// assistant line of it.
			x.res.Text = x.streamed
		}
		x.res.Structured = r.Structured
		x.res.Answered = !r.IsError
	} else {
		x.res.Turn2 = time.Since(x.turnStart)
		x.denials = append(x.denials, r.Denials...)
	}
	switch {
	case r.IsError:
		x.failed = r
		x.finished = true
	case x.req.MaxBudgetUSD > 0 && x.res.CostUSD > x.req.MaxBudgetUSD:
		// Checked here, as the CLI's --max-budget-usd would, but per
		// request: the CLI's counts what its process spent in all.
		x.failure = fmt.Errorf("%w (claude.max_budget_usd %g, spent %g)", errMaxBudget, x.req.MaxBudgetUSD, x.res.CostUSD)
		x.finished = true
	case x.req.JSONSchema != "" && len(x.res.Structured) == 0:
		x.failure = errNoStructuredOutput
		x.finished = true
	case x.turn == 2 || x.tool == "":
		x.finished = true
	case x.askedQuestion():
		// The question goes out as text under its buttons: no voice note
		// or picture follows it.
		x.tool, x.res.FilePrefix, x.res.FileExt = "", "", ""
		x.finished = true
	case x.req.Mode == Speech && strings.TrimSpace(x.res.Text) == "":
		x.failure = errNothingToSpeak
		x.finished = true
	default:
		prompt, err := turn2Prompt(x.req, x.res.Text, x.speech != nil)
		if err == nil {
			var line []byte
			if line, err = encodeUserLine("", "", prompt); err == nil {
				x.turn = 2
				x.turnStart = time.Now()
				// Before the line goes out: the call it asks for is the
				// one call the tool server will serve.
				t := ticket.Ticket{Tool: x.tool, Prefix: x.req.FilePrefix, Speech: speechSettings(x.req), Image: x.req.Image}
				if x.speech != nil {
					x.speech.Finish(x.res.Text)
					t.Utterance = x.speech
				}
				x.cli.tools.Open(t)
				x.send(line)
				return
			}
		}
		x.failure = err
		x.finished = true
	}
}

// reportFile hands the file of turn two's call answered by result to
// Request.OnFile, once: the caller need not wait for the model's closing
// words.
func (x *exchange) reportFile(result streamjson.Block) {
	if x.reported || x.req.OnFile == nil || x.turn != 2 || result.IsError ||
		!slices.ContainsFunc(x.calls, func(call streamjson.Block) bool { return call.ID == result.ToolUseID }) {
		return
	}
	if _, denied := x.findDenial(result.ToolUseID); denied {
		return
	}
	path, all, err := reportedFile(x.req.Mode, result.Text)
	if err != nil {
		return // the request's outcome says why (collectFile)
	}
	x.reported = true
	res := *x.res
	res.FilePath, res.FilePaths = path, all
	res.ToolCalls = slices.Clone(x.toolLog.done) // the file's call among them
	if x.speech != nil {
		res.SpokenChars = x.speech.Spoken() // all of it: the tool joined every part
	}
	res.Turn2 = time.Since(x.turnStart)
	x.req.OnFile(&res)
}

// turnText is turn one's text so far (none in turn two).
func (x *exchange) turnText() string {
	if x.turn != 1 {
		return ""
	}
	return strings.Join(x.turn1Text, "\n\n")
}

// askedQuestion reports whether the model asked the user a question in
// turn one and the tool server accepted it.
func (x *exchange) askedQuestion() bool {
	server, tool, _ := toolspec.SplitToolName(toolspec.QuestionTool)
	for _, call := range x.toolLog.done {
		if call.Server == server && call.Tool == tool && call.Outcome == ToolOK {
			return true
		}
	}
	return false
}

// outcome decides the request's error once the process is gone and its
// stderr has been read completely.
func (x *exchange) outcome(abort error) error {
	tail := x.cli.p.StderrTail()
	if abort != nil {
		var te *timeoutError
		if errors.As(abort, &te) {
			te.StderrTail = tail
		}
		return abort
	}
	switch {
	case x.failed != nil && x.cli.interrupted.Load():
		// The CLI ends an interrupted turn as an error_during_execution.
		return fmt.Errorf("%w: %w", ErrInterrupted,
			&resultError{Subtype: x.failed.Subtype, Errors: x.failed.Errors, Message: x.failed.Text})
	case x.failed != nil:
		re := &resultError{Subtype: x.failed.Subtype, Errors: x.failed.Errors, Message: x.failed.Text, StderrTail: tail}
		// Only the CLI's own words identify an unknown session: any other
		// failure must not make the caller drop a conversation that exists.
		switch {
		case x.req.Resume && (mentions(re.Errors, noConversation) || strings.Contains(tail, noConversation)):
			return fmt.Errorf("%w: %w", ErrSessionNotFound, re)
		case re.Subtype == "error_max_turns":
			return fmt.Errorf("%w (--max-turns %d): %w", errMaxTurns, x.req.MaxTurns, re)
		}
		return re
	case !x.finished:
		ee := &exitError{Code: x.cli.p.ExitCode(), StderrTail: tail}
		if x.req.Resume && strings.Contains(tail, noConversation) {
			return fmt.Errorf("%w: %w", ErrSessionNotFound, ee)
		}
		return ee
	case x.failure != nil:
		return x.failure
	case x.tool != "":
		return x.collectFile()
	}
	return nil
}

func mentions(list []string, substr string) bool {
	for _, s := range list {
		if strings.Contains(s, substr) {
			return true
		}
	}
	return false
}

// collectFile finds the latest call of x.tool that got a result and
// takes the file path from our tool's JSON into Result.FilePath.
func (x *exchange) collectFile() error {
	for i := len(x.calls) - 1; i >= 0; i-- {
		call := x.calls[i]
		r, ok := x.results[call.ID]
		if !ok {
			continue
		}
		if d, denied := x.findDenial(call.ID); denied {
			return fmt.Errorf("%w: %s: %s", errToolDenied, x.tool, d.Message)
		}
		if r.IsError {
			return &toolError{Tool: x.tool, Message: r.Text}
		}
		path, all, err := reportedFile(x.req.Mode, r.Text)
		if err != nil {
			return &toolError{Tool: x.tool, Message: err.Error()}
		}
		x.res.FilePath, x.res.FilePaths = path, all
		return nil
	}
	if d, denied := x.findDenial(""); denied {
		return fmt.Errorf("%w: %s: %s", errToolDenied, x.tool, d.Message)
	}
	if len(x.calls) > 0 {
		return &toolError{Tool: x.tool, Message: "the call got no result"}
	}
	return fmt.Errorf("%w: %s", ErrToolNotCalled, x.tool)
}

// reportedFile takes the file's path from our tool's JSON answer.
func reportedFile(mode Mode, answer string) (path string, all []string, err error) {
	var ok bool
	switch mode {
	case Speech:
		var out toolspec.SpeechResult
		err = json.Unmarshal([]byte(answer), &out)
		ok, path, all = out.Success, out.AudioPath, out.AudioPaths
	case Image:
		var out toolspec.ImageResult
		err = json.Unmarshal([]byte(answer), &out)
		ok, path = out.Success, out.ImagePath
	}
	switch {
	case err != nil:
		return "", nil, fmt.Errorf("result is not our JSON: %w", err)
	case !ok || path == "" || len(all) > 0 && all[0] != path:
		return "", nil, errors.New("no file reported")
	}
	return path, all, nil
}

// findDenial finds a refusal of the call toolUseID, or with "" of any call of
// x.tool.
func (x *exchange) findDenial(toolUseID string) (streamjson.Denial, bool) {
	for _, d := range x.denials {
		if toolUseID != "" && d.ToolUseID == toolUseID || toolUseID == "" && d.ToolName == x.tool {
			return d, true
		}
	}
	return streamjson.Denial{}, false
}

// SessionFile is where the bot's CLI keeps a session's transcript: in the
// bot's own config folder (see botDirs), projects/<working dir with every
// character but letters and digits made '-'>/<session>.jsonl. Copying
// this file to another machine, under the same layout, lets the session
// be resumed there.
func (d *Driver) SessionFile(botID, session string) string {
	b := d.dirs(botID)
	return SessionFile(b.config, "", b.work, session)
}

// SessionFileIn is Driver.SessionFile of a driver on dataDir (absolute),
// for a command that runs no CLI (brainbot carry).
func SessionFileIn(dataDir, botID, session string) string {
	return (&Driver{cfg: Config{DataDir: dataDir}}).SessionFile(botID, session)
}

// SessionFile is the CLI's transcript of session for a CLI run in workDir
// with this CLAUDE_CONFIG_DIR (may be empty) and HOME.
func SessionFile(configDir, home, workDir, session string) string {
	if configDir == "" {
		configDir = filepath.Join(home, ".claude")
	}
	slug := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, workDir)
	return filepath.Join(configDir, "projects", slug, session+".jsonl")
}
