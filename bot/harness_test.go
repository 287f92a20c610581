package bot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/bot/telegramtest"
	"brainbot/claude"
	"brainbot/output"
	"brainbot/state/jetstream"
	"brainbot/state/sqlite"
)

// fakeClaude answers like the fake CLI, instantly and in process:
// "You said: <prompt>", and for speech and image a file written where the
// MCP tool would write it. Directives in the prompt: #fail (model error),
// #wait (blocks until release or cancellation), #notool (turn 2 fails
// after turn 1 produced text), #nofile (reports a file that is not there),
// #crash (the CLI dies before it starts the session), #tools (the
// result reports fakeToolCalls), #panic (a bug: Run panics), #stopme
// (streams, then writes on until Interrupt: writeUntilStopped), #notes
// (a voice answer in three files, as one longer than a voice note holds),
// #early (the file goes to Request.OnFile before Run ends, as the driver
// hands it over before the model's closing words).
type fakeClaude struct {
	dataDir string
	// sessions are the ids the fake knows (resume of others fails).
	mu       sync.Mutex
	sessions map[string]bool
	calls    []claude.Request
	release  chan struct{}
	running  int
	maxRun   int
	finished int // requests the fake has answered (or failed)
	// turn is how long every request takes (0: at once).
	turn time.Duration
	// ended lists the conversations whose process End ended; stop is
	// closed by Interrupt to stop a #wait request.
	ended []string
	stop  chan struct{}
	// streamed, when set, is called with the first and the last text of
	// a #stream reply, and when the request began, before the fake goes
	// on: a test waits there for the text to show (waitStreamed).
	streamed func(ctx context.Context, text string, since time.Time)
	// spares are the sets the fake was asked to keep, by name.
	spares map[string]keptSpares
	// prewarmed are the conversations it started ahead of their next
	// message, up to prewarmRoom; then it has no room.
	prewarmed   []claude.Request
	prewarmRoom int
}

func (f *fakeClaude) PrewarmResume(req claude.Request) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.prewarmed) >= f.prewarmRoom {
		return claude.ErrNoRoom
	}
	f.prewarmed = append(f.prewarmed, req)
	return nil
}

// HasProcess: the fake's conversations have a process once prewarmed.
func (f *fakeClaude) HasProcess(conversation string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.prewarmed, func(r claude.Request) bool { return r.Conversation == conversation })
}

// keptSpares is a set of spares as the bot asked for it.
type keptSpares struct {
	shape claude.Request
	n     int
}

// Expect: the fake's processes start at once.
func (f *fakeClaude) Expect(string) {}

func (f *fakeClaude) KeepSpares(set string, shape claude.Request, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.spares[set] = keptSpares{shape, n}
	return nil
}

// ReadySpares: the fake starts every request at once, without spares.
func (f *fakeClaude) ReadySpares(string) int { return 0 }

func (f *fakeClaude) DropSpares(set string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.spares, set)
}

// keptSets are the sets kept now.
func (f *fakeClaude) keptSets() map[string]keptSpares {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.spares)
}

func (f *fakeClaude) Interrupt(conversation string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running == 0 {
		return false
	}
	select {
	case <-f.stop: // stopped already
		return false
	default:
		close(f.stop)
		return true
	}
}

func (f *fakeClaude) End(conversation string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = append(f.ended, conversation)
}

// SessionFile is where the fake would keep a transcript (it writes none).
func (f *fakeClaude) SessionFile(bot, session string) string {
	return filepath.Join(f.dataDir, "transcripts", bot, session+".jsonl")
}

func newFakeClaude(dataDir string) *fakeClaude {
	return &fakeClaude{dataDir: dataDir, sessions: map[string]bool{}, release: make(chan struct{}), stop: make(chan struct{}),
		spares: map[string]keptSpares{}}
}

