package claude

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors a request can end with. The exported ones are those a caller acts
// on (errors.Is); the others, and the error types below, are kept apart for
// this package's tests and say what happened in logs. Every Error() text is
// for logs (they carry the CLI's stderr tail) and must never be shown to
// users.
var (
	// ErrSessionNotFound: --resume named a conversation the CLI does not
	// know (another HOME, another working directory, deleted files). The
	// caller can start a fresh session. It comes wrapped together with the
	// *resultError or *exitError that revealed it.
	ErrSessionNotFound = errors.New("claude: session not found")
	// errNothingToSpeak: a speech request whose turn 1 produced no text.
	errNothingToSpeak = errors.New("claude: empty reply, nothing to speak")
	// errNoStructuredOutput: a request with a JSON schema whose answer
	// carried no structured output.
	errNoStructuredOutput = errors.New("claude: no structured output in the answer")
	// ErrInterrupted: the request's turn was stopped (Driver.Interrupt).
	ErrInterrupted = errors.New("claude: interrupted")
	// ErrToolNotCalled: turn 2 ended without a call of the requested tool.
	ErrToolNotCalled = errors.New("claude: tool not called")
	// errToolDenied: the CLI refused the tool call (not in --allowedTools).
	errToolDenied = errors.New("claude: tool call denied")
	// ErrBounded is matched by the errors of a request the CLI stopped at
	// one of its bounds: errMaxTurns and errMaxBudget.
	ErrBounded = errors.New("claude: stopped at a bound")
	// errMaxTurns: a turn needed more model round trips than
	// Request.MaxTurns (result subtype error_max_turns).
	errMaxTurns error = boundError("claude: stopped at the request's turn limit")
	// errMaxBudget: the request cost more than Request.MaxBudgetUSD
	// (result subtype error_max_budget_usd).
	errMaxBudget error = boundError("claude: stopped at the request's budget")
	// errTimeout is matched by every *timeoutError.
	errTimeout = errors.New("claude: timeout")
)

// boundError is a bound the CLI stopped a request at; it matches
// ErrBounded.
type boundError string

func (e boundError) Error() string        { return string(e) }
func (e boundError) Is(target error) bool { return target == ErrBounded }

// resultError is a turn that ended with a result line whose is_error is
// true, e.g. an API error ("API Error: 400 ...", subtype "success") or
// "error_during_execution".
type resultError struct {
	Subtype    string
	Errors     []string
	Message    string // the result line's "result" text
	StderrTail string
}

func (e *resultError) Error() string {
	why := e.Subtype
	if why == "success" {
		// The CLI's subtype for a turn that ended (its error flag says
		// how): an API error is not a success.
		why = "is_error"
	}
	return withStderr(fmt.Sprintf("claude: turn failed (%s): %s%s", why, e.Message, listErrors(e.Errors)), e.StderrTail)
}

// toolError is a tool call that ran and failed: its tool_result has
// is_error set, or its JSON does not report success and a file path.
type toolError struct {
	Tool    string
	Message string
}

func (e *toolError) Error() string {
	return fmt.Sprintf("claude: tool %s failed: %s", e.Tool, e.Message)
}

// exitError is a CLI that exited (or closed its stdout) before printing
// the result the driver was waiting for. Code is the exit status, -1 when
// it was killed by a signal.
type exitError struct {
	Code       int
	StderrTail string
}

func (e *exitError) Error() string {
	return withStderr(fmt.Sprintf("claude: CLI exited with status %d before its result", e.Code), e.StderrTail)
}

// timeoutError ends a request that ran too long: Inactivity means the CLI
// printed nothing for After (Request.InactivityTimeout); otherwise the
// whole request exceeded After (Request.MaxDuration). It matches
// errTimeout.
type timeoutError struct {
	Inactivity bool
	After      time.Duration
	StderrTail string
}

func (e *timeoutError) Error() string {
	what := "request exceeded"
	if e.Inactivity {
		what = "no output from CLI for"
	}
	return withStderr(fmt.Sprintf("claude: timeout: %s %v", what, e.After), e.StderrTail)
}

// Is makes errors.Is(err, errTimeout) true.
func (e *timeoutError) Is(target error) bool { return target == errTimeout }

func withStderr(msg, tail string) string {
	if tail = strings.TrimSpace(tail); tail == "" {
		return msg
	}
	return msg + "; stderr: " + tail
}

func listErrors(errs []string) string {
	if len(errs) == 0 {
		return ""
	}
	return " [" + strings.Join(errs, "; ") + "]"
}
