package main

// The admin's window onto conversations: the admin endpoint lists them,
// shows one and forgets a user's; brainbot conversations and brainbot
// forget are its clients.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/message"
	"brainbot/claude"
	"brainbot/state"
)

// conversationsAPI serves the conversation calls of the admin endpoint.
type conversationsAPI struct {
	state interface {
		state.Conversations
		state.Transcripts
	}
	// claude is the driver: where a session's transcript is, and the warm
	// CLI a restored transcript replaces.
	claude interface {
		SessionFile(bot, session string) string
		End(conversation string)
	}
	// forget is the one forget procedure (the Manager's).
	forget func(ctx context.Context, bot string, user int64) (state.Forgotten, error)
	log    *zap.Logger
}

// conversationInfo is one conversation as the admin lists it.
type conversationInfo struct {
	Bot         string    `json:"bot"`
	Chat        int64     `json:"chat"`
	Thread      int       `json:"thread"`
	User        int64     `json:"user"` // message.Key.User: 0 for a group's
	Session     string    `json:"session"`
	LastMessage time.Time `json:"last_message"`
	// Turns and Bytes are the transcript's; Problem says why it could not
	// be read ("" when it was).
	Turns   int    `json:"turns"`
	Bytes   int64  `json:"bytes"`
	Problem string `json:"problem,omitempty"`
}

// conversationShown is one conversation with its transcript.
type conversationShown struct {
	conversationInfo
	Transcript []claude.Turn `json:"transcript"`
}

// forgetAnswer is what POST /forget answers.
type forgetAnswer struct {
	Bot           string `json:"bot"`
	User          int64  `json:"user"`
	Conversations int    `json:"conversations"`
	Sessions      int    `json:"sessions"`
}

// withConversations adds the conversation calls to the admin endpoint e.
func (e endpoint) withConversations(api conversationsAPI) endpoint {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /conversations", api.list)
	mux.HandleFunc("GET /conversations/show", api.show)
	mux.HandleFunc("POST /forget", api.forgetUser)
	mux.Handle("/", e.handler)
	e.handler = mux
	return e
}