func (f *fakeClaude) Run(ctx context.Context, req claude.Request) (*claude.Result, error) {
	begun := time.Now()
	f.mu.Lock()
	streamed := f.streamed
	f.calls = append(f.calls, req)
	f.running++
	f.maxRun = max(f.maxRun, f.running)
	known := f.sessions[req.SessionID]
	f.mu.Unlock()
	if req.SessionID == "" && !req.Resume {
		req.SessionID = uuid.NewString() // the driver names a new conversation
	}
	defer func() {
		f.mu.Lock()
		f.running--
		f.finished++
		f.mu.Unlock()
	}()
	if req.Resume && !known {
		return nil, fmt.Errorf("resume: %w", claude.ErrSessionNotFound)
	}
	if f.turn > 0 {
		time.Sleep(f.turn)
	}
	if strings.Contains(req.Prompt, "#panic") {
		panic("model driver exploded")
	}
	if strings.Contains(req.Prompt, "#crash") {
		// The CLI died before its init event: no session was created,
		// and the driver's result carries no session id.
		return &claude.Result{}, errors.New("CLI exited with status 1 before its result")
	}
	f.mu.Lock()
	f.sessions[req.SessionID] = true
	f.mu.Unlock()
	if strings.Contains(req.Prompt, "#wait") {
		select {
		case <-f.release:
		case <-f.stop:
			return &claude.Result{SessionID: req.SessionID}, fmt.Errorf("turn: %w", claude.ErrInterrupted)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if strings.Contains(req.Prompt, "#stopme") {
		return f.writeUntilStopped(ctx, req)
	}
	if strings.Contains(req.Prompt, "#fail") {
		return nil, errors.New("model exploded")
	}
	if strings.Contains(req.Prompt, "#stream") && req.OnText != nil {
		// As the model writes: a word at a time.
		words := strings.Fields("You said: " + req.Prompt)
		for i := range words {
			text := strings.Join(words[:i+1], " ")
			req.OnText(text)
			if streamed != nil && (i == 0 || i == len(words)-1) {
				streamed(ctx, text, begun)
			}
			time.Sleep(5 * time.Millisecond) // the pace of writing, not a wait
		}
	}
	res := &claude.Result{Text: "You said: " + req.Prompt, Answered: true, SessionID: req.SessionID, CostUSD: 0.01,
		Tokens: claude.Tokens{Input: 1000, Output: 20, CacheRead: 500}}
	if strings.Contains(req.Prompt, "#tools") {
		res.ToolCalls = fakeToolCalls
	}
	if req.Mode == claude.Text {
		return res, nil
	}
	if strings.Contains(req.Prompt, "#bounded") {
		return res, fmt.Errorf("turn 2: %w", claude.ErrBounded)
	}
	if strings.Contains(req.Prompt, "#notool") {
		return res, claude.ErrToolNotCalled
	}
	kind, ext, data := output.Audio, ".ogg", []byte("OggS-voice")
	if req.Mode == claude.Image {
		kind, ext, data = output.Image, ".png", []byte("\x89PNG-image")
	}
	res.FilePrefix, res.FileExt = req.FilePrefix, ext
	res.ToolCalls = append(res.ToolCalls, fakeFileCall(req.Mode, res.Text, req.Prompt))
	if strings.Contains(req.Prompt, "#nofile") {
		res.FilePath = filepath.Join(f.dataDir, kind.Dir(), "missing"+ext)
		return res, nil
	}
	notes := 1
	if strings.Contains(req.Prompt, "#notes") {
		notes = 3 // an answer longer than one voice note holds
	}
	now := time.Now()
	for n := range notes {
		note := data
		if notes > 1 {
			note = append(slices.Clip(data), byte('1'+n)) // which note it is
		}
		path, err := output.Save(filepath.Join(f.dataDir, kind.Dir()), res.FilePrefix, ext, note, now)
		if err != nil {
			return nil, err
		}
		res.FilePaths = append(res.FilePaths, path)
	}
	res.FilePath = res.FilePaths[0]
	if notes == 1 {
		res.FilePaths = nil
	}
	if strings.Contains(req.Prompt, "#early") && req.OnFile != nil {
		// As the driver does once the tool reported the file: before the
		// model's closing words, which cost a little more.
		early := *res
		req.OnFile(&early)
		res.CostUSD += 0.001
	}
	return res, nil
}

// writeUntilStopped streams "You said: ..." (a voice or image request
// has its tool write the file meanwhile) and then waits, as a model still
// at work, until Interrupt: the result is then the text so far and what
// the partial turn cost, as the driver reports an interrupted turn.
func (f *fakeClaude) writeUntilStopped(ctx context.Context, req claude.Request) (*claude.Result, error) {
	text := "You said: " + req.Prompt
	if req.OnText != nil {
		req.OnText(text)
	}
	res := &claude.Result{Text: text, SessionID: req.SessionID, CostUSD: 0.005, Tokens: claude.Tokens{Input: 800, Output: 5}}
	if req.Mode == claude.Speech {
		res.FilePrefix = req.FilePrefix
		if _, err := output.Save(filepath.Join(f.dataDir, output.Audio.Dir()), req.FilePrefix, ".ogg", []byte("OggS-voice"), time.Now()); err != nil {
			return nil, err
		}
	}
	select {
	case <-f.stop:
		return res, fmt.Errorf("turn: %w", claude.ErrInterrupted)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// waitStreamed makes the fake, as it streams a reply to token's chats, wait
// until its first and its last text showed there (a draft, a message or
// an edit), so every stream shows both whatever the machine's speed.
// wanted, when set, picks which texts to wait for.
func (h *harness) waitStreamed(token string, wanted func(text string) bool) {
	h.claude.mu.Lock()
	defer h.claude.mu.Unlock()
	h.claude.streamed = func(ctx context.Context, text string, since time.Time) {
		if wanted != nil && !wanted(text) {
			return
		}
		_, _ = h.srv.WaitCall(ctx, token, func(c telegramtest.Call) bool {
			return slices.Contains(streamMethods, c.Method) && (c.Param("text") == text || c.Markdown() == text) && c.Time.After(since)
		})
	}
}

// streamMethods are the calls that show a streamed text.
var streamMethods = []string{"sendMessageDraft", "sendRichMessageDraft", "sendMessage", "editMessageText"}

// waitCalls waits until the fake has been asked n times (the n-th request
// is running).
func (f *fakeClaude) waitCalls(t *testing.T, n int) {
	t.Helper()
	waitFor(t, func() bool { return len(f.requests()) >= n })
}

// waitFinished waits until the fake has returned from n requests.
func (f *fakeClaude) waitFinished(t *testing.T, n int) {
	t.Helper()
	waitFor(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.finished >= n
	})
}

func (f *fakeClaude) requests() []claude.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]claude.Request(nil), f.calls...)
}

