package mcp

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/zap"

	"brainbot/ticket"
	"brainbot/toolspec"
)

// Notebook keeps the notes the memory tools write: the process's backend
// (its state.Memories), which the tool side does not link.
type Notebook interface {
	// Remember keeps text as user's newest note with bot, made at now,
	// and returns its id; unless limit are kept already: ErrNotesFull.
	Remember(ctx context.Context, bot string, user int64, text string, limit int, now time.Time) (id string, err error)
	// Forget drops user's note id with bot; false if there is none.
	Forget(ctx context.Context, bot string, user int64, id string) (bool, error)
}

// ErrNotesFull is Remember's answer when the user's notes are at the
// brain's bound.
var ErrNotesFull = errors.New("mcp: the notes about this user are at their bound")

// memoryTools are remember and forget_note as the model sees them.
func memoryTools(g *gate) []server.ServerTool {
	return []server.ServerTool{
		{Tool: mcpgo.NewTool(toolspec.RememberToolName,
			mcpgo.WithDescription(toolspec.RememberDescription),
			mcpgo.WithString("note", mcpgo.Required(), mcpgo.Description("The note: one fact about the user, in a short sentence."))),
			Handler: g.remember},
		{Tool: mcpgo.NewTool(toolspec.ForgetNoteToolName,
			mcpgo.WithDescription(toolspec.ForgetNoteDescription),
			mcpgo.WithString("id", mcpgo.Required(), mcpgo.Description("The id of the note to drop, as given with your notes."))),
			Handler: g.forgetNote},
	}
}

// memory is whose notes the caller's request keeps, and where; ok is
// false, after logging why, when it keeps none.
func (g *gate) memory(ctx context.Context, tool string) (ticket.Memory, Notebook, *zap.Logger, bool) {
	token, _ := ctx.Value(tokenKey{}).(string)
	m, log, err := g.tickets.Memory(token)
	if log == nil {
		log = g.log
	}
	notes := g.notes.Load()
	if err == nil && m.MaxNotes == 0 {
		err = errors.New("the brain keeps no notes")
	}
	if err != nil || notes == nil {
		log.Info("memory tool call refused", zap.String("tool", tool), zap.Error(err))
		return m, nil, log, false
	}
	return m, *notes, log, true
}

// remember serves remember: a note of the request's user with its bot,
// whatever the model names; within the brain's bounds.
func (g *gate) remember(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	m, notes, log, ok := g.memory(ctx, toolspec.RememberToolName)
	if !ok {
		return mcpgo.NewToolResultError(toolspec.MemoryNotHere), nil
	}
	text := strings.TrimSpace(req.GetString("note", ""))
	switch {
	case text == "":
		return mcpgo.NewToolResultError("note is required and must not be empty"), nil
	case utf8.RuneCountInString(text) > m.MaxNoteChars:
		return mcpgo.NewToolResultError(toolspec.NoteTooLong(m.MaxNoteChars)), nil
	}
	id, err := notes.Remember(ctx, m.Bot, m.User, text, m.MaxNotes, g.now())
	switch {
	case errors.Is(err, ErrNotesFull):
		log.Info("note refused: the notes are full", zap.Int("max_notes", m.MaxNotes))
		return mcpgo.NewToolResultError(toolspec.NotesFull(m.MaxNotes)), nil
	case err != nil:
		log.Warn("could not keep a note", zap.Error(err))
		return mcpgo.NewToolResultError("The note could not be kept just now: nothing was kept."), nil
	}
	log.Info("note kept", zap.String("note", id))
	return mcpgo.NewToolResultText(toolspec.NoteKept(id)), nil
}

// forgetNote serves forget_note: drops a note of the request's user's.
func (g *gate) forgetNote(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	m, notes, log, ok := g.memory(ctx, toolspec.ForgetNoteToolName)
	if !ok {
		return mcpgo.NewToolResultError(toolspec.MemoryNotHere), nil
	}
	return dropOne(ctx, req, log, func(ctx context.Context, id string) (bool, error) { return notes.Forget(ctx, m.Bot, m.User, id) },
		dropWords{what: "note", failed: "The note could not be dropped just now: nothing was dropped.", none: toolspec.NoNote,
			done: "note dropped by the model", answer: toolspec.NoteDropped}), nil
}

// dropWords are what dropOne says of one kind of thing.
type dropWords struct {
	// what names it in the log; failed, none and answer(id) answer the
	// model; done is the log line of one dropped.
	what, failed, none, done string
	answer                   func(id string) string
}

// dropOne serves a tool that drops one of the user's things by the id
// the call names, with drop: in words the model can act on.
func dropOne(ctx context.Context, req mcpgo.CallToolRequest, log *zap.Logger, drop func(context.Context, string) (bool, error), w dropWords) *mcpgo.CallToolResult {
	id := strings.TrimSpace(req.GetString("id", ""))
	dropped, err := drop(ctx, id)
	switch {
	case err != nil:
		log.Warn("could not drop a "+w.what, zap.Error(err))
		return mcpgo.NewToolResultError(w.failed)
	case !dropped:
		return mcpgo.NewToolResultError(w.none)
	}
	log.Info(w.done, zap.String(w.what, id))
	return mcpgo.NewToolResultText(w.answer(id))
}
