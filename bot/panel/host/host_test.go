package host

// The host at its ports: fakes of the pipeline, the members (their
// outboxes) and the speaker write one ordered log of events; the runs are
// kept by the real embedded backend (state/sqlite on a temporary file),
// wrapped only to record them, so ErrPanelStarted and ErrPanelBusy are
// the store's own. The engine's turns are its own tests'
// (engine/engine_test.go); a panel through the whole Manager is package
// bot's (panels_test.go).

import (
	"context"
	"encoding/json"
	"errors"
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
	"brainbot/bot/panel/engine"
	"brainbot/bot/porttest"
	"brainbot/claude"
	"brainbot/message"
	"brainbot/metrics"
	"brainbot/state"
	"brainbot/state/sqlite"
	"brainbot/state/sqlite/sqlitefresh"
	"brainbot/toolspec"
)

const (
	group   = int64(-100700)
	starter = int64(7)
)

// hostKit is a host of the bots alpha and beta, on the panel duo.
type hostKit struct {
	t       *testing.T
	h       *Host
	cfg     Config
	ev      *porttest.Log
	pipe    *fakePipeline
	members *fakeMembers
	runs    *recRuns
	db      string
	logs    *observer.ObservedLogs
	brains  map[string]*brain.Brain
	// launched are the runs the host launched, not run until a test runs
	// them (runLaunched).
	launched chan func(ctx context.Context)
}

// newHostKit makes a host whose panel file duo.yaml is panelYAML.
func newHostKit(t *testing.T, panelYAML string) *hostKit {
	t.Helper()
	dir, data := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "duo.yaml"), []byte(panelYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	brains := map[string]*brain.Brain{}
	for _, id := range []string{"alpha", "beta"} {
		name := strings.ToUpper(id[:1]) + id[1:]
		b, err := brain.ParseBytes(id+".yaml", []byte("name: "+name+"\nsystem_prompt: Be brief.\ntelegram:\n  token_env: T\n"))
		if err != nil {
			t.Fatal(err)
		}
		brains[id] = b
	}
	ev := &porttest.Log{}
	core, logs := observer.New(zap.InfoLevel)
	k := &hostKit{t: t, ev: ev, db: filepath.Join(data, sqlite.FileName), logs: logs, brains: brains,
		pipe:     &fakePipeline{ev: ev, admit: map[string][3]any{}},
		members:  &fakeMembers{ev: ev, connected: map[string]bool{"alpha": true, "beta": true}, inChat: map[string]bool{"alpha": true, "beta": true}},
		launched: make(chan func(ctx context.Context), 4)}
	k.runs = k.openRuns()
	k.cfg = Config{Dir: dir, DataDir: data, Pipeline: k.pipe, Members: k.members, Runs: k.runs,
		Brain:  func(bot string) *brain.Brain { return brains[bot] },
		Launch: func(fn func(ctx context.Context)) { k.launched <- fn },
		Now:    time.Now, Metrics: metrics.New(), Log: zap.New(core)}
	k.h = New(k.cfg)
	return k
}

// openRuns opens the kit's database, as a process starting would.
func (k *hostKit) openRuns() *recRuns {
	k.t.Helper()
	return &recRuns{Store: sqlitefresh.Open(k.t, k.db), ev: k.ev}
}

// restart is a new host on the same database, as after a restart.
func (k *hostKit) restart() *Host {
	k.runs = k.openRuns()
	k.cfg.Runs = k.runs
	return New(k.cfg)
}

var nextMessage struct {
	sync.Mutex
	id int
}

// panelMessage is text sent to bot in the group.
func panelMessage(bot, text string) *message.Inbound {
	nextMessage.Lock()
	defer nextMessage.Unlock()
	nextMessage.id++
	return &message.Inbound{Update: message.Update{Kind: message.Written, Key: message.Key{Bot: bot, Chat: group}, ChatType: "supergroup",
		MessageID: nextMessage.id, Sender: starter, SenderName: "Ann", FirstName: "Ann", Text: text, Command: "panel"}}
}

// start sends m to its bot.
func (k *hostKit) start(h *Host, m *message.Inbound) (outcome, reply string, err error) {
	return h.Start(context.Background(), m, k.brains[m.Key.Bot], zap.NewNop())
}

