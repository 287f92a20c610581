// Package claude runs one user request through the Claude Code CLI
// (`claude -p --input-format stream-json --output-format stream-json`) as a
// subprocess and returns what the bot needs: the reply text, and for speech
// and image requests the file our MCP tool wrote in a second turn.
//
// It knows nothing about Telegram or brain files; callers hand it plain
// options in a Request.
//
// Its rooms: claude/cliproc runs a CLI process, claude/streamjson speaks
// the CLI's protocol, and claude/pool keeps processes ready (each
// conversation's warm one between its messages, spares ahead of new
// conversations) and decides when they start and end. The driver turns a
// Request into what the pool knows (a fingerprint, a shape, and the
// functions that start and raise a CLI: spares.go) and keeps the
// two-turn exchange, the per-bot folders and the MCP configs.
package claude

import (
	"encoding/json"
	"time"

	"go.uber.org/zap"

	"brainbot/claude/streamjson"
	"brainbot/sysprompt"
	"brainbot/ticket"
	"brainbot/toolspec"
)

// Mode is the kind of reply a request asks for.
type Mode int

const (
	// Text is one turn; the result is Claude's reply text.
	Text Mode = iota
	// Speech is turn 1 as text, then a second turn in the same process that
	// makes Claude call the speech tool (toolspec.SpeechTool) with exactly
	// that text.
	Speech
	// Image is turn 1 (its text may be empty), then a second turn that makes
	// Claude call the image tool (toolspec.ImageTool).
	Image
)

func (m Mode) String() string {
	switch m {
	case Text:
		return "text"
	case Speech:
		return "speech"
	case Image:
		return "image"
	}
	return "unknown"
}

// Request is one user message to run.
type Request struct {
	Mode Mode
	// Prompt is the user's message, verbatim. It may be empty when
	// Attachments carry the whole message (a photo without a caption).
	Prompt string
	// Attachments are files the user sent with the message (photos, PDFs,
	// text files); the model gets them beside Prompt, in this order.
	Attachments []Attachment
	// SessionID names the conversation. With Resume true it is resumed
	// with --resume. With Resume false it is a new conversation: named by
	// SessionID when set (--session-id), else by the driver, which then
	// serves it with a spare when one fits (see Driver.KeepSpares);
	// Result.SessionID says the name.
	SessionID string
	Resume    bool
	// MessageID is the user message's id (a UUID): the session's
	// transcript records the message under it. Retry says an earlier
	// attempt may have sent this message to the session already (it is
	// replayed after a restart): a copy found there is taken out of the
	// session, with what followed it, before it is sent, so that the
	// model sees it once (rewind.go).
	MessageID string
	Retry     bool

	// SystemPrompt reaches the CLI in a file (--system-prompt-file,
	// promptfile.go: never on its command line, which any local user
	// reads), fixed for the life of the process: the variables that hold
	// for the bot ({{bot_name}}) are
	// filled in from PromptVars when the process starts, while the values
	// of the per-message ones ({{time}}, {{user_first_name}}...) come with
	// this request's message, in a note of their own ahead of the user's
	// words (sysprompt.ForProcess and Note). A prompt that uses none gets
	// no note.
	SystemPrompt string
	PromptVars   sysprompt.Vars
	// Context is brainbot's own words about the message (what it replies
	// to), sent with the note, ahead of and apart from the user's words.
	// The caller escapes what of it came from users.
	Context string
	Model   string // passed as --model when set
	// BotID names the bot. The CLI runs in the bot's own working
	// directory, DataDir/claude/bot-<BotID>: the CLI finds the sessions it
	// resumes by working directory.
	BotID string

	// FilePrefix names the file of a speech or image request (see
	// output.Prefix); the tool writes <FilePrefix>-<unix ms><ext>. Unique
	// per request, it is how the caller finds the file.
	FilePrefix string
	// Speech and Image are the tool's settings chosen by the brain.
	Speech toolspec.SpeechSettings
	Image  toolspec.ImageSettings

	// MCPServers are the request's own MCP servers by name (a brain's),
	// beside our two: they go into the process's private --mcp-config
	// with their values as given, secrets included, so they must be
	// resolved already. AllowedTools lists which of their tools the model
	// may call (--allowedTools: mcp__<server> or mcp__<server>__<tool>),
	// and ToolTimeout bounds each call of them (0: the CLI's default).
	MCPServers   map[string]MCPServer
	AllowedTools []string
	ToolTimeout  time.Duration

	// MaxTurns bounds the model's round trips in each turn (--max-turns;
	// turn two of a voice or image reply needs 2: the tool call and the
	// answer to its result). MaxBudgetUSD bounds what the request may cost
	// (--max-budget-usd; the CLI checks it after each turn). Zero: no
	// bound.
	MaxTurns     int
	MaxBudgetUSD float64

	// Questions lets the model ask the user one question with options in
	// turn one (toolspec.QuestionTool, served by brainbot's tool server).
	// A request whose model asked one ends after turn one, whatever its
	// Mode: the question goes out as text, under its buttons (the call is
	// in Result.ToolCalls).
	Questions bool

	// Memory puts brainbot's memory server (toolspec.MemoryServer: the
	// notes' and the schedule's tools) in the MCP config fixed at the
	// spawn: a brain's choice. Which of its tools the model may call is
	// AllowedTools' (a brain with reminders and no memory allows no note
	// tool). Notes is whose notes and reminders they keep in this request,
	// the request's bot and user (the tool server answers every call with
	// toolspec.MemoryNotHere when its User is 0). The notes themselves
	// reach the model in Context.
	Memory bool
	Notes  ticket.Memory

	// JSONSchema, when set, is a JSON Schema the turn's answer must
	// follow (--json-schema): the CLI offers the model a StructuredOutput
	// tool with it as input schema and the answer is Result.Structured.
	// Only for Text requests: such a process forces the tool on every
	// turn, so it cannot also run a speech or image turn.
	JSONSchema string

	// OnText, when set, is called with turn 1's text so far each time the
	// model writes more of it (from the driver's goroutine: it must not
	// block). The final text is Result.Text.
	OnText func(text string)

	// OnFile, when set, is called once turn two's tool has reported its
	// file (Result.FilePath set), before the model's closing words: the
	// caller can send the file then, and Run still returns when the turn
	// ends, with its cost and session. Called from the goroutine that
	// called Run; the request waits while it runs.
	OnFile func(res *Result)

	// Conversation names the conversation the request belongs to (the
	// bot's chat, say). Its CLI process is kept warm for its next request
	// when Config.Warm allows; "" runs the request in a process of its
	// own.
	Conversation string

	// Log receives the driver's lines about this request and the tool
	// server's refusals of calls its CLI makes, so it should carry the
	// fields that name the request. The driver's own logger when nil.
	Log *zap.Logger

	// InactivityTimeout ends the request when the CLI prints nothing for
	// this long (default 120s). MaxDuration caps the whole request
	// (default 10m).
	InactivityTimeout time.Duration
	MaxDuration       time.Duration
}

