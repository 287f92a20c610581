package toolspec

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// The question tool: the model asks the user a question with a few
// options, which the bot shows as buttons under it. Claude sees it as
// QuestionTool. It is served only to the bot's own CLIs (brainbot run),
// never as a stdio server: a question means something only in a chat.
const (
	QuestionServer   = "brainbot"
	QuestionToolName = "ask_question"
	// QuestionTool is the question tool as Claude sees it.
	QuestionTool = "mcp__" + QuestionServer + "__" + QuestionToolName
)

// The bounds of a question: what fits under a message as buttons a
// thumb can tell apart.
const (
	MinOptions = 2
	MaxOptions = 8
	// MaxOptionLen and MaxQuestionLen are in characters.
	MaxOptionLen   = 64
	MaxQuestionLen = 300
)

// QuestionArgs are the arguments of ask_question.
type QuestionArgs struct {
	Question string   `json:"question"`
	Options  []string `json:"options"`
}

// QuestionDescription tells the model when the tool helps and how to use
// it.
var QuestionDescription = fmt.Sprintf("Ask the user a question with %d to %d short options, shown under your message as buttons "+
	"they tap (they may also write their own answer). Use it when the user's next step is a choice between a few clear "+
	"alternatives: to settle what an ambiguous request means, to let them pick among options you found, or to offer next "+
	"steps. Do not use it for open questions, nor to ask whether they are satisfied. Write what you want to say first, as "+
	"your normal reply, then call this tool once, and end your turn: do not repeat the question or the options in your "+
	"text. The user's choice comes back as their next message.", MinOptions, MaxOptions)

// QuestionAsked is the tool's answer to a question it accepted: what the
// model should do next.
const QuestionAsked = "The question is shown to the user with a button for each option. End your turn now without " +
	"writing anything more: their choice, or their own words, comes as their next message."

// ErrQuestion is wrapped by every problem Check finds.
var ErrQuestion = errors.New("invalid question")

// Check reports what is wrong with a question as the model wrote it,
// in words the model can act on. Surrounding spaces are trimmed first.
func (a *QuestionArgs) Check() error {
	a.Question = strings.TrimSpace(a.Question)
	options := make([]string, len(a.Options))
	for i, o := range a.Options {
		options[i] = strings.TrimSpace(o)
	}
	a.Options = options
	switch {
	case a.Question == "":
		return fmt.Errorf("%w: question is required", ErrQuestion)
	case utf8.RuneCountInString(a.Question) > MaxQuestionLen:
		return fmt.Errorf("%w: the question is longer than %d characters: shorten it, and write the rest before it as your reply", ErrQuestion, MaxQuestionLen)
	case len(a.Options) < MinOptions || len(a.Options) > MaxOptions:
		return fmt.Errorf("%w: %d options; give %d to %d", ErrQuestion, len(a.Options), MinOptions, MaxOptions)
	}
	for i, o := range a.Options {
		switch {
		case o == "":
			return fmt.Errorf("%w: option %d is empty", ErrQuestion, i+1)
		case utf8.RuneCountInString(o) > MaxOptionLen:
			return fmt.Errorf("%w: option %d is longer than %d characters", ErrQuestion, i+1, MaxOptionLen)
		case strings.ContainsAny(o, "\n\r"):
			return fmt.Errorf("%w: option %d has a line break; an option is one line", ErrQuestion, i+1)
		case slices.Contains(a.Options[:i], o):
			return fmt.Errorf("%w: option %d repeats an earlier one", ErrQuestion, i+1)
		}
	}
	return nil
}