// began starts m on the kit's host, which must launch its run.
func (k *hostKit) began(m *message.Inbound) {
	k.t.Helper()
	if outcome, reply, err := k.start(k.h, m); outcome != "panel" || reply != "" || err != nil {
		k.t.Fatalf("started: %q, %q, %v", outcome, reply, err)
	}
}

// noneLeftRunning checks that a later process has nothing to resume.
func (k *hostKit) noneLeftRunning() {
	k.t.Helper()
	if left, err := k.restart().cfg.Runs.RunningPanels(context.Background()); err != nil || len(left) != 0 {
		k.t.Errorf("left running: %v, %v", left, err)
	}
}

// runLaunched runs the run the host launched last, to its end.
func (k *hostKit) runLaunched() {
	k.t.Helper()
	select {
	case fn := <-k.launched:
		fn(context.Background())
	default:
		k.t.Fatal("no run launched")
	}
}

func (k *hostKit) noneLaunched() {
	k.t.Helper()
	if n := len(k.launched); n > 0 {
		k.t.Errorf("%d runs launched", n)
	}
}

// fakePipeline answers every turn: a text, or turn 2's comment on the
// other member.
type fakePipeline struct {
	ev *porttest.Log
	mu sync.Mutex
	// admit is what Admit says of a member: outcome, reply, error.
	admit     map[string][3]any
	questions []Question
}

func (p *fakePipeline) Admit(ctx context.Context, b *brain.Brain, bot string, user int64, log *zap.Logger) (string, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.admit[bot]
	if !ok {
		return "", "", nil
	}
	err, _ := a[2].(error)
	return a[0].(string), a[1].(string), err
}

func (p *fakePipeline) Charge(ctx context.Context, bot string, user int64) error {
	p.ev.Add("pipeline: charge %s %d", bot, user)
	return nil
}

func (p *fakePipeline) Ask(ctx context.Context, q Question) (*claude.Result, error) {
	p.mu.Lock()
	p.questions = append(p.questions, q)
	p.mu.Unlock()
	if q.Schema == "" {
		return &claude.Result{Text: q.Bot + " thinks so", CostUSD: 0.01}, nil
	}
	other := "alpha"
	if q.Bot == "alpha" {
		other = "beta"
	}
	c, _ := json.Marshal(map[string]string{"target": other, "comment": q.Bot + " on " + other})
	return &claude.Result{Structured: c, CostUSD: 0.01}, nil
}

func (p *fakePipeline) Spent(ctx context.Context, q Question, openAIUSD float64) {
	p.ev.Add("pipeline: spent %s", q.Bot)
}

func (p *fakePipeline) KeepQuestionSpares(set string, q Question, n int) {
	p.ev.Add("spares: %s %d of schema %v", set, n, q.Schema != "")
}

// fakeMembers: connected and inChat say where each bot is; each message
// sent gets a new id.
type fakeMembers struct {
	ev        *porttest.Log
	mu        sync.Mutex
	connected map[string]bool
	inChat    map[string]bool
	nextID    int
}

// connect says whether bot is connected from now on.
func (m *fakeMembers) connect(bot string, connected bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.connected[bot] = connected
}

func (m *fakeMembers) Connected(bot string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.connected[bot]
}

func (m *fakeMembers) InChat(ctx context.Context, bot string, chat int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inChat[bot] && chat == group, nil
}

func (m *fakeMembers) Outbox(to message.Key, replyTo int, log *zap.Logger) Outbox {
	return &fakeOutbox{m: m, bot: to.Bot, replyTo: replyTo}
}

type fakeOutbox struct {
	m       *fakeMembers
	bot     string
	replyTo int
	sent    []int
}

func (o *fakeOutbox) send(what string) {
	o.m.mu.Lock()
	o.m.nextID++
	id := 1000 + o.m.nextID
	o.m.mu.Unlock()
	o.sent = append(o.sent, id)
	o.m.ev.Add("out: %d %s %s replying to %d", id, o.bot, what, o.replyTo)
}

func (o *fakeOutbox) Text(ctx context.Context, text string, formatted bool) error {
	o.send(fmt.Sprintf("text %q", text))
	return nil
}

func (o *fakeOutbox) File(ctx context.Context, kind message.FileKind, path string) error {
	o.send(fmt.Sprintf("file %d %s", kind, filepath.Base(path)))
	return nil
}

