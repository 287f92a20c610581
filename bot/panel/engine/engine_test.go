package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// fakes plays the members, the chat and the journal.
type fakes struct {
	mu sync.Mutex
	// answer decides a member's answer to a turn (attempt counts from 1).
	answer func(ctx context.Context, member string, turn, attempt int) (Answer, error)
	// delay is how long each member's work takes.
	delay    map[string]time.Duration
	asked    map[string]int // "member/turn" → calls
	sent     []sent
	notes    []string
	journal  []byte // the last saved run
	speakErr map[string]error
	voices   []*fakeVoice
	// beforeLast is what each member's voice was given of a turn
	// ("member/turn") before the model's last words of it.
	beforeLast map[string][]string
}

type sent struct {
	member  string
	turn    int
	text    string
	replyTo int
	id      int
}

func newFakes() *fakes {
	return &fakes{delay: map[string]time.Duration{}, asked: map[string]int{}, speakErr: map[string]error{},
		beforeLast: map[string][]string{}}
}

func (f *fakes) Ask(ctx context.Context, run *Run, q Question) (Answer, error) {
	f.mu.Lock()
	key := fmt.Sprintf("%s/%d", q.Member, q.Turn)
	f.asked[key]++
	attempt := f.asked[key]
	d := f.delay[q.Member]
	f.mu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	}
	answer := defaultAnswer
	if f.answer != nil {
		answer = func(*Run, Question) (Answer, error) { return f.answer(ctx, q.Member, q.Turn, attempt) }
	}
	ans, err := answer(run, q)
	if q.OnText != nil {
		f.stream(q, ans.Text) // as the model writes it (speakwhile_test.go)
	}
	return ans, err
}

// defaultAnswer comments on the first answer turn 2's prompt lists, as
// the schema asks.
func defaultAnswer(run *Run, q Question) (Answer, error) {
	if q.Turn != 2 {
		return Answer{Text: fmt.Sprintf("%s turn %d", q.Member, q.Turn), CostUSD: 0.01}, nil
	}
	if q.Schema != CommentSchema || !json.Valid([]byte(q.Schema)) {
		return Answer{}, fmt.Errorf("turn 2 asked with schema %s", q.Schema)
	}
	first := answerID.FindStringSubmatch(q.Prompt)
	if first == nil {
		return Answer{}, fmt.Errorf("turn 2's prompt lists no answer: %s", q.Prompt)
	}
	return structured(first[1], q.Member+" on "+first[1]), nil
}

// answerID is an answer's id as turn 2's prompt lists it.
var answerID = regexp.MustCompile(`<answer id="([^"]+)"`)

func structured(target, text string) Answer {
	data, _ := json.Marshal(comment{Target: target, Comment: text})
	return Answer{Structured: data, CostUSD: 0.01}
}

func (f *fakes) Voice(ctx context.Context, run *Run, member string) Voice {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := &fakeVoice{f: f, member: member}
	f.voices = append(f.voices, v)
	return v
}

// fakeVoice speaks a member's turn: what was written to it, and its
// note; each piece written costs 0.001.
type fakeVoice struct {
	f      *fakes
	member string
	// writes are the texts written, finished the text finished ("": none).
	writes   []string
	finished *string
}

func (v *fakeVoice) Write(text string) {
	v.f.mu.Lock()
	defer v.f.mu.Unlock()
	v.writes = append(v.writes, text)
}

func (v *fakeVoice) Finish(ctx context.Context, text string) ([]byte, string, float64, error) {
	v.f.mu.Lock()
	defer v.f.mu.Unlock()
	v.finished = &text
	usd := 0.001 * float64(len(v.writes))
	if err := v.f.speakErr[v.member]; err != nil {
		return nil, "", usd, err
	}
	if text == "" {
		return nil, "", usd, nil
	}
	return []byte("voice:" + text), ".mp3", usd + 0.001, nil
}

func (f *fakes) Send(ctx context.Context, run *Run, it *Item, replyTo int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := 1000 + len(f.sent)
	f.sent = append(f.sent, sent{member: it.Member, turn: it.Turn, text: it.Text, replyTo: replyTo, id: id})
	return id, nil
}

