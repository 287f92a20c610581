// Package stack runs the whole product offline, as users meet it:
// `brainbot run` as a separate process, talking to a Bot API stand-in
// (bot/telegramtest), the real Claude Code CLI talking to a scripted
// Messages API (claude/claudetest) and calling brainbot's own MCP tools,
// which call an OpenAI stand-in (mcp/openaitest). Everything between
// Telegram and OpenAI is the real product.
//
// The end-to-end suite, `make demo` and the benchmark report drive it
// through Telegram only: Ask sends a user's message and returns what the
// bot sent back once brainbot has logged the request's summary line.
package stack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"html"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/mcp/openaitest"
)

// OpenAIKey is the key brainbot is given; tests assert it never reaches a log.
const OpenAIKey = "sk-stack-openai-key-0123456789abcdef"

// Config says what to run.
type Config struct {
	// Brainbot is the built brainbot executable.
	Brainbot string
	// ClaudeCmd is the real Claude Code CLI.
	ClaudeCmd string
	// Dir holds everything the run writes: brains/, data/, home/, brainbot.log.
	Dir string
	// Brains are the brain files to start with, by file name
	// ("narrator.yaml"). Each should say `token_env: <ID>_TOKEN` (upper
	// case); Start sets that variable to Token(id).
	Brains map[string]string
	// Panels are the panel files to start with, by file name
	// ("cities.yaml"), in PanelsDir.
	Panels map[string]string
	// Env is added to brainbot's environment (e.g. BRAINBOT_MAX_CLAUDE=8).
	Env []string
	// Logs, if set, receives a copy of brainbot's stderr (its JSON logs).
	Logs io.Writer
	// EnvFile runs brainbot as an admin runs it with the service's file,
	// `brainbot run -env-file FILE`: FILE (EnvFilePath) holds its whole
	// environment but PATH, HOME and TMPDIR, the only variables left in the
	// process's.
	EnvFile bool
}

// Stack is one running product with its stand-ins.
type Stack struct {
	Telegram *telegramtest.Server
	Model    *claudetest.Model
	OpenAI   *openaitest.Server

	BrainsDir, PanelsDir, DataDir, Home, LogFile string
	// TempDir is brainbot's TMPDIR (each Claude CLI gets a folder of its
	// own under DataDir instead).
	TempDir string

	cfg  Config
	logs *LogBook

	mu   sync.Mutex
	proc *process
	// asked counts the messages sent per bot and user: the n-th one is
	// answered by the n-th summary line.
	asked map[chatKey]int
}

type chatKey struct {
	bot  string
	user int64
}

// New starts the stand-ins and writes the brains; Start starts brainbot.
func New(cfg Config) (*Stack, error) {
	s := &Stack{
		cfg:       cfg,
		BrainsDir: filepath.Join(cfg.Dir, "brains"),
		PanelsDir: filepath.Join(cfg.Dir, "panels"),
		DataDir:   filepath.Join(cfg.Dir, "data"),
		Home:      filepath.Join(cfg.Dir, "home"),
		LogFile:   filepath.Join(cfg.Dir, "brainbot.log"),
		TempDir:   filepath.Join(cfg.Dir, "tmp"),
		logs:      newLogBook(),
		asked:     map[chatKey]int{},
	}
	for _, dir := range []string{s.BrainsDir, s.PanelsDir, s.DataDir, s.Home, s.TempDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, err
		}
	}
	for name, content := range cfg.Brains {
		if err := s.WriteBrain(name, content); err != nil {
			return nil, err
		}
	}
	for name, content := range cfg.Panels {
		if err := os.WriteFile(filepath.Join(s.PanelsDir, name), []byte(content), 0o640); err != nil {
			return nil, err
		}
	}
	s.Telegram = telegramtest.NewServer()
	s.Model = claudetest.NewModel()
	s.OpenAI = openaitest.NewServer()
	return s, nil
}

