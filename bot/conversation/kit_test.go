package conversation

// The pipeline's test kit: the pipeline on fakes of its ports, each
// writing what it is asked into one ordered log of events, so a test
// reads exactly what reached the chat, the agent, the state and the
// message's progress, and in which order. The state is the real embedded
// backend (state/sqlite on a temporary file), wrapped only to record the
// calls a test asserts and to refuse one where a test must: no fake of it
// can drift from the real thing. The end-to-end behaviour through a real
// Manager and Telegram stand-in is package bot's (harness_test.go); this
// kit pins down what only the ports show.

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/bot/brain"
	"brainbot/bot/porttest"
	"brainbot/claude"
	"brainbot/message"
	"brainbot/metrics"
	"brainbot/state"
	"brainbot/state/sqlite"
	"brainbot/state/sqlite/sqlitefresh"
)

// Who talks to the kit's bot.
const (
	kitBot   = "alpha"
	kitUser  = int64(7)
	kitGroup = int64(-100500)
)

// baseBrain is the kit's brain; tests add settings to it. No streaming
// and no rich messages, so a text reply is one Outbox.Text.
const baseBrain = "name: Alpha\nsystem_prompt: Be brief with {{user_first_name}}.\ntelegram:\n  token_env: ALPHA_TOKEN\n" +
	"stream: false\nrich: \"off\"\n"

type kit struct {
	t      *testing.T
	p      *Pipeline
	ev     *porttest.Log
	agent  *fakeAgent
	store  *recStore
	chats  *fakeChats
	data   string
	logs   *observer.ObservedLogs
	brain  *brain.Brain
	panels *fakePanels
	queues *fakeQueues
}

// newKit makes a pipeline whose bot kitBot has the base brain with extra
// YAML; cfg, if given, changes its Config before New.
func newKit(t *testing.T, extra string, cfg ...func(*Config)) *kit {
	t.Helper()
	b, err := brain.ParseBytes(kitBot+".yaml", []byte(baseBrain+extra))
	if err != nil {
		t.Fatal(err)
	}
	ev := &porttest.Log{}
	data := t.TempDir()
	st := sqlitefresh.Open(t, filepath.Join(data, sqlite.FileName))
	core, logs := observer.New(zap.DebugLevel)
	k := &kit{t: t, ev: ev, data: data, logs: logs, brain: b,
		agent: &fakeAgent{ev: ev, transcripts: filepath.Join(data, "transcripts")},
		store: &recStore{Store: st, ev: ev, fail: map[string]error{}},
		chats: &fakeChats{ev: ev, data: data, admins: map[int64]bool{}}}
	k.panels, k.queues = &fakePanels{}, &fakeQueues{}
	c := Config{DataDir: data, State: k.store, Agent: k.agent, Chats: k.chats, Panels: k.panels, Queues: k.queues,
		Brain: func(bot string) *brain.Brain {
			if bot == kitBot {
				return b
			}
			return nil
		},
		MaxClaude: 4, MaxWaitingPerBot: 4, MaxWait: time.Minute, QueueSize: 4,
		Now: time.Now, Metrics: metrics.New(), Log: zap.New(core)}
	for _, f := range cfg {
		f(&c)
	}
	k.p = New(c)
	return k
}

// private is a message kitUser wrote to the bot in their private chat,
// as the intake hands it on (text that starts with a command has it
// read: Decode's job, done here by hand).
func (k *kit) private(text string) *message.Inbound {
	return k.inbound(message.Update{Kind: message.Written, Key: message.Key{Bot: kitBot, Chat: kitUser}, ChatType: "private",
		Sender: kitUser, FirstName: "Ann", SenderName: "Ann", Language: "en", Text: text})
}

// inGroup is a message user wrote in kitGroup.
func (k *kit) inGroup(user int64, name, text string) *message.Inbound {
	return k.inbound(message.Update{Kind: message.Written, Key: message.Key{Bot: kitBot, Chat: kitGroup}, ChatType: "supergroup",
		Sender: user, FirstName: name, SenderName: name, Text: text})
}

var nextUpdate struct {
	sync.Mutex
	id int
}

func (k *kit) inbound(u message.Update) *message.Inbound {
	nextUpdate.Lock()
	nextUpdate.id++
	u.ID, u.MessageID = int64(nextUpdate.id), nextUpdate.id
	nextUpdate.Unlock()
	if cmd, ok := strings.CutPrefix(u.Text, "/"); ok {
		u.Command, _, _ = strings.Cut(cmd, " ")
	}
	return &message.Inbound{Update: u, RequestID: fmt.Sprintf("req-%d", u.ID), Arrived: time.Now(),
		Progress: &fakeProgress{ev: k.ev, done: make(chan struct{})}}
}