func (api conversationsAPI) list(w http.ResponseWriter, r *http.Request) {
	f, err := conversationFilter(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	convs, err := api.state.Conversations(r.Context(), f)
	if err != nil {
		api.fail(w, "list conversations", err)
		return
	}
	out := make([]conversationInfo, 0, len(convs))
	for _, c := range convs {
		info, _ := api.read(r.Context(), c)
		out = append(out, info)
	}
	writeJSON(w, out)
}

func (api conversationsAPI) show(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	chat, cerr := strconv.ParseInt(q.Get("chat"), 10, 64)
	thread, terr := strconv.Atoi(cmp.Or(q.Get("thread"), "0"))
	key := message.Key{Bot: q.Get("bot"), Chat: chat, Thread: thread}
	if key.Bot == "" || cerr != nil || terr != nil {
		http.Error(w, "want bot, chat (a number) and optionally thread (a number)", http.StatusBadRequest)
		return
	}
	convs, err := api.state.Conversations(r.Context(), state.ConversationFilter{Bot: key.Bot, User: key.User()})
	if err != nil {
		api.fail(w, "show a conversation", err)
		return
	}
	for _, c := range convs {
		if c.Key != key {
			continue
		}
		info, turns := api.read(r.Context(), c)
		shown := conversationShown{conversationInfo: info, Transcript: turns}
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

func (api conversationsAPI) forgetUser(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	user, err := strconv.ParseInt(q.Get("user"), 10, 64)
	if err != nil || user <= 0 {
		http.Error(w, "want user: a Telegram user's id", http.StatusBadRequest)
		return
	}
	f, err := api.forget(r.Context(), q.Get("bot"), user)
	if err != nil {
		api.fail(w, "forget a user", err)
		return
	}
	writeJSON(w, forgetAnswer{Bot: f.Bot, User: f.User, Conversations: len(f.Conversations), Sessions: len(f.Sessions)})
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
func (api conversationsAPI) read(ctx context.Context, c state.Conversation) (conversationInfo, []claude.Turn) {
	k := c.Key
	info := conversationInfo{Bot: k.Bot, Chat: k.Chat, Thread: k.Thread, User: k.User(), Session: c.Session.ID, LastMessage: c.Session.LastUsed}
	err := api.state.Restore(ctx, k.Bot, c.Session.ID, func() { api.claude.End(k.String()) })
	var turns []claude.Turn
	if err == nil {
		path := api.claude.SessionFile(k.Bot, c.Session.ID)
		if turns, err = claude.ReadTranscript(path); err == nil {
			if fi, serr := os.Stat(path); serr == nil {
				info.Bytes = fi.Size()
			}
		}
	}
	if err != nil {
		info.Problem = err.Error()
		api.log.Warn("could not read a conversation's transcript", zap.String("bot", k.Bot), zap.String("session", c.Session.ID), zap.Error(err))
	}
	info.Turns = len(turns)
	return info, turns
}

func (api conversationsAPI) fail(w http.ResponseWriter, what string, err error) {
	api.log.Error("admin call failed", zap.String("call", what), zap.Error(err))
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
// tools the model called and the files they made.
func writeConversation(w io.Writer, c conversationShown) {
	fmt.Fprintf(w, "%s · chat %d", c.Bot, c.Chat)
	if c.Thread != 0 {
		fmt.Fprintf(w, " · thread %d", c.Thread)
	}
	fmt.Fprintf(w, " · user %d · session %s · last message %s · %d turns\n", c.User, c.Session,
		c.LastMessage.UTC().Format(time.DateTime+" MST"), c.Turns)
	if c.Problem != "" {
		fmt.Fprintf(w, "\n(transcript not read: %s)\n", c.Problem)
	}
	for _, t := range c.Transcript {
		fmt.Fprintf(w, "\n[%s] %s:\n", t.Time.UTC().Format(time.TimeOnly), t.Role)
		for _, tool := range t.Tools {
			fmt.Fprintf(w, "  (called %s)\n", tool)
		}
		for _, line := range strings.Split(t.Text, "\n") {
			if t.Text != "" {
				fmt.Fprintf(w, "  %s\n", line)
			}
		}
		for _, f := range t.Files {
			fmt.Fprintf(w, "  file: %s\n", f)
		}
	}
}

// conversations lists the conversations of the running service, or shows
// one (conversations show).
func (m *Main) conversations(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "show" {
		return m.showConversation(ctx, args[1:])
	}
	fs := m.newFlagSet("conversations", "conversations [-bot B] [-user U] [-json] [-env-file FILE]\n       brainbot conversations show -bot B -chat C [-thread T] [-json]\n\n"+
		"Lists the conversations the running service keeps, the most recent first: bot, chat, user, last message, turns and transcript size. It asks the service's admin address (BRAINBOT_HTTP_ADDR, with BRAINBOT_ADMIN_TOKEN).")
	bot := fs.String("bot", "", "only this bot (its brain file's name without .yaml)")
	user := fs.Int64("user", 0, "only the conversations with this Telegram user's id")
	asJSON := fs.Bool("json", false, "print JSON, for programs")
	cfg, err := m.adminConfig(fs, args)
	if err != nil {
		return err
	}
	q := url.Values{}
	if *bot != "" {
		q.Set("bot", *bot)
	}
	if *user != 0 {
		q.Set("user", strconv.FormatInt(*user, 10))
	}
	body, err := askAdmin(ctx, cfg, http.MethodGet, "/conversations", q)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err = m.Stdout.Write(body)
		return err
	}
	var list []conversationInfo
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("the service's answer: %w", err)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BOT\tCHAT\tTHREAD\tUSER\tLAST MESSAGE\tTURNS\tSIZE\tSESSION")
	for _, c := range list {
		size := strconv.FormatInt(c.Bytes, 10) + " B"
		if c.Problem != "" {
			size = "unreadable"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\n", c.Bot, c.Chat, c.Thread, c.User,
			c.LastMessage.UTC().Format(time.DateTime), c.Turns, size, c.Session)
	}
	return tw.Flush()
}

// showConversation prints one conversation: as text, or JSON.
func (m *Main) showConversation(ctx context.Context, args []string) error {
	fs := m.newFlagSet("conversations show", "conversations show -bot B -chat C [-thread T] [-json] [-env-file FILE]\n\n"+
		"Prints one conversation of the running service: who said what, in order, the tools the model called and the files they made.")
	bot := fs.String("bot", "", "the bot (its brain file's name without .yaml)")
	chat := fs.Int64("chat", 0, "the chat's id (a private chat's is the user's)")
	thread := fs.Int("thread", 0, "the forum topic, or a guest conversation's (as conversations lists it)")
	asJSON := fs.Bool("json", false, "print JSON, for programs")
	cfg, err := m.adminConfig(fs, args)
	if err != nil {
		return err
	}
	if *bot == "" || *chat == 0 {
		return usageError{errors.New("-bot and -chat are needed (brainbot conversations lists them)")}
	}
	q := url.Values{"bot": {*bot}, "chat": {strconv.FormatInt(*chat, 10)}, "thread": {strconv.Itoa(*thread)}}
	if *asJSON {
		q.Set("format", "json")
	}
	body, err := askAdmin(ctx, cfg, http.MethodGet, "/conversations/show", q)
	if err != nil {
		return err
	}
	_, err = m.Stdout.Write(body)
	return err
}

// forget has the running service forget a user.
func (m *Main) forget(ctx context.Context, args []string) error {
	fs := m.newFlagSet("forget", "forget [-bot B] -user U [-env-file FILE]\n\n"+
		"Has the running service forget a user, as their /forget does: their conversations with the bot (every bot without -bot), transcripts, "+
		"voice notes and pictures, buttons, /voice choice, pending messages and daily counts. Usage records stay, without their id.")
	bot := fs.String("bot", "", "only this bot (default: every bot)")
	user := fs.Int64("user", 0, "the Telegram user's id")
	cfg, err := m.adminConfig(fs, args)
	if err != nil {
		return err
	}
	if *user <= 0 {
		return usageError{errors.New("-user is needed: the Telegram user's id")}
	}
	q := url.Values{"user": {strconv.FormatInt(*user, 10)}}
	if *bot != "" {
		q.Set("bot", *bot)
	}
	body, err := askAdmin(ctx, cfg, http.MethodPost, "/forget", q)
	if err != nil {
		return err
	}
	var a forgetAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Errorf("the service's answer: %w", err)
	}
	fmt.Fprintf(m.Stdout, "user %d forgotten with %s: %d conversations, %d sessions\n", a.User, cmp.Or(a.Bot, "every bot"), a.Conversations, a.Sessions)
	return nil
}