// Token is the Telegram token of the bot with this brain id: stable, long
// enough that the log redaction applies to it, and of BotFather's form
// (brain.ValidToken), 35 characters after the colon.
func Token(id string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	secret := fmt.Sprintf("AAE%08x-%s-secret-token-", h.Sum32(), id) + strings.Repeat("x", 35)
	return fmt.Sprintf("%d:%s", 100000+h.Sum32()%900000, secret[:35])
}

// TokenEnv is the variable a brain with this id names in token_env.
func TokenEnv(id string) string {
	return strings.ToUpper(strings.ReplaceAll(id, "-", "_")) + "_TOKEN"
}

// WriteBrain writes (or replaces, atomically as editors do) a brain file.
func (s *Stack) WriteBrain(name, content string) error {
	tmp := filepath.Join(s.BrainsDir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o640); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.BrainsDir, name))
}

// Env is brainbot's whole environment.
func (s *Stack) Env() []string {
	// brainbot's folder first: brains may start `brainbot mcp clock`. The
	// CLI runs elsewhere, so the folder must be absolute.
	bin, _ := filepath.Abs(filepath.Dir(s.cfg.Brainbot)) // only fails without a working directory
	env := []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + s.Home,
		"TMPDIR=" + s.TempDir,
		"BRAINBOT_BRAINS=" + s.BrainsDir,
		"BRAINBOT_PANELS=" + s.PanelsDir,
		"BRAINBOT_DATA=" + s.DataDir,
		"BRAINBOT_LOG_FORMAT=json",
		"BRAINBOT_LOG_LEVEL=debug", // the most a log ever says: secrets must be absent even here
		"BRAINBOT_LOG_FILE=" + s.LogFile,
		"TELEGRAM_API_URL=" + s.Telegram.URL,
		"CLAUDE_CMD=" + s.cfg.ClaudeCmd,
		"OPENAI_API_KEY=" + OpenAIKey,
		"OPENAI_BASE_URL=" + s.OpenAI.URL,
	}
	env = append(env, s.Model.Env()...)
	for name := range s.cfg.Brains {
		id := strings.TrimSuffix(strings.TrimSuffix(name, ".yaml"), ".yml")
		env = append(env, TokenEnv(id)+"="+Token(id))
	}
	return append(env, s.cfg.Env...)
}

// EnvFilePath is the file of Config.EnvFile.
func (s *Stack) EnvFilePath() string { return filepath.Join(s.cfg.Dir, "brainbot.env") }

// writeEnvFile writes env but PATH, HOME and TMPDIR to EnvFilePath, as
// KEY=value lines, and returns what it left out: the process's
// environment.
func (s *Stack) writeEnvFile(env []string) (process []string, err error) {
	var file strings.Builder
	for _, kv := range env {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "PATH", "HOME", "TMPDIR":
			process = append(process, kv)
		default:
			file.WriteString(kv + "\n")
		}
	}
	return process, os.WriteFile(s.EnvFilePath(), []byte(file.String()), 0o600)
}

// process is one run of `brainbot run`.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs `brainbot run` and waits until every bot whose brain has a
// token is polling Telegram.
func (s *Stack) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.proc != nil {
		s.mu.Unlock()
		return errors.New("stack: brainbot is already running")
	}
	cmd := exec.Command(s.cfg.Brainbot, "run")
	cmd.Env = s.Env()
	if s.cfg.EnvFile {
		var err error
		if cmd.Env, err = s.writeEnvFile(cmd.Env); err != nil {
			s.mu.Unlock()
			return err
		}
		cmd.Args = append(cmd.Args, "-env-file", s.EnvFilePath())
	}
	cmd.Dir = s.cfg.Dir
	// Its own process group, so that Close can take the CLIs down with it
	// if a test fails half-way.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("stack: start brainbot: %w", err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	s.proc = p
	s.mu.Unlock()

	mark := s.logs.Len()
	go func() {
		lines := bufio.NewScanner(stderr)
		lines.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for lines.Scan() {
			if s.cfg.Logs != nil {
				fmt.Fprintln(s.cfg.Logs, lines.Text())
			}
			s.logs.add(lines.Text())
		}
		p.err = cmd.Wait()
		close(p.done)
	}()

	// Each bot polls, or waits for a token its brain's variable lacks.
	want := len(s.cfg.Brains)
	_, err = s.logs.WaitFrom(ctx, mark, func(lines []Line) bool {
		return count(lines, func(l Line) bool { return l.Msg == "telegram bot polling" || l.Msg == "bot not started: no token" }) >= want
	}, p.done)
	if err != nil {
		return fmt.Errorf("stack: waiting for %d bots to poll: %w\n%s", want, err, s.logs.Tail(20))
	}
	return nil
}

