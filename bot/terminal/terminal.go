// Package terminal is a transport for one conversation held in a text
// stream instead of Telegram: the pipeline's Chats, Outbox and Stream
// (bot/conversation's ports) written as lines a person reads in a
// terminal, or a script reads from a file. `brainbot chat` uses it to let
// a bot author talk to a brain before it has a token.
//
// Every message the bot sends is a line "Name: text"; a streamed answer
// is written as it grows and ends with its line break once the reply
// replaces it. A voice note or picture is written as its path, with the
// duration or size its sidecar gives, and a voice note's words below it
// ("  says: ..."). A question's options are numbered
// below it; Choice maps the number a user types back to the button.
package terminal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // pictures the image tool returns: their size is printed
	_ "image/png"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/conversation"
	"brainbot/message"
	"brainbot/output"
)

// ErrNoFiles: a terminal conversation carries text only, so there is no
// file a bot received to fetch.
var ErrNoFiles = errors.New("terminal: a terminal conversation sends no files")

// Screen is the conversation's output: the pipeline's Chats. Its methods
// are safe for concurrent use (an answer and /stop write at once).
type Screen struct {
	w    io.Writer
	name string // how the bot is named at the start of its lines

	mu   sync.Mutex
	last int // the last message id given (the user's and the bot's)
	// open is the streamed text written on the current line, not yet
	// ended: the reply that replaces it writes only what follows it.
	open string
	// questions are the options of the questions still open, by the id
	// of the message they are under.
	questions map[int][]message.Button
	asked     int // the message of the latest open question (0: none)
	// said names the bot that said each message, by its id.
	said map[int]string
}

// New writes a conversation with the bot called name to w.
func New(w io.Writer, name string) *Screen {
	return &Screen{w: w, name: name, questions: map[int][]message.Button{}, said: map[int]string{}}
}

// NumberFrom makes first the id of the conversation's next message: a
// conversation kept on (its state stored) goes on numbering where the
// last one stopped, as a Telegram chat's ids do.
func (s *Screen) NumberFrom(first int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = first - 1
}

// NextID gives a message its id; the user's messages take theirs here
// too, so that every message of the conversation has its own.
func (s *Screen) NextID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	return s.last
}

// Print writes a line of the conversation that is not the bot's (the
// user's words echoed, a note): after the streamed line, if one is open.
func (s *Screen) Print(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLine()
	fmt.Fprintf(s.w, format+"\n", args...)
}

// Prompt asks for the user's next line: after the streamed line, if one
// is open, and with no line break.
func (s *Screen) Prompt(prompt string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLine()
	fmt.Fprint(s.w, prompt)
}

// Choice returns the button the user chose by typing its number n (from
// 1) under the latest open question, and the message it is under; false
// when no question is open or it has no option n.
func (s *Screen) Choice(n int) (b message.Button, messageID int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	options := s.questions[s.asked]
	if n < 1 || n > len(options) {
		return message.Button{}, 0, false
	}
	return options[n-1], s.asked, true
}

// endLine ends the open streamed line. s.mu is held.
func (s *Screen) endLine() {
	if s.open != "" {
		fmt.Fprintln(s.w)
		s.open = ""
	}
}

// say writes one message of the bot called name, with kb's options
// numbered below it, and returns its id. A message that goes on from the
// streamed text writes only the rest of it; one in reply to another
// bot's message (replyTo) names that bot.
func (s *Screen) say(name string, replyTo int, text string, kb message.Keyboard) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rest, ok := strings.CutPrefix(text, s.open); ok && s.open != "" {
		fmt.Fprintln(s.w, rest)
		s.open = ""
	} else {
		s.endLine()
		speaker := name
		if to := s.said[replyTo]; to != "" && to != name {
			speaker += " (to " + to + ")"
		}
		fmt.Fprintf(s.w, "%s: %s\n", speaker, text)
	}
	s.last++
	id := s.last
	s.said[id] = name
	var options []message.Button
	for _, row := range kb {
		options = append(options, row...)
	}
	if len(options) == 0 {
		return id
	}
	for i, b := range options {
		fmt.Fprintf(s.w, "  %d. %s\n", i+1, b.Text)
	}
	s.questions[id], s.asked = options, id
	return id
}

// stream writes text as the streamed reply so far.
func (s *Screen) stream(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rest, ok := strings.CutPrefix(text, s.open); ok && s.open != "" {
		fmt.Fprint(s.w, rest)
	} else {
		s.endLine()
		fmt.Fprintf(s.w, "%s: %s", s.name, text)
	}
	s.open = text
}

// drop forgets the options under message id.
func (s *Screen) drop(id int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.questions, id)
	if s.asked == id {
		s.asked = 0
	}
}

// Outbox is the conversation's outbox, whichever chat it names: a
// terminal holds one conversation.
func (s *Screen) Outbox(message.Key, bool, int, *zap.Logger) conversation.Outbox {
	return &outbox{s: s, name: s.name}
}

// GuestOutbox is the same outbox: there are no guests in a terminal.
func (s *Screen) GuestOutbox(string, string, *zap.Logger) conversation.Outbox {
	return &outbox{s: s, name: s.name}
}