func (o *fakeOutbox) KeepAction(ctx context.Context, action message.Action) func() { return func() {} }
func (o *fakeOutbox) Sent() []int                                                  { return slices.Clone(o.sent) }

// recRuns is the embedded backend's panel runs, recording each call; a
// save as the run it stored: its turn, the messages it knows were sent
// and whether it finished.
type recRuns struct {
	*sqlite.Store
	ev *porttest.Log
}

func (r *recRuns) StartPanel(ctx context.Context, pr state.PanelRun) error {
	err := r.Store.StartPanel(ctx, pr)
	r.ev.Add("runs: start message %d: %v", pr.MessageID, err)
	return err
}

func (r *recRuns) SavePanel(ctx context.Context, id string, data []byte, finished bool, now time.Time) error {
	var run engine.Run
	if json.Unmarshal(data, &run) != nil {
		r.ev.Add("runs: save unreadable finished=%v", finished)
	} else {
		var sent []string
		for _, it := range run.Items {
			if it.MessageID != 0 {
				sent = append(sent, fmt.Sprint(it.MessageID))
			}
		}
		r.ev.Add("runs: save turn %d sent [%s] finished=%v", run.Turn, strings.Join(sent, " "), finished)
	}
	return r.Store.SavePanel(ctx, id, data, finished, now)
}

// fakeSpeaker speaks anything.
type fakeSpeaker struct{}

func (fakeSpeaker) Speak(ctx context.Context, text string, settings toolspec.SpeechSettings) ([]byte, string, int, error) {
	return []byte("ogg " + text), ".ogg", len(text), nil
}

// A /panel message reaches every member bot: the first to take it up
// journals the run, counts it against each member's daily limit and
// launches it; the others stay silent. The run is journaled after each
// step: every message sent is in the journal before the next goes out,
// and the run ends finished.
func TestPanelRunsOnceAndIsJournaledAfterEachStep(t *testing.T) {
	k := newHostKit(t, "members: [alpha, beta]\n")
	m := panelMessage("alpha", "/panel tea or coffee?")
	k.began(m)
	beta := panelMessage("beta", m.Text)
	beta.MessageID = m.MessageID
	if outcome, reply, err := k.start(k.h, beta); outcome != "duplicate" || reply != "" || err != nil {
		t.Fatalf("the second member bot answered: %q, %q, %v", outcome, reply, err)
	}
	if got := k.ev.Of("pipeline"); !slices.Equal(got, []string{"charge alpha 7", "charge beta 7"}) {
		t.Errorf("charged %q, want each member once", got)
	}
	k.runLaunched()
	k.noneLaunched()

	// Between a message sent and the next, a save knows every message
	// sent so far: a restart never sends one twice.
	var sent []string
	all := k.ev.All()
	for i, ev := range all {
		var id int
		if _, err := fmt.Sscanf(ev, "out: %d", &id); err != nil {
			continue
		}
		sent = append(sent, fmt.Sprint(id))
		journaled := false
		for _, later := range all[i+1:] {
			if strings.HasPrefix(later, "out: ") {
				break
			}
			if strings.HasPrefix(later, "runs: save") && strings.Contains(later, "["+strings.Join(sent, " ")+"]") {
				journaled = true
			}
		}
		if !journaled {
			t.Errorf("message %d sent, not journaled before the next one: %q", id, all[i:])
		}
	}
	if len(sent) != 6 { // two answers, two comments, two replies
		t.Errorf("%d messages sent, want 6: %q", len(sent), k.ev.Of("out"))
	}
	saves := k.ev.Of("runs")
	if last := saves[len(saves)-1]; !strings.HasSuffix(last, "finished=true") {
		t.Errorf("last save %q, want the run finished", last)
	}
	if strings.Count(strings.Join(k.ev.Of("runs"), "\n"), "start message") != 1 {
		t.Errorf("runs %q, want one started", saves)
	}
	for _, q := range k.pipe.questions {
		if q.Chat != group || q.User != starter || q.UserName != "Ann" || q.Run == "" || q.Brain != k.brains[q.Bot] ||
			q.Speak || (q.Schema != "") != (q.Schema == engine.CommentSchema) {
			t.Errorf("asked %+v", q)
		}
	}
	if got := k.logs.FilterMessage("panel").FilterField(zap.String("outcome", "ok")).Len(); got != 1 {
		t.Errorf("%d summary lines with outcome ok", got)
	}
	k.noneLeftRunning() // finished
}