// BotFather tokens: brain.Parse rejects an inline token of another form.
const (
	tokenA = "1001:AAEtoken-a_0123456789abcdefghijklmn"
	tokenB = "1002:AAEtoken-b_0123456789abcdefghijklmn"
	tokenC = "1003:AAEtoken-c_0123456789abcdefghijklmn"
	tokenD = "1004:AAEtoken-d_0123456789abcdefghijklmn"
)

// brainFile is a minimal valid brain with token and extra YAML.
func brainFile(token, extra string) string {
	return fmt.Sprintf("name: Tester\ndescription: A test bot.\nsystem_prompt: Be brief.\ntelegram:\n  token: %q\n%s", token, extra)
}

type harness struct {
	t      testing.TB
	srv    *telegramtest.Server
	brains string
	data   string
	store  *sqlite.Store
	// storeOpts are the options store is opened with.
	storeOpts []sqlite.Option
	claude    *fakeClaude
	logs      *observer.ObservedLogs
	cfg       func(*Config)

	// natsURL, when set, runs the bots as one instance of a cluster on
	// that NATS server: each start joins it as a new instance (cl), and
	// stop hands what it held back, as `brainbot run` does.
	natsURL   string
	cl        *jetstream.Cluster
	instances int

	cancel context.CancelFunc
	done   chan error
	m      *Manager
}

// newHarness writes brains (id → YAML) and starts a Manager against a
// fresh stand-in.
func newHarness(t testing.TB, brains map[string]string, cfg func(*Config)) *harness {
	t.Helper()
	return newHarnessWith(t, brains, cfg, nil)
}

// newHarnessWith is newHarness with before run on the harness before the
// Manager starts (to arm the stand-in's failures, say).
func newHarnessWith(t testing.TB, brains map[string]string, cfg func(*Config), before func(*harness)) *harness {
	t.Helper()
	h := &harness{t: t, srv: telegramtest.NewServer(), brains: t.TempDir(), data: t.TempDir(), cfg: cfg}
	t.Cleanup(h.srv.Close)
	for id, y := range brains {
		h.writeBrain(id, y)
	}
	h.openStore(nil)
	h.claude = newFakeClaude(h.data)
	if before != nil {
		before(h)
	}
	h.start()
	return h
}