// serve serves in as the conversation's queue does, and returns when it
// is finished.
func (k *kit) serve(in *message.Inbound) {
	k.t.Helper()
	k.p.Serve(context.Background(), in)
	select {
	case <-in.Progress.(*fakeProgress).done:
	default:
		k.t.Fatal("Serve returned before it finished the message's deliveries")
	}
}

// outcome is the outcome the summary line of request id says.
func (k *kit) outcome(requestID string) string {
	k.t.Helper()
	var outcomes []string
	for _, l := range k.logs.FilterMessage("request").FilterField(zap.String("request_id", requestID)).All() {
		outcomes = append(outcomes, fmt.Sprint(l.ContextMap()["outcome"]))
	}
	if len(outcomes) != 1 {
		k.t.Fatalf("summary lines of %s say %q, want one", requestID, outcomes)
	}
	return outcomes[0]
}

// want checks that port's events are exactly want.
func (k *kit) want(port string, want ...string) {
	k.t.Helper()
	if got := k.ev.Of(port); !slices.Equal(got, want) {
		k.t.Errorf("%s events:\n got  %q\n want %q", port, got, want)
	}
}

// before checks that event a came before event b.
func (k *kit) before(a, b string) {
	k.t.Helper()
	ia, ib := k.ev.Index(a), k.ev.Index(b)
	if ia < 0 || ib < 0 || ia > ib {
		k.t.Errorf("want %q (at %d) before %q (at %d) in %q", a, ia, b, ib, k.ev.Of(""))
	}
}

// usage is what the store reports of kitBot's usage.
func (k *kit) usage() []state.UsageLine {
	k.t.Helper()
	lines, err := k.store.UsageReport(context.Background(), state.UsageFilter{Bot: kitBot})
	if err != nil {
		k.t.Fatal(err)
	}
	return lines
}

// fakeAgent plays the Claude driver: answer (by default a text reply in
// the request's session, or a new one) decides each run.
type fakeAgent struct {
	ev        *porttest.Log
	mu        sync.Mutex
	reqs      []claude.Request
	answer    func(ctx context.Context, req claude.Request) (*claude.Result, error)
	interrupt func(conversation string) bool
	// transcripts is the folder of SessionFile.
	transcripts string
}

func (a *fakeAgent) Run(ctx context.Context, req claude.Request) (*claude.Result, error) {
	a.mu.Lock()
	a.reqs = append(a.reqs, req)
	answer := a.answer
	a.mu.Unlock()
	a.ev.Add("agent: run %s session=%q resume=%v retry=%v", req.Mode, req.SessionID, req.Resume, req.Retry)
	if answer != nil {
		return answer(ctx, req)
	}
	return &claude.Result{Text: "Hello, Ann.", Answered: true, SessionID: cmp.Or(req.SessionID, "session-1"), CostUSD: 0.02,
		Tokens: claude.Tokens{Input: 10, Output: 5}}, nil
}

func (a *fakeAgent) Interrupt(conversation string) bool {
	a.ev.Add("agent: interrupt %s", conversation)
	return a.interrupt != nil && a.interrupt(conversation)
}

func (a *fakeAgent) End(conversation string) { a.ev.Add("agent: end %s", conversation) }

// SessionFile keeps the fake's transcripts, which tests write, in the
// kit's data folder.
func (a *fakeAgent) SessionFile(bot, session string) string {
	return filepath.Join(a.transcripts, bot, session+".jsonl")
}

func (a *fakeAgent) requests() []claude.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.reqs)
}

// recStore is the embedded backend, recording the calls tests assert
// (sessions and transcripts) and refusing a method where a test says so
// (fail: method name → its error).
type recStore struct {
	*sqlite.Store
	ev   *porttest.Log
	mu   sync.Mutex
	fail map[string]error
	// newerCopy: Restore brings a newer transcript, as a cluster's does
	// when another instance answered last (release is called first).
	newerCopy bool
}

func (s *recStore) refuse(method string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = err
}

func (s *recStore) failing(method string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fail[method]
}

func (s *recStore) Session(ctx context.Context, c message.Key) (state.Session, bool, error) {
	if err := s.failing("Session"); err != nil {
		return state.Session{}, false, err
	}
	return s.Store.Session(ctx, c)
}

func (s *recStore) UseSession(ctx context.Context, c message.Key, id string, now time.Time) error {
	s.ev.Add("state: use session %s", id)
	if err := s.failing("UseSession"); err != nil {
		return err
	}
	return s.Store.UseSession(ctx, c, id, now)
}

