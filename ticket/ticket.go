// Package ticket decides which calls of brainbot's MCP tools are served.
//
// The tools spend money (OpenAI speech and images), and the model can call
// them whenever it likes. Only one call is legitimate: the one the driver
// asks for in a request's second turn, with that request's file name
// prefix. So every Claude CLI process brainbot starts gets its own bearer
// token (Connect), and when the driver sends turn two it opens a ticket for
// exactly that call (Process.Open). The tool server claims the ticket on
// the process's first matching call (Registry.Claim) and serves it with the
// ticket's settings, whatever the model passed; any other call (turn one,
// a second call, another tool, another file name, an unknown token) is
// refused and never reaches OpenAI.
//
// Tickets are keyed by process, one open ticket per process, so the rule
// holds when one process serves many requests in turn: each request
// starts with Process.Serve, which withdraws whatever the last one left.
//
// One tool spends nothing and is the model's to call when it likes: the
// question with options (toolspec.QuestionTool). A request may allow it
// (Process.AllowQuestion): then the process may ask one question in the
// request's turn one (Registry.ClaimQuestion); a second, or one in turn
// two, is refused.
//
// The memory tools spend nothing either, but they write: the notes of
// one user with one bot. Whose notes they are is never the model's to
// say (a user's words reach it, and can ask for anything): a request
// gives its process the scope (Process.AllowMemory), the bot and the user
// it answers, and the tool server reads and writes only those notes
// (Registry.Memory).
package ticket

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/toolspec"
)

// Why a call is refused. Claim's errors match these with errors.Is.
var (
	ErrUnknownProcess = errors.New("ticket: no CLI process has this token")
	ErrNotAsked       = errors.New("ticket: the bot asked for no tool call")
	ErrUsed           = errors.New("ticket: the call the bot asked for was made already")
	ErrWrongTool      = errors.New("ticket: the bot asked for another tool")
	ErrWrongFile      = errors.New("ticket: the bot asked for another file name")
	ErrNoQuestions    = errors.New("ticket: this request may not ask the user a question")
	ErrAskedAlready   = errors.New("ticket: the request asked its one question already")
	ErrNoMemory       = errors.New("ticket: this request keeps no notes")
)

// Memory is whose notes a request's memory tools read and write, and
// their bounds: the request's bot and user, as the bot knows them.
type Memory struct {
	Bot  string
	User int64
	// MaxNotes and MaxNoteChars are the brain's bounds (0: the brain
	// keeps no notes; the memory tools refuse).
	MaxNotes, MaxNoteChars int
	// Schedule lets the request keep the user's reminders, within
	// MaxPending and MaxAhead (the brain's bounds; 0: it keeps none), and
	// their time zone; Zone is the brain's, theirs until they set one.
	Schedule   bool
	MaxPending int
	MaxAhead   time.Duration
	Zone       string
}

// Ticket is the one tool call a request's turn two may make.
type Ticket struct {
	// Tool is the tool as Claude names it (toolspec.SpeechTool or
	// toolspec.ImageTool).
	Tool string
	// Prefix is the file name the call must carry: the request's prefix.
	Prefix string
	// Speech or Image are the brain's settings the call is served with,
	// whatever the model passes.
	Speech toolspec.SpeechSettings
	Image  toolspec.ImageSettings
	// Utterance, for speech, is the answer spoken while the model wrote
	// it: the call is served with its audio, and the text the model
	// passes is not used. Nil: the call's text is spoken.
	Utterance Utterance
}

// Utterance is an answer's speech, made before the call that asks for it.
type Utterance interface {
	// Audio waits for the whole answer to be spoken and returns the
	// audio of each voice note (one unless it would pass limit bytes),
	// with how many speech calls made it.
	Audio(ctx context.Context, limit int) (notes [][]byte, parts int, err error)
	// Spoken is how many characters were spoken.
	Spoken() int
}

// Registry holds the tokens of the running CLI processes and their open
// tickets. It is safe for concurrent use.
type Registry struct {
	mu    sync.Mutex
	procs map[string]*standing
}

// standing is what the registry knows of one process.
type standing struct {
	log    *zap.Logger // of the request the process works for; nil before Serve
	ticket *Ticket     // nil: no call is allowed
	used   bool
	// question: the request may ask the user one question; asked: it did.
	question, asked bool
	// memory is whose notes the request keeps (nil: none).
	memory *Memory
	// reached is closed at the process's first request (Known).
	reached     chan struct{}
	seenRequest bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{procs: map[string]*standing{}}
}