// The same /panel message handed out again after a restart finds its run
// in the store (ErrPanelStarted) and stays silent: the run resumes by
// itself. Another /panel while it runs is told to wait (ErrPanelBusy).
func TestPanelStartedOrBusyInTheStore(t *testing.T) {
	k := newHostKit(t, "members: [alpha, beta]\n")
	m := panelMessage("alpha", "/panel tea or coffee?")
	k.began(m)
	<-k.launched // cut short by the restart
	h := k.restart()
	if outcome, reply, err := k.start(h, m); outcome != "duplicate" || reply != "" || err != nil {
		t.Errorf("replayed /panel answered %q, %q, %v", outcome, reply, err)
	}
	outcome, reply, err := k.start(h, panelMessage("beta", "/panel milk first?"))
	if outcome != "busy" || !strings.HasPrefix(reply, "A panel is already running in this group.") || err != nil {
		t.Errorf("second /panel answered %q, %q, %v", outcome, reply, err)
	}
	k.noneLaunched()
	if got := k.ev.Of("pipeline"); len(got) != 2 {
		t.Errorf("charged %q, want only the first run's two members", got)
	}
}

// /panel is answered without a run where it cannot run: each reply for
// the one who asked.
func TestPanelRefusals(t *testing.T) {
	for _, c := range []struct {
		name, panel, text, outcome, reply string
		chat                              string
		before                            func(*hostKit)
		err                               bool
	}{
		{name: "private chat", text: "/panel tea?", chat: "private", outcome: "command", reply: "Panels run in groups"},
		{name: "no question", text: "/panel", outcome: "command", reply: "Ask the panel a question: /panel should cities ban cars?\nAlpha, Beta answer it"},
		{name: "not allowed", panel: "access:\n  allowed_users: [42]\n", text: "/panel tea?", outcome: "denied"},
		{name: "member not in the group", text: "/panel tea?", outcome: "command",
			reply:  "This panel needs Alpha, Beta in this group; missing: Beta.",
			before: func(k *hostKit) { k.members.inChat["beta"] = false }},
		{name: "member's brain gone", text: "/panel tea?", outcome: "command",
			reply:  "This panel needs Alpha, beta in this group; missing: beta.",
			before: func(k *hostKit) { delete(k.brains, "beta") }},
		{name: "member's limit", text: "/panel tea?", outcome: "limited", reply: "Enough for today.",
			before: func(k *hostKit) { k.pipe.admit["beta"] = [3]any{"limited", "Enough for today.", nil} }},
		{name: "limits unreadable", text: "/panel tea?", outcome: "limit", err: true,
			before: func(k *hostKit) { k.pipe.admit["alpha"] = [3]any{"", "", errors.New("database is locked")} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newHostKit(t, "members: [alpha, beta]\n"+c.panel)
			if c.before != nil {
				c.before(k)
			}
			m := panelMessage("alpha", c.text)
			if c.chat != "" {
				m.ChatType = c.chat
			}
			want := c.reply
			if c.outcome == "denied" {
				want = k.brains["alpha"].Messages.Denied
			}
			outcome, reply, err := k.start(k.h, m)
			if outcome != c.outcome || !strings.HasPrefix(reply, want) || (err != nil) != c.err {
				t.Errorf("answered %q, %q, %v; want %q, %q", outcome, reply, err, c.outcome, want)
			}
			k.noneLaunched()
			for _, port := range []string{"runs", "pipeline", "out"} {
				if got := k.ev.Of(port); len(got) != 0 {
					t.Errorf("%s: %q, want nothing journaled, charged or sent", port, got)
				}
			}
		})
	}
}