func (s *recStore) TakeDaily(ctx context.Context, bot string, user int64, limit int, now time.Time) (bool, time.Time, error) {
	if err := s.failing("TakeDaily"); err != nil {
		return false, time.Time{}, err
	}
	return s.Store.TakeDaily(ctx, bot, user, limit, now)
}

func (s *recStore) Restore(ctx context.Context, bot, session string, release func()) error {
	s.ev.Add("state: restore %s %s", bot, session)
	if s.newerCopy {
		release()
	}
	if err := s.failing("Restore"); err != nil {
		return err
	}
	return s.Store.Restore(ctx, bot, session, release)
}

func (s *recStore) Save(ctx context.Context, bot, session string) error {
	s.ev.Add("state: save %s %s", bot, session)
	if err := s.failing("Save"); err != nil {
		return err
	}
	return s.Store.Save(ctx, bot, session)
}

func (s *recStore) Forget(bot, session string) {
	s.ev.Add("state: forget %s %s", bot, session)
	s.Store.Forget(bot, session)
}

// fakeChats is the transport: every outbox it makes writes to the log
// ("out: ..."; a guest query's as "out: guest q: ..."); admins says who
// administers kitGroup.
type fakeChats struct {
	ev      *porttest.Log
	data    string // files sent are named relative to it
	mu      sync.Mutex
	admins  map[int64]bool
	nextID  int
	drafts  bool // private chats show drafts (streams have a DraftID)
	fetched map[string][]byte
	// buttons are the callback data of every button attached, in order;
	// draft is the last stream's draft.
	buttons []string
	draft   int64
	// blocked: the user blocked the bot; every text sent fails with
	// message.ErrBlocked, as Telegram's 403 does.
	blocked bool
}

func (c *fakeChats) Outbox(to message.Key, group bool, replyTo int, log *zap.Logger) Outbox {
	return &fakeOutbox{chats: c, prefix: "out: ", drafts: c.drafts && !group}
}

func (c *fakeChats) GuestOutbox(bot, queryID string, log *zap.Logger) Outbox {
	return &fakeOutbox{chats: c, prefix: "out: guest " + queryID + ": "}
}

func (c *fakeChats) Fetch(ctx context.Context, bot, fileID string, limit int64) ([]byte, error) {
	c.ev.Add("out: fetch %s within %d", fileID, limit)
	c.mu.Lock()
	defer c.mu.Unlock()
	data, ok := c.fetched[fileID]
	if ok && int64(len(data)) > limit {
		return nil, message.ErrTooBig
	}
	if !ok {
		return nil, fmt.Errorf("no file %s", fileID)
	}
	return data, nil
}

func (c *fakeChats) AnswerTap(ctx context.Context, bot, query, notice string) error {
	c.ev.Add("out: tap answered %q", notice)
	return nil
}

func (c *fakeChats) IsAdmin(ctx context.Context, bot string, chat, user int64) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ev.Add("out: is %d an admin of %d", user, chat)
	return chat == kitGroup && c.admins[user], nil
}

func (c *fakeChats) newID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	return c.nextID
}

// fakeOutbox records what it sends; every message gets a new id.
type fakeOutbox struct {
	chats  *fakeChats
	prefix string
	drafts bool
	mu     sync.Mutex
	sent   []int
}

func (o *fakeOutbox) add(format string, args ...any) { o.chats.ev.Add(o.prefix+format, args...) }

func (o *fakeOutbox) sendOne() {
	id := o.chats.newID()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent = append(o.sent, id)
}

func (o *fakeOutbox) Text(ctx context.Context, text string, formatted bool) error {
	o.chats.mu.Lock()
	blocked := o.chats.blocked
	o.chats.mu.Unlock()
	if blocked {
		o.add("text %q refused: blocked", text)
		return message.ErrBlocked
	}
	o.add("text %q formatted=%v", text, formatted)
	o.sendOne()
	return nil
}

func (o *fakeOutbox) Notice(ctx context.Context, text string, user int64) error {
	o.add("notice to %d %q", user, text)
	o.sendOne()
	return nil
}

func (o *fakeOutbox) Rich(ctx context.Context, text string, always bool) (bool, error) {
	o.add("rich %q always=%v", text, always)
	return false, nil
}

func (o *fakeOutbox) File(ctx context.Context, kind message.FileKind, path string) error {
	rel, err := filepath.Rel(o.chats.data, path)
	if err != nil {
		rel = path
	}
	o.add("file %d %s", kind, filepath.ToSlash(rel))
	o.sendOne()
	return nil
}