// Process is one CLI process's place in the registry.
type Process struct {
	r       *Registry
	token   string
	reached <-chan struct{}
}

// Connect registers a new CLI process under a fresh random token; its
// tool calls must carry it (Authorization: Bearer <token>). Close the
// Process when the CLI has exited.
func (r *Registry) Connect() *Process {
	token := rand.Text() // 128 random bits
	reached := make(chan struct{})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.procs[token] = &standing{reached: reached}
	return &Process{r: r, token: token, reached: reached}
}

// Token is the process's bearer token.
func (p *Process) Token() string { return p.token }

// Reached is closed once the process has made its first request to the
// tool server (Known): its CLI got through its start-up as far as
// connecting its MCP servers, which it does before it reads any input.
func (p *Process) Reached() <-chan struct{} { return p.reached }

// Serve says which request the process works for from now on: refused
// calls are logged to log, which should name the request. An open ticket
// of an earlier request is withdrawn.
func (p *Process) Serve(log *zap.Logger) {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if s, ok := p.r.procs[p.token]; ok {
		s.log, s.ticket, s.used, s.question, s.asked, s.memory = log, nil, false, false, false, nil
	}
}

// AllowQuestion lets the request the process serves now ask the user one
// question (until the next Serve, or Open).
func (p *Process) AllowQuestion() {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if s, ok := p.r.procs[p.token]; ok {
		s.question = true
	}
}

// AllowMemory lets the request the process serves now read and write
// m's notes through the memory tools (until the next Serve).
func (p *Process) AllowMemory(m Memory) {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if s, ok := p.r.procs[p.token]; ok {
		s.memory = &m
	}
}

// Open allows the process exactly one call: t. It replaces a ticket opened
// earlier, and ends the request's leave to ask a question: turn two is
// the bot's.
func (p *Process) Open(t Ticket) {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if s, ok := p.r.procs[p.token]; ok {
		s.ticket, s.used, s.question = &t, false, false
	}
}

// Close forgets the process: its token is refused from now on.
func (p *Process) Close() {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	delete(p.r.procs, p.token)
}

// Known reports whether token belongs to a running process, for the
// tool server to check every request it gets; the first one a process
// makes closes its Reached.
func (r *Registry) Known(token string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.procs[token]
	if ok && !s.seenRequest {
		s.seenRequest = true
		close(s.reached)
	}
	return ok
}

// Claim takes the ticket of the process with token for a call of tool
// (as Claude names it) with file name filename, and returns it: the
// caller serves the call with the ticket's settings. A ticket serves one
// call. log is the logger of the request the process works for (nil for
// an unknown token or before Serve), where the caller logs the call or its
// refusal.
func (r *Registry) Claim(token, tool, filename string) (t Ticket, log *zap.Logger, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.procs[token]
	switch {
	case !ok:
		return Ticket{}, nil, ErrUnknownProcess
	case s.ticket == nil:
		return Ticket{}, s.log, ErrNotAsked
	case s.used:
		return Ticket{}, s.log, ErrUsed
	case s.ticket.Tool != tool:
		return Ticket{}, s.log, ErrWrongTool
	case s.ticket.Prefix != filename:
		return Ticket{}, s.log, ErrWrongFile
	}
	s.used = true
	return *s.ticket, s.log, nil
}

// ClaimQuestion takes the request's leave to ask the user one question,
// for the process with token. log is as Claim's.
func (r *Registry) ClaimQuestion(token string) (log *zap.Logger, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.procs[token]
	switch {
	case !ok:
		return nil, ErrUnknownProcess
	case s.asked:
		return s.log, ErrAskedAlready
	case !s.question:
		return s.log, ErrNoQuestions
	}
	s.asked = true
	return s.log, nil
}

// Memory returns whose notes the process with token may read and write
// now. log is as Claim's.
func (r *Registry) Memory(token string) (m Memory, log *zap.Logger, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.procs[token]
	switch {
	case !ok:
		return Memory{}, nil, ErrUnknownProcess
	case s.memory == nil:
		return Memory{}, s.log, ErrNoMemory
	}
	return *s.memory, s.log, nil
}