// Attachment is one file given to the model with a user message, as a
// Messages API content block.
type Attachment struct {
	// MediaType says what it is and which block carries it: image/jpeg,
	// image/png, image/gif or image/webp an image block; application/pdf
	// a document block; text/plain a text document block (Data must be
	// UTF-8). The Claude API takes no other types.
	MediaType string
	// Name titles a document (its file name); images have none.
	Name string
	Data []byte
}

// Tokens counts model tokens as the CLI reports them (its result
// events' usage, per turn).
type Tokens = streamjson.Tokens

// Result is what one request produced.
type Result struct {
	// Text is Claude's turn-1 reply.
	Text string
	// Answered: turn 1 ended well, so Text is the model's whole answer.
	// In a speech request whose turn 2 then failed, Text is the words the
	// voice was to say, which may go out as text instead. A failed turn
	// 1's Text may be the CLI's own error ("API Error: 400 ...", "Not
	// logged in"), never the persona's words.
	Answered bool
	// Structured is the answer of a request with a JSONSchema, as the
	// CLI reported it (result.structured_output); nil otherwise.
	Structured json.RawMessage
	// SessionID is the conversation id the CLI reported (system/init or
	// result), for a new conversation the driver named too; store it for
	// the next --resume. Empty when the CLI failed before it reported one:
	// then no session was made.
	SessionID string

	// FilePath is the path the MCP tool reported writing (speech, image).
	// FilePrefix (the request's) and FileExt are what the driver asked
	// for, so the caller can locate the file even if the reported path is
	// unusable.
	FilePath   string
	FilePrefix string
	FileExt    string
	// FilePaths are every file the tool reported, in order, when a voice
	// answer is longer than one voice note holds (FilePath is the first);
	// nil for one file.
	FilePaths []string
	// SpokenChars counts the characters OpenAI spoke for a speech request
	// whose speech was made while turn one streamed (Config.Speak): what
	// it bills, also when the request was stopped or failed on the way.
	SpokenChars int

	// CostUSD is what the request cost: the CLI's total_cost_usd of its
	// last turn, a running total over the process.
	CostUSD float64
	// Tokens is the model's token usage over the request's turns.
	Tokens Tokens
	// Startup is spawn to first system/init (0 in a warm process); Turn1
	// and Turn2 are each turn's wall time (Turn2 zero for text); Total is
	// the request's, to its last result (and the CLI's exit, when it does
	// not stay warm).
	Startup, Turn1, Turn2, Total time.Duration
	// Warm: the request ran in a process kept from the conversation's
	// earlier request (Startup is then 0). Spare: it ran in a spare, a
	// process started before the request (Startup is from the request's
	// message to the CLI's first word).
	Warm, Spare bool
	// UnknownEvents counts stdout lines of types the driver skipped.
	UnknownEvents int
	// ToolCalls are the tool calls the model made, in the order their
	// results came (calls left without one at the end last).
	ToolCalls []ToolCall
}

// ToolCall is one tool call of the model, as the CLI reported it.
type ToolCall struct {
	// Server and Tool split the name mcp__<server>__<tool>; a tool that is
	// not an MCP tool has its whole name in Tool.
	Server, Tool string
	// Input is the call's arguments, as the model wrote them.
	Input json.RawMessage
	// Duration runs from the model's call to its result.
	Duration time.Duration
	// Outcome is ToolOK, ToolError or ToolDenied; Error is the text of an
	// error result (for logs: it is the tool's or the CLI's).
	Outcome string
	Error   string
	// TextBefore is the text the model wrote in turn one before the call,
	// its paragraphs as in Result.Text.
	TextBefore string
}

// The outcomes of a ToolCall.
const (
	ToolOK    = "ok"
	ToolError = "error"
	// ToolDenied: the CLI refused the call, the tool not being allowed.
	ToolDenied = "denied"
)