func (h *harness) writeBrain(id, y string) {
	h.t.Helper()
	tmp := filepath.Join(h.brains, "."+id+".tmp")
	if err := os.WriteFile(tmp, []byte(y), 0o600); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(h.brains, id+".yaml")); err != nil {
		h.t.Fatal(err)
	}
}

// openStore (re)opens the store's file, as a process starting does: its
// work in the background reports to log (nil: nowhere).
func (h *harness) openStore(log *zap.Logger) {
	h.t.Helper()
	if h.store != nil {
		h.store.Close()
	}
	opts := append([]sqlite.Option{sqlite.Retries(20*time.Millisecond, 200*time.Millisecond), sqlite.Log(cmp.Or(log, zap.NewNop()))}, h.storeOpts...)
	st, err := sqlite.Open(context.Background(), filepath.Join(h.data, sqlite.FileName), opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	h.store = st
	h.t.Cleanup(func() { st.Close() })
}

func (h *harness) start() {
	h.t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	h.logs = logs
	log := zap.New(core)
	cfg := Config{
		BrainsDir: h.brains, DataDir: h.data, APIURL: h.srv.URL,
		Claude: h.claude, Warmer: h.claude, Log: log,
		PollTimeout: 2 * time.Second, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		Grace: 10 * time.Second, LookupEnv: func(string) (string, bool) { return "", false },
	}
	if h.natsURL != "" {
		h.instances++
		cl, err := jetstream.Connect(context.Background(), jetstream.Config{URL: h.natsURL, Partitions: 1,
			Instance: fmt.Sprintf("instance-%d", h.instances), Log: cfg.Log.Named("cluster")})
		if err != nil {
			h.t.Fatal(err)
		}
		h.cl = cl
		cfg.State = cl.Backend(func(bot, session string) string { return filepath.Join(h.data, "transcripts", bot, session) })
	} else {
		// A start opens the store anew, as a process does, reporting to
		// this run's log.
		h.openStore(log)
		cfg.State = h.store
	}
	if h.cfg != nil {
		h.cfg(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.m, h.cancel, h.done = m, cancel, make(chan error, 1)
	go func() { h.done <- m.Run(ctx) }()
	h.t.Cleanup(h.stop)
}

// stop ends Run (as SIGTERM would) and checks it returned nil.
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		h.t.Error("Run did not return after its context ended")
	}
	if h.cl != nil {
		h.cl.Release()
		h.cl.Close()
		h.cl = nil
		return
	}
	// The process ends: its store closes (a clear still retried gives up),
	// and opens again, as it is, for the test to read.
	h.store.Close()
	st, err := sqlite.OpenExisting(context.Background(), filepath.Join(h.data, sqlite.FileName))
	if err != nil {
		h.t.Fatal(err)
	}
	h.store = st
	h.t.Cleanup(func() { st.Close() })
}

func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	h.t.Cleanup(cancel)
	return ctx
}

// waitSent waits for n delivered messages of token and returns them.
func (h *harness) waitSent(token string, n int, methods ...string) []telegramtest.Call {
	h.t.Helper()
	got, err := h.srv.WaitFor(h.ctx(), token, n, methods...)
	if err != nil {
		h.t.Fatalf("waiting for %d sent messages: %v; got %s", n, err, describeCalls(got))
	}
	return got
}

// waitLog waits for a log entry with message msg.
func (h *harness) waitLog(msg string) observer.LoggedEntry {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if es := h.logs.FilterMessage(msg).All(); len(es) > 0 {
			return es[0]
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.t.Fatalf("no log entry %q", msg)
	return observer.LoggedEntry{}
}

// exchange sends text from user and returns the next delivery.
func (h *harness) exchange(token string, user int64, text string) telegramtest.Call {
	h.t.Helper()
	before := len(h.srv.Sent(token))
	h.srv.SendText(token, user, user, text)
	return h.waitSent(token, before+1)[before]
}

func describeCalls(calls []telegramtest.Call) string {
	var parts []string
	for _, c := range calls {
		parts = append(parts, fmt.Sprintf("%s(chat %d) %q", c.Method, c.ChatID(), c.Param("text")))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
