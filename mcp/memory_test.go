package mcp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"brainbot/ticket"
	"brainbot/toolspec"
)

// pad is a Notebook in memory: each bot and user's notes, in order.
type pad struct {
	mu    sync.Mutex
	notes map[string][]string
	next  int
}

func key(bot string, user int64) string { return fmt.Sprintf("%s/%d", bot, user) }

func (p *pad) Remember(_ context.Context, bot string, user int64, text string, limit int, _ time.Time) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := key(bot, user)
	if limit > 0 && len(p.notes[k]) >= limit {
		return "", ErrNotesFull
	}
	p.next++
	p.notes[k] = append(p.notes[k], fmt.Sprintf("%d:%s", p.next, text))
	return fmt.Sprint(p.next), nil
}

func (p *pad) Forget(_ context.Context, bot string, user int64, id string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := key(bot, user)
	before := len(p.notes[k])
	p.notes[k] = slices.DeleteFunc(p.notes[k], func(n string) bool { return strings.HasPrefix(n, id+":") })
	return len(p.notes[k]) < before, nil
}

func (p *pad) of(bot string, user int64) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.notes[key(bot, user)])
}

// The memory tools keep the notes of the user and bot the request gave,
// whatever the model's arguments name; within the bounds, telling the
// model why when not; and nothing without a scope or a notebook.
func TestHTTPMemory(t *testing.T) {
	f := newHTTPFixture(t)
	p := f.process(t)
	c, err := f.connect(t, toolspec.MemoryServer, p.Token())
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.ListTools(context.Background(), mcpgo.ListToolsRequest{})
	if err != nil || len(res.Tools) != 6 {
		t.Fatalf("tools/list = %+v, %v; want remember, forget_note and the four schedule tools", res, err)
	}
	note := func(text string) map[string]any { return map[string]any{"note": text, "user": 8, "bot": "other"} }

	p.AllowMemory(ticket.Memory{Bot: "friend", User: 7, MaxNotes: 2, MaxNoteChars: 20})
	if msg := failure(t, call(t, c, toolspec.RememberToolName, note("Has a cat"))); msg != toolspec.MemoryNotHere {
		t.Errorf("before the notebook is given: %q, want %q", msg, toolspec.MemoryNotHere)
	}
	notes := &pad{notes: map[string][]string{}}
	f.srv.UseNotes(notes)
	if got := resultText(t, call(t, c, toolspec.RememberToolName, note("  Has a cat  "))); got != toolspec.NoteKept("1") {
		t.Errorf("remember: %q", got)
	}
	if msg := failure(t, call(t, c, toolspec.RememberToolName, note(strings.Repeat("é", 21)))); msg != toolspec.NoteTooLong(20) {
		t.Errorf("a note of 21 characters: %q", msg)
	}
	if msg := failure(t, call(t, c, toolspec.RememberToolName, note(" "))); !strings.Contains(msg, "note is required") {
		t.Errorf("an empty note: %q", msg)
	}
	resultText(t, call(t, c, toolspec.RememberToolName, note(strings.Repeat("é", 20))))
	if msg := failure(t, call(t, c, toolspec.RememberToolName, note("Likes jazz"))); msg != toolspec.NotesFull(2) {
		t.Errorf("a third note of at most 2: %q", msg)
	}
	if got, want := notes.of("friend", 7), []string{"1:Has a cat", "2:" + strings.Repeat("é", 20)}; !slices.Equal(got, want) {
		t.Errorf("the request's user's notes = %q, want %q", got, want)
	}
	if got := notes.of("other", 8); len(got) != 0 {
		t.Errorf("the notes the model named = %q, want none", got)
	}

	forget := func(id string) map[string]any { return map[string]any{"id": id, "user": 8} }
	if msg := failure(t, call(t, c, toolspec.ForgetNoteToolName, forget("9"))); msg != toolspec.NoNote {
		t.Errorf("forget_note of no note: %q", msg)
	}
	if got := resultText(t, call(t, c, toolspec.ForgetNoteToolName, forget("1"))); got != toolspec.NoteDropped("1") {
		t.Errorf("forget_note: %q", got)
	}
	if got := notes.of("friend", 7); len(got) != 1 {
		t.Errorf("notes after forget_note = %q", got)
	}

	// The next request (a group's, say) keeps none.
	p.Serve(f.cfg.Log)
	if msg := failure(t, call(t, c, toolspec.ForgetNoteToolName, forget("2"))); msg != toolspec.MemoryNotHere {
		t.Errorf("a request without a scope: %q", msg)
	}
	if got := notes.of("friend", 7); len(got) != 1 {
		t.Errorf("notes after a call without a scope = %q", got)
	}
}
