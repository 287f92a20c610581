package host

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"brainbot/bot/brain"
	"brainbot/bot/panel/engine"
	"brainbot/claude"
	"brainbot/mcp"
	"brainbot/mcp/openaitest"
	"brainbot/message"
	"brainbot/pricing"
	"brainbot/state"
	"brainbot/toolspec"
)

// speakingPanel is a host whose members' model is a script and whose
// speech is the real Speaker against OpenAI's stand-in.
type speakingPanel struct {
	Pipeline // only Ask and Spent are used
	t        *testing.T
	oa       *openaitest.Server
	// answers are each member's text, by member and turn (1 or 3).
	answers map[string]string

	mu sync.Mutex
	// speeches counts the speech requests OpenAI's stand-in got, by
	// voice; spoke is closed (and replaced) at each.
	speeches map[string]int
	spoke    chan struct{}
	// beforeLast: a speech request had reached OpenAI before the model's
	// last words, by "member/turn".
	beforeLast map[string]bool
	spentUSD   float64
	streamed   int // turns asked with their text streamed to the voice
	files      []string
}

func newSpeakingPanel(t *testing.T, early bool) (*speakingPanel, *Host) {
	p := &speakingPanel{t: t, oa: openaitest.NewServer(), answers: map[string]string{}, speeches: map[string]int{},
		spoke: make(chan struct{}), beforeLast: map[string]bool{}}
	t.Cleanup(p.oa.Close)
	oc := openai.DefaultConfig("sk-test")
	oc.BaseURL = p.oa.URL
	oc.HTTPClient = &http.Client{Transport: speechSeen{p}}
	sp := mcp.NewSpeaker(mcp.Config{DataDir: t.TempDir(), OpenAI: oc, Timeout: time.Minute, Log: zaptest.NewLogger(t)})
	brains := map[string]*brain.Brain{
		"a": {Name: "A", TTS: brain.TTS{Voice: "marin", Format: "opus"}},
		"b": {Name: "B", TTS: brain.TTS{Voice: "cedar", Format: "opus"}},
	}
	cfg := Config{DataDir: t.TempDir(), Pipeline: p, Members: speakingMembers{p}, Runs: speakingRuns{},
		Brain: func(bot string) *brain.Brain { return brains[bot] }, Speaker: sp, Now: time.Now, Log: zaptest.NewLogger(t)}
	if early {
		cfg.SpeakEarly = func(ctx context.Context, s toolspec.SpeechSettings) claude.Utterance { return sp.Begin(ctx, s) }
	}
	return p, New(cfg)
}

// speechSeen tells the panel when a speech request goes to OpenAI's
// stand-in, and in which voice.
type speechSeen struct{ p *speakingPanel }

func (s speechSeen) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/audio/speech") {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct{ Voice string }
		_ = json.Unmarshal(body, &req)
		s.p.mu.Lock()
		s.p.speeches[req.Voice]++
		close(s.p.spoke)
		s.p.spoke = make(chan struct{})
		s.p.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

// waitSpeech waits until voice has made more than n speech requests.
func (p *speakingPanel) waitSpeech(voice string, n int) bool {
	bound := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		more, spoke := p.speeches[voice] > n, p.spoke
		p.mu.Unlock()
		if more {
			return true
		}
		select {
		case <-spoke:
		case <-bound:
			return false
		}
	}
}

// Ask writes the member's answer a word at a time, as the model's text
// deltas come; before the last words of a turn spoken as it streams, it
// waits (within a bound only a hang reaches) for the first speech request.
func (p *speakingPanel) Ask(ctx context.Context, q Question) (*claude.Result, error) {
	turn := map[bool]string{true: "2", false: "1"}[q.Schema != ""]
	if strings.Contains(q.Prompt, engine.HoldMarker) {
		turn = "3"
	}
	if turn == "2" {
		other := map[string]string{"a": "b", "b": "a"}[q.Bot]
		return &claude.Result{Structured: []byte(`{"target":"` + other + `","comment":"A fair point, well made."}`)}, nil
	}
	text := p.answers[q.Bot+"/"+turn]
	voice := q.Brain.TTS.Voice
	p.mu.Lock()
	before := p.speeches[voice]
	if q.OnText != nil {
		p.streamed++
	}
	p.mu.Unlock()
	words := strings.SplitAfter(text, " ")
	for i := range words {
		if i == len(words)-1 && q.OnText != nil {
			if !p.waitSpeech(voice, before) {
				p.t.Errorf("%s turn %s: no speech request before the model's last words", q.Bot, turn)
			}
			p.mu.Lock()
			p.beforeLast[q.Bot+"/"+turn] = p.speeches[voice] > before
			p.mu.Unlock()
		}
		if q.OnText != nil {
			q.OnText(strings.Join(words[:i+1], ""))
		}
	}
	return &claude.Result{Text: text, CostUSD: 0.01}, nil
}