func (o *fakeOutbox) KeepAction(ctx context.Context, action message.Action) (stop func()) {
	o.chats.ev.Add("action: %v", action)
	return func() {}
}

func (o *fakeOutbox) Stream(ctx context.Context) Stream {
	var draft int64
	if o.drafts {
		draft = int64(o.chats.newID())
		o.chats.mu.Lock()
		o.chats.draft = draft
		o.chats.mu.Unlock()
	}
	o.add("stream draft=%d", draft)
	return &fakeStream{o: o, draft: draft}
}

func (o *fakeOutbox) Withdraw(ctx context.Context) error {
	o.add("withdraw")
	return nil
}

func (o *fakeOutbox) Sent() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.sent)
}

func (o *fakeOutbox) Attach(kb message.Keyboard) {
	var labels []string
	o.chats.mu.Lock()
	for _, row := range kb {
		for _, b := range row {
			labels = append(labels, b.Text)
			o.chats.buttons = append(o.chats.buttons, b.Data)
		}
	}
	o.chats.mu.Unlock()
	o.add("attach %q", labels)
}

func (o *fakeOutbox) Quote(id int) { o.add("quote %d", id) }

func (o *fakeOutbox) Amend(ctx context.Context, id int, text, addition string) error {
	o.add("amend %d %q", id, addition)
	return nil
}

func (o *fakeOutbox) DropButtons(ctx context.Context, id int) error {
	o.add("drop buttons %d", id)
	return nil
}

// fakeStream records what a streamed reply showed ("out: shows ...").
type fakeStream struct {
	o     *fakeOutbox
	draft int64
}

func (s *fakeStream) Update(text string)  { s.o.add("shows %q", text) }
func (s *fakeStream) Finish() time.Time   { s.o.add("stream finished"); return time.Time{} }
func (s *fakeStream) Cancel()             { s.o.add("stream cancelled") }
func (s *fakeStream) DraftID() int64      { return s.draft }
func (s *fakeStream) UseRich(always bool) {}

// fakeProgress is a message's deliveries: attempts and charged are what
// the log read back; markErr refuses a mark ("charged", "attempt").
type fakeProgress struct {
	ev       *porttest.Log
	attempts int
	charged  bool
	markErr  map[string]error
	done     chan struct{}
}

func (p *fakeProgress) Attempts() int { return p.attempts }
func (p *fakeProgress) Charged() bool { return p.charged }

func (p *fakeProgress) MarkCharged(ctx context.Context, mode string) error {
	p.ev.Add("progress: charged %s", mode)
	return p.markErr["charged"]
}

func (p *fakeProgress) MarkAttempt(ctx context.Context, mode string) error {
	p.ev.Add("progress: attempt %s", mode)
	return p.markErr["attempt"]
}

func (p *fakeProgress) Answered() { p.ev.Add("progress: answered") }

func (p *fakeProgress) Finish(keep bool) {
	p.ev.Add("progress: finish keep=%v", keep)
	close(p.done)
}

// progressOf is in's fake progress, to preset what its log read back.
func progressOf(in *message.Inbound) *fakeProgress { return in.Progress.(*fakeProgress) }

// fakePanels: the kit's bot sits on no panel; start answers /panel.
type fakePanels struct {
	onPanel bool
	start   func() (outcome, reply string, err error)
}

func (f *fakePanels) Start(ctx context.Context, m *message.Inbound, b *brain.Brain, log *zap.Logger) (string, string, error) {
	if f.start == nil {
		return "ignored", "", nil
	}
	return f.start()
}

func (f *fakePanels) OnPanel(bot string) bool { return f.onPanel }

// writeFile is the model's turn two: the tool wrote the file req asked
// for under dir (audio-output, image-output) with ext, and the answer
// reports it.
func (k *kit) writeFile(req claude.Request, dir, ext string) (*claude.Result, error) {
	path := filepath.Join(k.data, dir, req.FilePrefix+"-1"+ext)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte("not really "+ext), 0o600); err != nil {
		return nil, err
	}
	return &claude.Result{Text: "Here it is.", Answered: true, SessionID: "session-1", FilePath: path,
		FilePrefix: req.FilePrefix, FileExt: ext, CostUSD: 0.03}, nil
}

// fakeQueues are the intake's queues: waiting messages per user, which a
// forget drops.
type fakeQueues struct {
	mu      sync.Mutex
	waiting map[int64]int
}

func (f *fakeQueues) DropWaiting(bot string, user int64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.waiting[user]
	delete(f.waiting, user)
	return n
}
