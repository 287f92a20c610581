package toolspec

import "fmt"

// The memory tools: the model keeps short notes about the user it talks
// with, and drops one the user takes back. Served only to the bot's own
// CLIs (brainbot run), never as a stdio server: whose notes they are is
// the request's user, which only the bot knows. The server's name is
// brainbot's own, so that no brain's server called "memory" (a common
// name) is refused.
const (
	MemoryServer       = "brainbot-memory"
	RememberToolName   = "remember"
	ForgetNoteToolName = "forget_note"
	// RememberTool and ForgetNoteTool are the tools as Claude sees them.
	RememberTool   = "mcp__" + MemoryServer + "__" + RememberToolName
	ForgetNoteTool = "mcp__" + MemoryServer + "__" + ForgetNoteToolName
)

// The bounds of a brain's memory (memory.max_notes, memory.max_note_chars):
// the defaults, and the most a brain may allow. Every note reaches the
// model at the start of each new session, so the bounds bound that too;
// /memory shows a button per note under one message.
const (
	DefaultMaxNotes     = 30
	MaxMaxNotes         = 50
	DefaultMaxNoteChars = 200
	MaxMaxNoteChars     = 1000
)

// RememberArgs are the arguments of remember.
type RememberArgs struct {
	Note string `json:"note"`
}

// ForgetNoteArgs are the arguments of forget_note.
type ForgetNoteArgs struct {
	ID string `json:"id"`
}

// RememberDescription tells the model when to keep a note and how.
const RememberDescription = "Keep a short note about the user you are talking with, to remember in later " +
	"conversations: a fact they told you that is worth keeping (their name, what they like, a pet, a plan, how they " +
	"want to be answered). One fact per note, in a sentence of your own words, written so it still makes sense weeks " +
	"later. Do not keep what is only about this conversation, what they did not want kept, or secrets such as " +
	"passwords. Your notes come back to you at the start of each new conversation, in brainbot's note that opens " +
	"the first message, each with its id; the user can read them with /memory."

// ForgetNoteDescription tells the model when to drop a note.
const ForgetNoteDescription = "Drop one of your notes about the user, by its id: when they take back what it says, " +
	"ask you to forget it, or it is no longer true (then keep the new fact with remember)."

// The tools' answers, in words the model can act on.
const (
	// MemoryNotHere: the request may not keep notes (a group chat whose
	// brain keeps them only in private chats).
	MemoryNotHere = "Notes about users are kept only in private chats with this bot: nothing was kept or dropped. " +
		"Do not tell the user you will remember it."
	// NoNote: forget_note's id names no note.
	NoNote = "There is no note with this id: nothing was dropped. The ids are those of the notes given to you."
)

// NotesFull is remember's answer when the user's notes are at the bound.
func NotesFull(maxNotes int) string {
	return fmt.Sprintf("You keep %d notes about this user already, the most this bot allows: nothing was kept. "+
		"If this fact matters more than one you keep, drop that one with forget_note and call remember again; "+
		"otherwise tell the user you cannot remember more (they can drop notes with /memory).", maxNotes)
}

// NoteTooLong is remember's answer to a note past the bound.
func NoteTooLong(maxChars int) string {
	return fmt.Sprintf("The note is longer than %d characters: nothing was kept. Shorten it to the fact itself and "+
		"call remember again.", maxChars)
}

// NoteKept is remember's answer to a note kept.
func NoteKept(id string) string { return "Kept as note " + id + "." }

// NoteDropped is forget_note's answer to a note dropped.
func NoteDropped(id string) string { return "Note " + id + " dropped." }