func (p *speakingPanel) Spent(ctx context.Context, q Question, usd float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spentUSD += usd
}

// spokenBy is what OpenAI was asked to speak in voice.
func (p *speakingPanel) spokenBy(voice string) []string {
	var out []string
	for _, r := range p.oa.Requests() {
		if r.Voice == voice {
			out = append(out, r.Input)
		}
	}
	return out
}

type speakingMembers struct{ p *speakingPanel }

func (speakingMembers) Connected(string) bool { return true }
func (speakingMembers) InChat(context.Context, string, int64) (bool, error) {
	return true, nil
}
func (m speakingMembers) Outbox(message.Key, int, *zap.Logger) Outbox { return &speakingOutbox{p: m.p} }

type speakingOutbox struct {
	Outbox // only File, Text and Sent are used
	p      *speakingPanel
}

func (o *speakingOutbox) Text(context.Context, string, bool) error { return nil } // the closing note

func (o *speakingOutbox) File(_ context.Context, _ message.FileKind, path string) error {
	o.p.mu.Lock()
	defer o.p.mu.Unlock()
	o.p.files = append(o.p.files, path)
	return nil
}
func (o *speakingOutbox) Sent() []int { return []int{len(o.p.files)} }

type speakingRuns struct{ state.Panels }

func (speakingRuns) SavePanel(context.Context, string, []byte, bool, time.Time) error { return nil }

func speakingRun() *engine.Run {
	return &engine.Run{ID: "run1", Panel: "p", Chat: -100, MessageID: 7, Question: "should cities ban cars?", Members: []string{"a", "b"},
		Speak: true, MaxChars: [3]int{500, 300, 300}, CommentCap: 3, Seed: 1}
}

// sentences is n sentences of about 50 characters each.
func sentences(who string, n int) string {
	var parts []string
	for i := range n {
		parts = append(parts, who+" makes point "+string(rune('A'+i))+", and makes it with care.")
	}
	return strings.Join(parts, " ")
}

// reply makes a turn 3 of an answer's words.
func reply(text string) string { return strings.ReplaceAll(text, "makes point", "replies on point") }