func (f *fakes) Note(ctx context.Context, run *Run, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notes = append(f.notes, text)
	return nil
}

func (f *fakes) Save(ctx context.Context, run *Run) error {
	data, err := json.Marshal(run)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.journal = data
	return err
}

func (f *fakes) order() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, s := range f.sent {
		out = append(out, fmt.Sprintf("%d:%s", s.turn, s.member))
	}
	return out
}

func (f *fakes) message(turn int, member string) sent {
	for _, s := range f.sent {
		if s.turn == turn && s.member == member {
			return s
		}
	}
	return sent{}
}

func newRun(members ...string) *Run {
	return &Run{ID: "run1", Panel: "p", Chat: -100, MessageID: 7, Question: "should cities ban cars?", Starter: 5,
		Members: members, MaxChars: [3]int{600, 300, 300}, CommentCap: 3, Seed: 42}
}

func newEngine(t *testing.T, f *fakes) *Engine {
	return &Engine{Members: f, Chat: f, Journal: f, Dir: t.TempDir(), Log: zaptest.NewLogger(t)}
}

func TestTurnsInMemberOrderAsReplies(t *testing.T) {
	f := newFakes()
	// The last member is the quickest: the chat order must not follow.
	f.delay = map[string]time.Duration{"a": 60 * time.Millisecond, "b": 30 * time.Millisecond, "c": 0}
	e := newEngine(t, f)
	run := newRun("a", "b", "c")
	rep, err := e.Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	// a→b, b→a, c→a: a got two comments, b one, c none.
	want := []string{"1:a", "1:b", "1:c", "2:a", "2:b", "2:c", "3:a", "3:b"}
	if got := f.order(); !slices.Equal(got, want) {
		t.Fatalf("chat order %v, want %v", got, want)
	}
	for _, m := range []string{"a", "b", "c"} {
		if r := f.message(1, m).replyTo; r != 7 {
			t.Errorf("answer of %s replies to %d, want the question 7", m, r)
		}
	}
	if r := f.message(2, "a").replyTo; r != f.message(1, "b").id {
		t.Errorf("a's comment replies to %d, want b's answer %d", r, f.message(1, "b").id)
	}
	if r := f.message(2, "c").replyTo; r != f.message(1, "a").id {
		t.Errorf("c's comment replies to %d, want a's answer", r)
	}
	if r := f.message(3, "a").replyTo; r != f.message(2, "b").id {
		t.Errorf("a's reply replies to %d, want the first comment on its answer (b's) %d", r, f.message(2, "b").id)
	}
	if rep.Answers != 3 || rep.Comments != 3 || rep.Replies != 2 || len(rep.SatOut) != 0 || len(f.notes) != 0 {
		t.Errorf("report %+v, notes %q", rep, f.notes)
	}
	if run.Finished.IsZero() {
		t.Error("run not marked finished")
	}
	var m struct {
		Question string   `json:"question"`
		Files    []string `json:"files"`
		Items    []*Item  `json:"items"`
	}
	data, err := os.ReadFile(filepath.Join(e.Dir, Folder(run.Chat, run.ID), "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	wantFiles := []string{"turn-1/a.txt", "turn-1/b.txt", "turn-1/c.txt", "turn-2/a-to-b.txt", "turn-2/b-to-a.txt", "turn-2/c-to-a.txt", "turn-3/a.txt", "turn-3/b.txt"}
	if len(m.Files) != len(wantFiles) || m.Question != run.Question || len(m.Items) != 8 {
		t.Fatalf("manifest: %s", data)
	}
	for i, w := range wantFiles {
		if m.Files[i] != filepath.Join(Folder(run.Chat, run.ID), w) {
			t.Errorf("file %d = %s, want .../%s", i, m.Files[i], w)
		}
		if _, err := os.Stat(filepath.Join(e.Dir, m.Files[i])); err != nil {
			t.Error(err)
		}
	}
}

func TestFailedMemberSitsOutLaterTurns(t *testing.T) {
	f := newFakes()
	f.answer = func(ctx context.Context, member string, turn, attempt int) (Answer, error) {
		if member == "b" {
			return Answer{}, errors.New("API Error: 400")
		}
		if turn == 2 {
			return structured(map[string]string{"a": "c", "c": "a"}[member], "hm"), nil
		}
		return Answer{Text: member + " answers"}, nil
	}
	e := newEngine(t, f)
	run := newRun("a", "b", "c")
	rep, err := e.Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.order(); !slices.Equal(got, []string{"1:a", "1:c", "2:a", "2:c", "3:a", "3:c"}) {
		t.Fatalf("chat order %v", got)
	}
	if f.asked["b/2"]+f.asked["b/3"] != 0 {
		t.Errorf("the failed member was asked again: %v", f.asked)
	}
	if len(f.notes) != 1 || f.notes[0] != "Sat out: b (turn 1)." || !slices.Equal(rep.SatOut, []string{"b (turn 1)"}) {
		t.Errorf("notes %q, sat out %v", f.notes, rep.SatOut)
	}
}

func TestSpeechFailureIsAFailure(t *testing.T) {
	f := newFakes()
	f.speakErr["c"] = errors.New("openai 500")
	e := newEngine(t, f)
	run := newRun("a", "b", "c")
	run.Speak = true
	if _, err := e.Run(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	if got := f.order(); slices.Contains(got, "1:c") || len(f.notes) != 1 {
		t.Errorf("chat order %v, notes %q", got, f.notes)
	}
	if it := run.item(1, "a"); !strings.HasSuffix(it.File, "turn-1/a.mp3") || it.OpenAIUSD == 0 {
		t.Errorf("a's voice file %q, cost %v", it.File, it.OpenAIUSD)
	}
}

func TestInvalidTargetIsRetriedOnce(t *testing.T) {
	f := newFakes()
	var prompts []string
	var pmu sync.Mutex
	e := newEngine(t, f)
	f.answer = func(ctx context.Context, member string, turn, attempt int) (Answer, error) {
		switch {
		case turn != 2:
			return Answer{Text: member + " answers"}, nil
		case member == "a" && attempt == 1:
			return structured("a", "on myself"), nil // its own answer: invalid
		case member == "a":
			return structured("b", "on b"), nil
		case member == "b":
			return structured("nobody", "?"), nil // invalid twice
		}
		return structured("a", "on a"), nil
	}
	members := &recordingMembers{fakes: f, prompts: &prompts, mu: &pmu}
	e.Members = members
	run := newRun("a", "b", "c")
	rep, err := e.Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if f.asked["a/2"] != 2 || f.asked["b/2"] != 2 || f.asked["c/2"] != 1 {
		t.Errorf("turn-2 asks %v, want a and b twice, c once", f.asked)
	}
	if it := run.item(2, "b"); it.State != Skipped || it.MessageID != 0 {
		t.Errorf("b's comment %+v, want skipped and not sent", it)
	}
	if it := run.item(2, "a"); it.State != Done || it.Target != "b" {
		t.Errorf("a's comment %+v", it)
	}
	// b sat turn 2 out but got a's comment: it still replies.
	if got := f.order(); !slices.Equal(got, []string{"1:a", "1:b", "1:c", "2:a", "2:c", "3:a", "3:b"}) {
		t.Errorf("chat order %v", got)
	}
	if !slices.Equal(rep.SatOut, []string{"b (turn 2)"}) {
		t.Errorf("sat out %v", rep.SatOut)
	}
	retried := false
	for _, p := range prompts {
		if strings.Contains(p, "Your last choice could not be used") && strings.Contains(p, `"a" is not one of b, c`) {
			retried = true
		}
	}
	if !retried {
		t.Errorf("no retry prompt saying why: %q", prompts)
	}
}

type recordingMembers struct {
	*fakes
	prompts *[]string
	mu      *sync.Mutex
}

func (r *recordingMembers) Ask(ctx context.Context, run *Run, q Question) (Answer, error) {
	r.mu.Lock()
	*r.prompts = append(*r.prompts, q.Prompt)
	r.mu.Unlock()
	return r.fakes.Ask(ctx, run, q)
}

func TestCommentCapSamplesBySeed(t *testing.T) {
	members := []string{"a", "b", "c", "d", "e", "f"}
	dropped := func(seed uint64) []string {
		f := newFakes() // everyone comments on a, a on b
		e := newEngine(t, f)
		run := newRun(members...)
		run.Seed = seed
		rep, err := e.Run(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range run.items(2) {
			if it.Dropped {
				out = append(out, it.Member)
			}
		}
		reply := run.item(3, "a")
		if len(reply.Comments) != 3 || rep.Dropped != 2 || rep.Comments != 6 {
			t.Fatalf("a's reply answers %v; report %+v", reply.Comments, rep)
		}
		for _, d := range out {
			if slices.Contains(reply.Comments, d) {
				t.Errorf("dropped comment of %s was forwarded", d)
			}
		}
		// Dropped comments are still in the chat (turn 2) and the manifest.
		if got := f.order(); len(got) != 6+6+2 {
			t.Errorf("chat order %v", got)
		}
		return out
	}
	first := dropped(42)
	if again := dropped(42); !slices.Equal(first, again) {
		t.Errorf("seed 42 dropped %v, then %v", first, again)
	}
	differs := false
	for seed := uint64(1); seed < 20 && !differs; seed++ {
		differs = !slices.Equal(dropped(seed), first)
	}
	if !differs {
		t.Error("every seed drops the same comments")
	}
}

func TestResumeAfterCrashSendsOnlyWhatIsLeft(t *testing.T) {
	f := newFakes()
	ctx, cancel := context.WithCancel(context.Background())
	f.answer = func(actx context.Context, member string, turn, attempt int) (Answer, error) {
		if turn == 3 {
			// The process dies while turn 3 runs, turn 2 being out.
			for len(f.order()) < 6 {
				time.Sleep(time.Millisecond)
			}
			cancel()
			<-actx.Done()
			return Answer{}, actx.Err()
		}
		return Answer{}, nil
	}
	e := newEngine(t, f)
	run := newRun("a", "b", "c")
	f.answer = wrapDefault(f.answer, run)
	if _, err := e.Run(ctx, run); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("interrupted run returned %v", err)
	}
	if got := f.order(); !slices.Equal(got, []string{"1:a", "1:b", "1:c", "2:a", "2:b", "2:c"}) {
		t.Fatalf("before the crash: %v", got)
	}
	// A new process: the run as journaled.
	var resumed Run
	if err := json.Unmarshal(f.journal, &resumed); err != nil {
		t.Fatal(err)
	}
	if resumed.Turn != 3 || len(resumed.items(3)) != 2 || resumed.item(3, "a").State != Pending {
		t.Fatalf("journaled run at turn %d with turn-3 items %+v", resumed.Turn, resumed.items(3))
	}
	g := newFakes()
	e2 := newEngine(t, g)
	e2.Dir = e.Dir
	rep, err := e2.Run(context.Background(), &resumed)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.order(); !slices.Equal(got, []string{"3:a", "3:b"}) {
		t.Errorf("after the restart the chat got %v, want only turn 3", got)
	}
	if g.asked["a/1"]+g.asked["a/2"]+g.asked["b/1"]+g.asked["c/2"] != 0 {
		t.Errorf("turns 1-2 asked again: %v", g.asked)
	}
	if r := g.message(3, "a").replyTo; r != f.message(2, "b").id {
		t.Errorf("resumed reply answers %d, want b's comment %d", r, f.message(2, "b").id)
	}
	if rep.Sends != 2 || rep.Answers != 3 || rep.Replies != 2 {
		t.Errorf("report %+v", rep)
	}
}

// wrapDefault answers turns 1 and 2 as the fakes do by default.
func wrapDefault(next func(context.Context, string, int, int) (Answer, error), run *Run) func(context.Context, string, int, int) (Answer, error) {
	return func(ctx context.Context, member string, turn, attempt int) (Answer, error) {
		if turn == 3 {
			return next(ctx, member, turn, attempt)
		}
		if turn == 1 {
			return Answer{Text: member + " answers"}, nil
		}
		var others []string
		for _, m := range run.Members {
			if m != member {
				others = append(others, m)
			}
		}
		return structured(others[0], member+" on "+others[0]), nil
	}
}

func TestClip(t *testing.T) {
	if got := clip("one two three four five six", 12); got != "one two…" {
		t.Errorf("clip = %q", got)
	}
	if got := clip("short", 10); got != "short" {
		t.Errorf("clip = %q", got)
	}
}