// A panel that speaks sends its members' voice notes, and records what
// the speech cost; without a speaker (no OpenAI key) its members write.
func TestSpeakingPanel(t *testing.T) {
	for _, c := range []struct {
		name    string
		speaker Speaker
		sends   string
	}{
		{"with a speaker", fakeSpeaker{}, "file"},
		{"without a speaker", nil, "text"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newHostKit(t, "members: [alpha, beta]\nspeak: true\n")
			k.cfg.Speaker = c.speaker
			k.h = New(k.cfg)
			k.began(panelMessage("alpha", "/panel tea?"))
			k.runLaunched()
			out := k.ev.Of("out")
			for _, o := range out {
				if f := strings.Fields(o); f[2] != c.sends {
					t.Errorf("sent %q, want each a %s", o, c.sends)
				}
			}
			spent := 0
			for _, p := range k.ev.Of("pipeline") {
				if strings.HasPrefix(p, "spent ") {
					spent++
				}
			}
			if want := map[bool]int{true: len(out), false: 0}[c.speaker != nil]; len(out) != 6 || spent != want {
				t.Errorf("%d sent, speech paid %d times, want 6 and %d", len(out), spent, want)
			}
			for _, q := range k.pipe.questions {
				if q.Speak != (c.speaker != nil) {
					t.Errorf("%s asked with speak %v", q.Bot, q.Speak)
				}
			}
		})
	}
}

// After a restart the runs the store lists are taken up once their
// members are connected; an unreadable one is dropped (saved finished);
// while members are away the host waits, and stops waiting at shutdown.
func TestResume(t *testing.T) {
	k := newHostKit(t, "members: [alpha, beta]\n")
	k.began(panelMessage("alpha", "/panel tea?"))
	<-k.launched // cut short by the restart
	if err := k.runs.StartPanel(context.Background(), state.PanelRun{ID: "broken", Chat: group - 1, MessageID: 1,
		Run: []byte("{not json"), Created: time.Now()}); err != nil {
		t.Fatal(err)
	}

	// Away: nothing is taken up until shutdown.
	k.members.connect("beta", false)
	h := k.restart()
	stopping := make(chan struct{})
	resumed := make(chan struct{})
	go func() {
		defer close(resumed)
		h.Resume(context.Background(), stopping)
	}()
	close(stopping)
	<-resumed
	k.noneLaunched()

	k.members.connect("beta", true)
	h = k.restart()
	h.Resume(context.Background(), make(chan struct{}))
	k.runLaunched()
	k.noneLaunched()
	if got := k.ev.Of("runs"); !slices.Contains(got, "save unreadable finished=true") {
		t.Errorf("runs %q: the unreadable run was not dropped", got)
	}
	if n := len(k.ev.Of("out")); n != 6 {
		t.Errorf("the resumed run sent %d messages, want 6", n)
	}
	if got := k.logs.FilterMessage("panel").FilterField(zap.Int("resumes", 1)).Len(); got != 1 {
		t.Errorf("%d summary lines of a run resumed once", got)
	}
	k.noneLeftRunning()
}

// A member whose bot is gone by the time its turn is sent sits out the
// later turns; the closing note says so, from a member still there.
func TestMemberGoneDuringTheRun(t *testing.T) {
	k := newHostKit(t, "members: [alpha, beta]\n")
	m := panelMessage("alpha", "/panel tea?")
	k.began(m)
	k.members.connect("beta", false)
	k.runLaunched()
	// How far alpha gets alone depends on when beta's send fails (turn
	// 2's work overlaps turn 1's sending); beta never speaks, and the note
	// comes last.
	out := k.ev.Of("out")
	for _, o := range out {
		if strings.Fields(o)[1] != "alpha" {
			t.Errorf("sent %q: only alpha is there", o)
		}
	}
	if last := out[len(out)-1]; len(out) < 2 || !strings.Contains(last, `text "Sat out: Beta (turn 1)`) ||
		!strings.HasSuffix(last, fmt.Sprintf("replying to %d", m.MessageID)) {
		t.Errorf("sent %q, want alpha's answer and the note last, replying to the question", out)
	}
	if got := k.logs.FilterMessage("panel").FilterField(zap.String("outcome", "partial")).Len(); got != 1 {
		t.Errorf("%d summary lines with outcome partial", got)
	}
}

// Each member keeps spares of its two shapes of turn while it sits on a
// panel with a brain; they end when it does not.
func TestSpares(t *testing.T) {
	k := newHostKit(t, "members: [alpha, beta]\n")
	k.h.KeepSpares("alpha")
	delete(k.brains, "beta")
	k.h.KeepSpares("beta")
	want := []string{"panel/alpha 2 of schema false", "panel/alpha/2 1 of schema true",
		"panel/beta 0 of schema false", "panel/beta/2 0 of schema false"}
	if got := k.ev.Of("spares"); !slices.Equal(got, want) {
		t.Errorf("spares %q, want %q", got, want)
	}
}