// As is an outbox of another bot of the conversation, called name (a
// panel's member), replying to message replyTo (0: none): its lines
// start with its name, and the name of the bot it replies to.
func (s *Screen) As(name string, replyTo int) conversation.Outbox {
	return &outbox{s: s, name: name, replyTo: replyTo}
}

func (s *Screen) Fetch(context.Context, string, string, int64) ([]byte, error) {
	return nil, ErrNoFiles
}

// AnswerTap writes the notice a tap is answered with, if any.
func (s *Screen) AnswerTap(_ context.Context, _, _, notice string) error {
	if notice != "" {
		s.Print("(%s)", notice)
	}
	return nil
}

// IsAdmin: nobody at the terminal is another member's admin; the one who
// types asks every answer, so /stop and taps are theirs anyway.
func (s *Screen) IsAdmin(context.Context, string, int64, int64) (bool, error) {
	return false, nil
}

// outbox sends one answer to the screen.
type outbox struct {
	s        *Screen
	name     string // the bot it sends as
	replyTo  int    // the message it replies to (0: none)
	keyboard message.Keyboard
	sent     []int
	streamed *stream
}

func (o *outbox) Text(_ context.Context, text string, _ bool) error {
	kb := o.keyboard
	o.keyboard = nil
	o.sent = append(o.sent, o.s.say(o.name, o.replyTo, text, kb))
	return nil
}

// Notice is written as any message: the terminal has one reader.
func (o *outbox) Notice(ctx context.Context, text string, _ int64) error {
	return o.Text(ctx, text, false)
}

// Rich sends nothing: Claude's Markdown is written as it is, by Text.
func (o *outbox) Rich(context.Context, string, bool) (bool, error) { return false, nil }

// File writes where the voice note or picture is, and what its sidecar
// (or the file itself) says of it: a voice note's words on a line of
// their own, as a listener would hear them.
func (o *outbox) File(_ context.Context, kind message.FileKind, path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	what := "voice message"
	if kind == message.Picture {
		what = "picture"
	}
	facts, words := fileFacts(path, info.Size())
	text := fmt.Sprintf("[%s] %s (%s)", what, path, facts)
	if words != "" {
		text += "\n  says: " + words
	}
	kb := o.keyboard
	o.keyboard = nil
	o.sent = append(o.sent, o.s.say(o.name, o.replyTo, text, kb))
	return nil
}

// fileFacts says how long a voice note is or how large a picture is,
// and what a voice note says (from its sidecar).
func fileFacts(path string, size int64) (facts, words string) {
	list := []string{fmt.Sprintf("%d bytes", size)}
	var m output.Metadata
	if data, err := os.ReadFile(output.SidecarPath(path)); err == nil && json.Unmarshal(data, &m) == nil {
		if m.DurationSeconds > 0 {
			list = append(list, fmt.Sprintf("%.1f s", m.DurationSeconds))
		}
		if m.Width > 0 {
			list = append(list, fmt.Sprintf("%dx%d", m.Width, m.Height))
		}
		return strings.Join(list, ", "), strings.Join(strings.Fields(m.Text), " ")
	}
	if data, err := os.ReadFile(path); err == nil {
		if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
			list = append(list, fmt.Sprintf("%dx%d", cfg.Width, cfg.Height))
		}
	}
	return strings.Join(list, ", "), ""
}

// KeepAction shows nothing: the streamed text, or the wait, says it.
func (o *outbox) KeepAction(context.Context, message.Action) func() { return func() {} }

func (o *outbox) Stream(context.Context) conversation.Stream {
	o.streamed = &stream{s: o.s}
	return o.streamed
}

// Withdraw ends the streamed line with a note: no reply replaces it.
func (o *outbox) Withdraw(context.Context) error {
	if o.streamed != nil && o.streamed.shown() {
		o.s.Print("(withdrawn)")
	}
	return nil
}

func (o *outbox) Sent() []int { return o.sent }

func (o *outbox) Attach(kb message.Keyboard) { o.keyboard = kb }

// Quote changes nothing: the terminal's lines follow one another.
func (o *outbox) Quote(int) {}

// Amend writes the addition (the option chosen) and closes the question.
func (o *outbox) Amend(_ context.Context, id int, _, addition string) error {
	o.s.drop(id)
	o.s.Print("  %s", addition)
	return nil
}

func (o *outbox) DropButtons(_ context.Context, id int) error {
	o.s.drop(id)
	return nil
}

// stream writes a reply while the model writes it.
type stream struct {
	s *Screen

	mu        sync.Mutex
	first     time.Time
	cancelled bool
}

func (st *stream) Update(text string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cancelled || text == "" {
		return
	}
	if st.first.IsZero() {
		st.first = time.Now()
	}
	st.s.stream(text)
}

func (st *stream) Finish() time.Time {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.cancelled = true
	return st.first
}

func (st *stream) Cancel() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.cancelled = true
}

func (st *stream) shown() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return !st.first.IsZero()
}

// DraftID is 0: a terminal has no drafts (Ctrl-C stops an answer).
func (*stream) DraftID() int64 { return 0 }
func (*stream) UseRich(bool)   {}
