package admin

// The admin's window onto conversations: the surface lists them, shows
// one and forgets a user's; brainbot conversations and brainbot forget
// are its clients.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.uber.org/zap"

	"brainbot/claude"
	"brainbot/message"
	"brainbot/output"
	"brainbot/state"
)

// Conversations serves the conversation calls: the list, one shown, and
// a user forgotten.
type Conversations struct {
	State interface {
		state.Conversations
		state.Transcripts
		state.Memories
		state.Reminders
	}
	// Claude is the driver: where a session's transcript is, and the warm
	// CLI a restored transcript replaces.
	Claude interface {
		SessionFile(bot, session string) string
		End(conversation string)
	}
	// Forget is the one forget procedure (the Manager's).
	Forget func(ctx context.Context, bot string, user int64) (state.Forgotten, error)
	Log    *zap.Logger
}

// ConversationInfo is one conversation as the admin lists it.
type ConversationInfo struct {
	Bot         string    `json:"bot"`
	Chat        int64     `json:"chat"`
	Thread      int       `json:"thread"`
	User        int64     `json:"user"` // message.Key.User: 0 for a group's
	Session     string    `json:"session"`
	LastMessage time.Time `json:"last_message"`
	// Turns (each speaker's part), Messages (the user's: a message and
	// its answer are two turns) and Bytes are the transcript's; Problem
	// says why it could not be read ("" when it was).
	Turns    int    `json:"turns"`
	Messages int    `json:"messages"`
	Bytes    int64  `json:"bytes"`
	Problem  string `json:"problem,omitempty"`
	// Notes counts the notes the bot's persona keeps about User (0 for a
	// group's conversation): a brain's memory. Reminders counts User's
	// reminders with the bot not sent yet, set in any chat.
	Notes     int `json:"notes"`
	Reminders int `json:"reminders"`
}

// ConversationShown is one conversation with its transcript.
type ConversationShown struct {
	ConversationInfo
	Transcript []claude.Turn `json:"transcript"`
}

// ForgetAnswer is what POST /forget answers.
type ForgetAnswer struct {
	Bot           string `json:"bot"`
	User          int64  `json:"user"`
	Conversations int    `json:"conversations"`
	Sessions      int    `json:"sessions"`
	Notes         int    `json:"notes"`
	Reminders     int    `json:"reminders"`
}