// Stop sends sig to brainbot and waits for it to exit; it returns the exit
// code.
func (s *Stack) Stop(ctx context.Context, sig syscall.Signal) (int, error) {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return 0, errors.New("stack: brainbot is not running")
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return 0, err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return 0, fmt.Errorf("stack: brainbot did not exit after %v: %w", sig, ctx.Err())
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, p.err
}

// Close kills brainbot's whole process group if it still runs and stops
// the stand-ins.
func (s *Stack) Close() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	s.killCLIs()
	s.Telegram.Close()
	s.Model.Close()
	s.OpenAI.Close()
}

// killCLIs kills the Claude CLIs brainbot left: each runs in a process
// group of its own, so a warm one outlives a killed brainbot and would
// go on writing into the test's folder after the test removed it.
func (s *Stack) killCLIs() {
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := claudetest.ProcessesUnder(s.DataDir)
		if len(left) == 0 || time.Now().After(deadline) {
			return
		}
		for _, p := range left {
			_ = syscall.Kill(-p.PID, syscall.SIGKILL) // its group: the CLI and anything it started
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PID is brainbot's process id (0 when it is not running).
func (s *Stack) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Logs is every log line brainbot wrote in this stack, across restarts.
func (s *Stack) Logs() *LogBook { return s.logs }

// Reply is what a bot did with one message.
type Reply struct {
	// Calls are the Bot API calls the bot made to the user's chat for it
	// (sendMessage, sendVoice, sendPhoto, sendDocument; chat actions left out).
	Calls []telegramtest.Call
	// Summary is brainbot's one summary log line of the request.
	Summary Line
	// Sent is when the update was queued; Elapsed runs from then to the
	// summary line.
	Sent    time.Time
	Elapsed time.Duration
}

// Texts returns the text of each sendMessage as the user reads it, in order.
func (r Reply) Texts() []string {
	var texts []string
	for _, c := range r.Calls {
		if c.Method == "sendMessage" {
			texts = append(texts, Rendered(c))
		}
	}
	return texts
}

var htmlTag = regexp.MustCompile(`<[^>]*>`)

// Rendered is a message's text as a Telegram client shows it: with
// parse_mode HTML, tags are formatting and entities stand for characters.
func Rendered(c telegramtest.Call) string {
	text := c.Param("text")
	if strings.EqualFold(c.Param("parse_mode"), "HTML") {
		text = html.UnescapeString(htmlTag.ReplaceAllString(text, ""))
	}
	return text
}

// Methods returns the method of each call, in order.
func (r Reply) Methods() []string {
	var methods []string
	for _, c := range r.Calls {
		methods = append(methods, c.Method)
	}
	return methods
}

// replyMethods are the calls that answer a user (chat actions are not).
var replyMethods = []string{"sendMessage", "sendRichMessage", "sendVoice", "sendPhoto", "sendDocument"}

// Ask sends text from user (in their private chat) to the bot with this
// brain id, and returns what the bot did once it logged the request.
func (s *Stack) Ask(ctx context.Context, bot string, user int64, text string) (Reply, error) {
	pending := s.Send(bot, user, text)
	return pending.Wait(ctx)
}

// Pending is a sent message whose answer has not been awaited yet.
type Pending struct {
	s         *Stack
	bot       string
	user      int64
	callsMark int
	requests  int
	sent      time.Time
}

// Send queues a user's message without waiting, for concurrent scenarios.
// Messages of one user must be awaited in the order they were sent.
func (s *Stack) Send(bot string, user int64, text string) *Pending {
	return s.send(bot, user, func(token string) { s.Telegram.SendText(token, user, user, text) })
}

// SendMessage is Send for messages that are not plain text: each content
// holds a message's fields besides chat, from and date, as Telegram sends
// them ("voice", "photo", "caption", "media_group_id"...). Several
// contents are messages the bot answers as one (an album's).
func (s *Stack) SendMessage(bot string, user int64, contents ...map[string]any) *Pending {
	return s.send(bot, user, func(token string) {
		for _, content := range contents {
			msg := map[string]any{
				"date": time.Now().Unix(),
				"chat": map[string]any{"id": user, "type": "private"},
				"from": map[string]any{"id": user, "is_bot": false, "first_name": fmt.Sprintf("User%d", user)},
			}
			maps.Copy(msg, content)
			s.Telegram.SendMessage(token, msg)
		}
	})
}

// Unprompted awaits a message the bot writes to a user of its own (a
// reminder, a check-in): it is answered, and counted, as a message sent.
func (s *Stack) Unprompted(bot string, user int64) *Pending {
	return s.send(bot, user, func(string) {})
}

// send queues what one answer is awaited for.
func (s *Stack) send(bot string, user int64, queue func(token string)) *Pending {
	token := Token(bot)
	p := &Pending{s: s, bot: bot, user: user, sent: time.Now()}
	p.callsMark = len(s.chatCalls(token, user))
	s.mu.Lock()
	p.requests = s.asked[chatKey{bot, user}]
	s.asked[chatKey{bot, user}]++
	s.mu.Unlock()
	queue(token)
	return p
}

// Wait returns the bot's answer to the message: the calls to the user's
// chat made from sending it until the request's summary line. (With
// several messages of one user in flight, use ChatCalls for the order.)
func (p *Pending) Wait(ctx context.Context) (Reply, error) {
	s := p.s
	var done chan struct{}
	s.mu.Lock()
	if s.proc != nil {
		done = s.proc.done
	}
	s.mu.Unlock()
	lines, err := s.logs.WaitFrom(ctx, 0, func(lines []Line) bool {
		return len(Summaries(lines, p.bot, p.user)) > p.requests
	}, done)
	if err != nil {
		return Reply{}, fmt.Errorf("stack: no answer from %s to user %d: %w\n%s", p.bot, p.user, err, s.logs.Tail(15))
	}
	calls := s.chatCalls(Token(p.bot), p.user)
	reply := Reply{Summary: Summaries(lines, p.bot, p.user)[p.requests], Sent: p.sent, Elapsed: time.Since(p.sent)}
	if p.callsMark < len(calls) {
		reply.Calls = calls[p.callsMark:]
	}
	return reply, nil
}

// ChatCalls returns the replies a bot sent to a user's private chat, in order.
func (s *Stack) ChatCalls(bot string, user int64) []telegramtest.Call {
	return s.chatCalls(Token(bot), user)
}

func (s *Stack) chatCalls(token string, chat int64) []telegramtest.Call {
	var calls []telegramtest.Call
	for _, c := range s.Telegram.Sent(token, replyMethods...) {
		if c.ChatID() == chat && c.Code == 200 {
			calls = append(calls, c)
		}
	}
	return calls
}

// Summaries are the summary lines ("request") among lines of bot's
// requests from user, in order.
func Summaries(lines []Line, bot string, user int64) []Line {
	var out []Line
	for _, l := range lines {
		if l.Msg == "request" && l.Str("bot") == bot && l.Int("user") == user {
			out = append(out, l)
		}
	}
	return out
}

func count(lines []Line, match func(Line) bool) int {
	n := 0
	for _, l := range lines {
		if match(l) {
			n++
		}
	}
	return n
}
