package ticket

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	"brainbot/toolspec"
)

const prefix = "bot-a-user-1-1700000000000"

func speechTicket() Ticket {
	return Ticket{Tool: toolspec.SpeechTool, Prefix: prefix,
		Speech: toolspec.SpeechSettings{Voice: "nova", Speed: 1, Model: "tts-1", Format: "opus"}}
}

func TestClaimServesOnlyTheCallAskedFor(t *testing.T) {
	r := NewRegistry()
	p := r.Connect()
	defer p.Close()
	log := zap.NewExample()
	p.Serve(log)

	// Turn one: nothing was asked for yet.
	if _, got, err := r.Claim(p.Token(), toolspec.SpeechTool, prefix); !errors.Is(err, ErrNotAsked) || got != log {
		t.Fatalf("call before turn two: %v (log %v), want ErrNotAsked with the request's log", err, got)
	}
	p.Open(speechTicket())
	for name, call := range map[string]struct{ token, tool, file string }{
		"unknown token": {"forged", toolspec.SpeechTool, prefix},
		"another tool":  {p.Token(), toolspec.ImageTool, prefix},
		"another file":  {p.Token(), toolspec.SpeechTool, "turn1-own-choice"},
	} {
		if _, _, err := r.Claim(call.token, call.tool, call.file); err == nil {
			t.Errorf("%s: served", name)
		}
	}
	got, _, err := r.Claim(p.Token(), toolspec.SpeechTool, prefix)
	if err != nil || got != speechTicket() {
		t.Fatalf("the call asked for: %+v, %v", got, err)
	}
	if _, _, err := r.Claim(p.Token(), toolspec.SpeechTool, prefix); !errors.Is(err, ErrUsed) {
		t.Errorf("second call: %v, want ErrUsed", err)
	}
}

func TestRefusalsSayWhy(t *testing.T) {
	r := NewRegistry()
	p := r.Connect()
	defer p.Close()
	p.Open(speechTicket())
	for _, tt := range []struct {
		token, tool, file string
		want              error
	}{
		{"forged", toolspec.SpeechTool, prefix, ErrUnknownProcess},
		{p.Token(), toolspec.ImageTool, prefix, ErrWrongTool},
		{p.Token(), toolspec.SpeechTool, prefix + "0", ErrWrongFile},
	} {
		if _, _, err := r.Claim(tt.token, tt.tool, tt.file); !errors.Is(err, tt.want) {
			t.Errorf("Claim(%q, %q, %q) = %v, want %v", tt.token, tt.tool, tt.file, err, tt.want)
		}
	}
}

// A process that serves requests one after another (a warm CLI) gets one
// call per request: the next request withdraws what the last one left.
func TestNextRequestWithdrawsTheTicket(t *testing.T) {
	r := NewRegistry()
	p := r.Connect()
	defer p.Close()
	p.Serve(zap.NewNop())
	p.Open(speechTicket()) // never claimed: turn two failed
	p.Serve(zap.NewNop())
	if _, _, err := r.Claim(p.Token(), toolspec.SpeechTool, prefix); !errors.Is(err, ErrNotAsked) {
		t.Fatalf("the last request's ticket: %v, want ErrNotAsked", err)
	}
	next := speechTicket()
	next.Prefix = "bot-a-user-1-1700000009999"
	p.Open(next)
	if _, _, err := r.Claim(p.Token(), toolspec.SpeechTool, prefix); !errors.Is(err, ErrWrongFile) {
		t.Errorf("the last request's file name: %v, want ErrWrongFile", err)
	}
	if _, _, err := r.Claim(p.Token(), toolspec.SpeechTool, next.Prefix); err != nil {
		t.Errorf("this request's call: %v", err)
	}
}

// Tokens are per process: one process's ticket is not another's.
func TestTicketsArePerProcess(t *testing.T) {
	r := NewRegistry()
	a, b := r.Connect(), r.Connect()
	defer b.Close()
	if a.Token() == b.Token() || len(a.Token()) < 20 {
		t.Fatalf("tokens %q and %q", a.Token(), b.Token())
	}
	a.Open(speechTicket())
	if _, _, err := r.Claim(b.Token(), toolspec.SpeechTool, prefix); !errors.Is(err, ErrNotAsked) {
		t.Errorf("b used a's ticket: %v", err)
	}
	a.Close()
	if r.Known(a.Token()) || !r.Known(b.Token()) {
		t.Error("Close must forget exactly its own token")
	}
	if _, _, err := r.Claim(a.Token(), toolspec.SpeechTool, prefix); !errors.Is(err, ErrUnknownProcess) {
		t.Errorf("a closed process's token: %v, want ErrUnknownProcess", err)
	}
}