// A speaking panel's member is spoken while its turn streams: the first
// speech request reaches OpenAI before the model's last words, in the
// member's voice, and its note holds its whole text, in order. An answer
// past its cap is spoken only as far as the text kept. Every character
// OpenAI spoke is billed, exactly, in the usage and the run.
func TestPanelMemberSpokenWhileItsTurnStreams(t *testing.T) {
	p, h := newSpeakingPanel(t, true)
	p.answers["a/1"] = sentences("A", 8)  // ~400 characters: whole
	p.answers["b/1"] = sentences("B", 14) // ~700: cut at 500
	p.answers["a/3"] = reply(sentences("A", 5))
	p.answers["b/3"] = reply(sentences("B", 5))
	run := speakingRun()
	rep, err := h.engine.Run(context.Background(), run)
	if err != nil || rep.Answers != 2 || rep.Comments != 2 || rep.Replies != 2 {
		t.Fatalf("report %+v, %v", rep, err)
	}
	for _, key := range []string{"a/1", "b/1", "a/3", "b/3"} {
		if !p.beforeLast[key] {
			t.Errorf("%s: spoken only after its turn", key)
		}
	}
	if a := p.spokenBy("marin"); !spokenWhole(p.answers["a/1"], a) || len(a) < 4 {
		t.Errorf("a spoke %q: want its answer whole, in parts", a)
	}
	kept := run.Items[1].Text // b's answer, cut at its cap
	if !strings.HasSuffix(kept, "…") || utf8.RuneCountInString(kept) > 500 {
		t.Fatalf("b's answer kept as %q", kept)
	}
	words := strings.TrimSuffix(kept, "…")
	if !spokenWhole(kept, p.spokenBy("cedar")) {
		t.Errorf("b spoke %q: want the answer kept, %q, whole", p.spokenBy("cedar"), kept)
	}
	for _, in := range p.spokenBy("cedar") {
		if !strings.Contains(words, strings.TrimSuffix(in, "…")) && !strings.Contains(p.answers["b/3"]+" A fair point, well made.", in) {
			t.Errorf("b spoke %q, which its messages do not hold", in)
		}
	}
	for _, it := range run.Items {
		data, err := os.ReadFile(filepath.Join(h.cfg.DataDir, it.File))
		if err != nil || len(data) == 0 || filepath.Ext(it.File) != ".ogg" {
			t.Errorf("%s turn %d: file %q: %v", it.Member, it.Turn, it.File, err)
		}
	}
	chars := 0
	for _, r := range p.oa.Requests() {
		chars += utf8.RuneCountInString(r.Input)
	}
	want, _ := pricing.Speech(toolspec.DefaultSpeechModel, chars)
	if !near(p.spentUSD, want) || !near(rep.OpenAIUSD, want) {
		t.Errorf("speech billed %v in the usage, %v in the run; OpenAI spoke %d characters: %v", p.spentUSD, rep.OpenAIUSD, chars, want)
	}
}

// A part OpenAI refuses fails the member's turn as it always did: no
// note, the member sits out; what was spoken for it is billed.
func TestPanelMemberSpeechFailureWhileStreaming(t *testing.T) {
	p, h := newSpeakingPanel(t, true)
	p.answers["a/1"] = sentences("A", 8)
	p.answers["b/1"] = sentences("B", 4) + " This one fails #openai-500 today. " + sentences("B", 3)
	run := speakingRun()
	rep, err := h.engine.Run(context.Background(), run)
	if err != nil || rep.Answers != 1 || !slices.Equal(rep.SatOut, []string{"b (turn 1)"}) {
		t.Fatalf("report %+v, %v", rep, err)
	}
	if it := run.Items[1]; it.State != engine.Failed || it.File != "" || !strings.Contains(it.Error, "speech") {
		t.Errorf("b's answer: %+v", it)
	}
	if len(p.files) != 1 {
		t.Errorf("%d notes sent, want a's alone", len(p.files))
	}
	if !near(p.spentUSD, rep.OpenAIUSD) || p.spentUSD == 0 {
		t.Errorf("billed %v in the usage, %v in the run", p.spentUSD, rep.OpenAIUSD)
	}
}

// With speech not early (BRAINBOT_SPEECH_EARLY=off) a member is spoken
// once its turn is written, in one go, as before.
func TestPanelMemberSpokenAfterItsTurnWhenNotEarly(t *testing.T) {
	p, h := newSpeakingPanel(t, false)
	p.answers["a/1"] = sentences("A", 8)
	p.answers["b/1"] = sentences("B", 8)
	p.answers["a/3"] = reply(sentences("A", 2))
	p.answers["b/3"] = reply(sentences("B", 2))
	rep, err := h.engine.Run(context.Background(), speakingRun())
	if err != nil || rep.Replies != 2 || p.streamed != 0 {
		t.Fatalf("report %+v, %v; %d turns streamed to their voice", rep, err, p.streamed)
	}
	if a := p.spokenBy("marin"); !spokenWhole(p.answers["a/1"], a) {
		t.Errorf("a spoke %q", a)
	}
}

// spokenWhole reports whether the inputs that are pieces of text are all
// of it, in parts spoken in any order.
func spokenWhole(text string, inputs []string) bool {
	var pieces []string
	for _, in := range inputs {
		if strings.Contains(text, in) {
			pieces = append(pieces, in)
		}
	}
	slices.SortFunc(pieces, func(x, y string) int { return strings.Index(text, x) - strings.Index(text, y) })
	return strings.Join(pieces, " ") == text
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }
