package conversation

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/claude"
	"brainbot/message"
	"brainbot/output"
)

// answers are the answers being written now, by conversation: who asked
// each (whom /stop and ⏹ answer to in a group), and the stream showing
// it, whose draft's stop button a press names: only the answer still
// showing that draft is stopped.
type answers struct {
	mu      sync.Mutex
	running map[string]*answer
}

// answer is one answer being written.
type answer struct {
	conversation message.Key
	asker        int64
	// stream shows it (nil: not streamed); draft is the stream's (0: no
	// drafts, as in a group: only its ⏹, buttons.go, presses it).
	stream  Stream
	draft   int64
	pressed atomic.Bool

	// forgotten: the conversation's user was forgotten while it was
	// written (forgetRunning); kept: it stored its session (keepSession).
	// Both hold mu, so that either the forget finds the session stored
	// and deletes it again, or the answer finds the forget and stores
	// nothing.
	mu              sync.Mutex
	forgotten, kept bool
}

// open registers the answer conversation's asker gets now, shown by st
// (nil for none); end it with end once it is done.
func (b *answers) open(conversation message.Key, asker int64, st Stream) *answer {
	a := &answer{conversation: conversation, asker: asker, stream: st}
	if st != nil {
		a.draft = st.DraftID()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running == nil {
		b.running = map[string]*answer{}
	}
	b.running[conversation.String()] = a
	return a
}

// ofUser are the answers being written in user's conversations with bot
// ("": every bot; message.Key.IsUsers).
func (b *answers) ofUser(bot string, user int64) []*answer {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*answer
	for _, a := range b.running {
		if a.conversation.IsUsers(bot, user) {
			out = append(out, a)
		}
	}
	return out
}

func (b *answers) end(a *answer) {
	key := a.conversation.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running[key] == a {
		delete(b.running, key)
	}
}

// current is the answer being written in conversation key (nil: none).
func (b *answers) current(key string) *answer {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running[key]
}

// press marks the answer showing draft in conversation key as stopped and
// stops its stream; false when no answer shows that draft (it ended).
func (b *answers) press(key string, draft int64) bool {
	a := b.current(key)
	if a == nil || a.stream == nil || a.draft != draft {
		return false
	}
	a.pressed.Store(true)
	a.stream.Cancel() // nothing more shows: the real message follows
	return true
}

// Pressed reports whether the answer's stop button was pressed (false
// for none).
func (a *answer) Pressed() bool { return a != nil && a.pressed.Load() }

// pressStop stops the answer whose draft's stop button r's sender
// pressed: its turn ends at once, and converse sends what was written so
// far as a real message. A press for a draft that already ended is only
// logged.
func (p *Pipeline) pressStop(r *request) {
	key := r.in.Key.String()
	if !allowed(r.brain, r.in.Sender) || !p.answers.press(key, r.in.DraftID) {
		r.log.Debug("stop button for no answer being written: ignored", zap.Int64("draft_id", r.in.DraftID))
		r.drop("ignored")
		return
	}
	if !p.claude.Interrupt(key) {
		r.log.Debug("stop button pressed as the turn ended", zap.Int64("draft_id", r.in.DraftID))
	} else {
		r.log.Info("turn stopped by the stop button")
		p.cfg.Metrics.Stops.WithLabelValues(r.in.Key.Bot, "button").Inc()
	}
	r.drop("stop")
}

// keepPartial answers a turn its stop button ended with what the model
// wrote before it, as a real message (the draft goes).
func (r *request) keepPartial(text string) {
	r.sum.outcome = "stopped"
	if text == "" {
		return
	}
	r.replyText(text) // sets the outcome only if it fails
}

// showProgress starts showing the reply while it is made, when the brain
// streams: a text reply as it is written (onText), a voice or image reply
// in a private chat as a note of what is being made, whose draft's stop
// button can end the request. The note shows once the model writes (the
// first text), so a press always finds the turn running. nil when nothing
// shows.
func (p *Pipeline) showProgress(r *request, mode claude.Mode) (st Stream, onText func(string)) {
	if !r.brain.Stream || mode != claude.Text && !r.in.Private() {
		return nil, nil
	}
	st = r.out.Stream(r.ctx)
	if mode == claude.Text {
		if r.brain.Rich != brain.RichOff {
			st.UseRich(r.brain.Rich == brain.RichAlways)
		}
		return st, st.Update
	}
	if st.DraftID() == 0 {
		// No drafts in this chat: a note would be a message of its own.
		st.Cancel()
		return nil, nil
	}
	note := sync.OnceFunc(func() { st.Update(progressNotes[mode]) })
	return st, func(string) { note() }
}

// progressNotes are what a voice or image reply's draft shows while it
// is made.
var progressNotes = map[claude.Mode]string{
	claude.Speech: "🎙 Recording a voice message…",
	claude.Image:  "🎨 Drawing…",
}

// dropStopped ends a voice or image request its stop button stopped:
// nothing is sent, and a file the tool may have written before the stop
// is removed (the user asked for none).
func (p *Pipeline) dropStopped(r *request, res *claude.Result) {
	r.sum.outcome = "stopped"
	p.dropFile(r, res)
}

// dropFile removes the file a voice or image request's tool may have
// written for res, which is not sent.
func (p *Pipeline) dropFile(r *request, res *claude.Result) {
	if res == nil || res.FilePrefix == "" {
		return
	}
	kind := output.Audio
	if r.sum.mode == claude.Image {
		kind = output.Image
	}
	dir := filepath.Join(p.cfg.DataDir, kind.Dir())
	entries, _ := os.ReadDir(dir) // no folder: no file
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), res.FilePrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				r.log.Warn("could not remove the file of a stopped request", zap.Error(err))
			}
		}
	}
}