func (api Conversations) list(w http.ResponseWriter, r *http.Request) {
	f, err := conversationFilter(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	convs, err := api.State.Conversations(r.Context(), f)
	if err != nil {
		api.fail(w, "list conversations", err)
		return
	}
	out := make([]ConversationInfo, 0, len(convs))
	for _, c := range convs {
		info, _ := api.read(r.Context(), c)
		out = append(out, info)
	}
	writeJSON(w, out)
}

func (api Conversations) show(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	chat, cerr := strconv.ParseInt(q.Get("chat"), 10, 64)
	thread, terr := strconv.Atoi(cmp.Or(q.Get("thread"), "0"))
	key := message.Key{Bot: q.Get("bot"), Chat: chat, Thread: thread}
	if key.Bot == "" || cerr != nil || terr != nil {
		http.Error(w, "want bot, chat (a number) and optionally thread (a number)", http.StatusBadRequest)
		return
	}
	convs, err := api.State.Conversations(r.Context(), state.ConversationFilter{Bot: key.Bot, User: key.User()})
	if err != nil {
		api.fail(w, "show a conversation", err)
		return
	}
	for _, c := range convs {
		if c.Key != key {
			continue
		}
		info, turns := api.read(r.Context(), c)
		shown := ConversationShown{ConversationInfo: info, Transcript: turns}
		if q.Get("format") == "json" {
			writeJSON(w, shown)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		writeConversation(w, shown)
		return
	}
	http.Error(w, "no such conversation", http.StatusNotFound)
}

func (api Conversations) forgetUser(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	user, err := strconv.ParseInt(q.Get("user"), 10, 64)
	if err != nil || user <= 0 {
		http.Error(w, "want user: a Telegram user's id", http.StatusBadRequest)
		return
	}
	f, err := api.Forget(r.Context(), q.Get("bot"), user)
	if err != nil {
		api.fail(w, "forget a user", err)
		return
	}
	writeJSON(w, ForgetAnswer{Bot: f.Bot, User: f.User, Conversations: len(f.Conversations), Sessions: len(f.Sessions), Notes: f.Notes,
		Reminders: f.Reminders})
}

// conversationFilter reads the filter of GET /conversations.
func conversationFilter(r *http.Request) (state.ConversationFilter, error) {
	q := r.URL.Query()
	f := state.ConversationFilter{Bot: q.Get("bot")}
	if u := q.Get("user"); u != "" {
		var err error
		if f.User, err = strconv.ParseInt(u, 10, 64); err != nil || f.User <= 0 {
			return f, errors.New("user: want a Telegram user's id")
		}
	}
	return f, nil
}

// read reads c's transcript: in a cluster its latest copy is brought
// here first (a warm CLI holding an older one ends).
func (api Conversations) read(ctx context.Context, c state.Conversation) (ConversationInfo, []claude.Turn) {
	k := c.Key
	info := ConversationInfo{Bot: k.Bot, Chat: k.Chat, Thread: k.Thread, User: k.User(), Session: c.Session.ID, LastMessage: c.Session.LastUsed}
	err := api.State.Restore(ctx, k.Bot, c.Session.ID, func() { api.Claude.End(k.String()) })
	var turns []claude.Turn
	if err == nil {
		path := api.Claude.SessionFile(k.Bot, c.Session.ID)
		if turns, err = claude.ReadTranscript(path); err == nil {
			filesWhereTheyAre(turns)
			if fi, serr := os.Stat(path); serr == nil {
				info.Bytes = fi.Size()
			}
		}
	}
	if err != nil {
		info.Problem = err.Error()
		api.Log.Warn("could not read a conversation's transcript", zap.String("bot", k.Bot), zap.String("session", c.Session.ID), zap.Error(err))
	}
	info.Turns = len(turns)
	for _, t := range turns {
		if t.Role == "user" {
			info.Messages++
		}
	}
	if info.User != 0 {
		notes, err := api.State.Notes(ctx, k.Bot, info.User)
		if err != nil {
			api.Log.Warn("could not count the notes kept about a conversation's user", zap.String("bot", k.Bot), zap.Error(err))
		}
		info.Notes = len(notes)
		reminders, err := api.State.Reminders(ctx, k.Bot, info.User)
		if err != nil {
			api.Log.Warn("could not count a conversation's user's reminders", zap.String("bot", k.Bot), zap.Error(err))
		}
		info.Reminders = len(reminders)
	}
	return info, turns
}

// filesWhereTheyAre names each file the tools reported where it is now:
// once its reply is sent it is organised under its bot and user.
func filesWhereTheyAre(turns []claude.Turn) {
	for _, t := range turns {
		for i, f := range t.Files {
			t.Files[i], _ = output.Organized(f)
		}
	}
}

func (api Conversations) fail(w http.ResponseWriter, what string, err error) {
	api.Log.Error("admin call failed", zap.String("call", what), zap.Error(err))
	code := http.StatusInternalServerError
	if errors.Is(err, state.ErrUnavailable) {
		code = http.StatusServiceUnavailable
	}
	http.Error(w, what+": "+err.Error(), code)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // a client gone mid-answer needs no report
}

// writeConversation writes c as text: who said what, in order, with the
// tools the model called and the files they made. What users and the
// model wrote is shown printable: it reaches an admin's terminal.
func writeConversation(w io.Writer, c ConversationShown) {
	fmt.Fprintf(w, "%s · chat %d", c.Bot, c.Chat)
	if c.Thread != 0 {
		fmt.Fprintf(w, " · thread %d", c.Thread)
	}
	fmt.Fprintf(w, " · user %d · session %s · last message %s · %s\n", c.User, c.Session,
		c.LastMessage.UTC().Format(time.DateTime+" MST"), Counted(c.Messages, "message"))
	if c.Problem != "" {
		fmt.Fprintf(w, "\n(transcript not read: %s)\n", printable(c.Problem))
	}
	for _, t := range c.Transcript {
		fmt.Fprintf(w, "\n[%s] %s:\n", t.Time.UTC().Format(time.TimeOnly), t.Role)
		for _, tool := range t.Tools {
			fmt.Fprintf(w, "  (called %s)\n", printable(tool))
		}
		for _, line := range strings.Split(t.Text, "\n") {
			if t.Text != "" {
				fmt.Fprintf(w, "  %s\n", printable(line))
			}
		}
		for _, f := range t.Files {
			gone := ""
			if _, err := os.Lstat(f); err != nil {
				gone = " (no longer there)"
			}
			fmt.Fprintf(w, "  file: %s%s\n", printable(f), gone)
		}
	}
}

// printable is s with what a terminal would act on instead of showing
// written as an escape (\x1b, \u202e): control characters (ESC starts the
// sequences that set a window's title, make links or move the cursor) and
// the marks that reorder text shown right to left.
func printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteRune(r)
		case r < 0x20, r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r >= 0x80 && r <= 0x9f, unicode.Is(unicode.Bidi_Control, r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