// Calls racing for one ticket: exactly one is served.
func TestConcurrentClaimsServeOne(t *testing.T) {
	r := NewRegistry()
	p := r.Connect()
	defer p.Close()
	p.Open(speechTicket())
	var served atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, _, err := r.Claim(p.Token(), toolspec.SpeechTool, prefix); err == nil {
				served.Add(1)
			}
		})
	}
	wg.Wait()
	if served.Load() != 1 {
		t.Errorf("%d calls served, want 1", served.Load())
	}
}

// A process has reached the tool server once its token came with a
// request; a forged token reaches nothing.
func TestReached(t *testing.T) {
	r := NewRegistry()
	p := r.Connect()
	defer p.Close()
	select {
	case <-p.Reached():
		t.Fatal("reached before any request")
	default:
	}
	if r.Known("forged") {
		t.Fatal("a forged token is known")
	}
	for range 2 { // the second request changes nothing
		if !r.Known(p.Token()) {
			t.Fatal("the process's token is not known")
		}
	}
	select {
	case <-p.Reached():
	default:
		t.Fatal("not reached after its request")
	}
}

// A request that allows questions may ask one, in turn one only; the next
// request of the same process must allow it again.
func TestQuestions(t *testing.T) {
	r := NewRegistry()
	p := r.Connect()
	defer p.Close()
	log := zap.NewExample()
	p.Serve(log)
	if got, err := r.ClaimQuestion(p.Token()); !errors.Is(err, ErrNoQuestions) || got != log {
		t.Fatalf("question not allowed: %v (log %v), want ErrNoQuestions with the request's log", err, got)
	}
	if _, err := r.ClaimQuestion("forged"); !errors.Is(err, ErrUnknownProcess) {
		t.Errorf("unknown token: %v", err)
	}
	p.AllowQuestion()
	if _, err := r.ClaimQuestion(p.Token()); err != nil {
		t.Fatalf("first question: %v", err)
	}
	if _, err := r.ClaimQuestion(p.Token()); !errors.Is(err, ErrAskedAlready) {
		t.Errorf("second question: %v, want ErrAskedAlready", err)
	}
	// The next request, and turn two, must not inherit the leave.
	p.Serve(log)
	if _, err := r.ClaimQuestion(p.Token()); !errors.Is(err, ErrNoQuestions) {
		t.Errorf("next request: %v, want ErrNoQuestions", err)
	}
	p.AllowQuestion()
	p.Open(speechTicket())
	if _, err := r.ClaimQuestion(p.Token()); !errors.Is(err, ErrNoQuestions) {
		t.Errorf("turn two: %v, want ErrNoQuestions", err)
	}
	// The file tools' ticket is not a question's.
	if _, _, err := r.Claim(p.Token(), toolspec.SpeechTool, prefix); err != nil {
		t.Errorf("the ticket of turn two after a question's leave: %v", err)
	}
}

func TestMemoryIsTheRequestsUsers(t *testing.T) {
	r := NewRegistry()
	a, b := r.Connect(), r.Connect()
	defer a.Close()
	defer b.Close()
	log := zap.NewNop()
	a.Serve(log)
	b.Serve(log)
	if _, _, err := r.Memory(a.Token()); !errors.Is(err, ErrNoMemory) {
		t.Errorf("before AllowMemory: %v, want ErrNoMemory", err)
	}
	ann := Memory{Bot: "alice", User: 7, MaxNotes: 30, MaxNoteChars: 200}
	a.AllowMemory(ann)
	b.AllowMemory(Memory{Bot: "alice", User: 8})
	if m, _, err := r.Memory(a.Token()); err != nil || m != ann {
		t.Errorf("Memory = %+v, %v, want %+v", m, err, ann)
	}
	if m, _, err := r.Memory(b.Token()); err != nil || m.User != 8 {
		t.Errorf("the other process's Memory = %+v, %v", m, err)
	}
	// Turn two is still the request's user's.
	a.Open(speechTicket())
	if m, _, err := r.Memory(a.Token()); err != nil || m != ann {
		t.Errorf("Memory in turn two = %+v, %v", m, err)
	}
	// The next request, maybe another user's, must not inherit it.
	a.Serve(log)
	if _, _, err := r.Memory(a.Token()); !errors.Is(err, ErrNoMemory) {
		t.Errorf("next request: %v, want ErrNoMemory", err)
	}
	if _, _, err := r.Memory("forged"); !errors.Is(err, ErrUnknownProcess) {
		t.Errorf("unknown token: %v", err)
	}
}
