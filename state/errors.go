package state

import (
	"errors"
	"fmt"
)

// ErrUnavailable marks an error of a log or of the state that is a pause,
// not a failure: what keeps it cannot be reached for now (in a cluster,
// NATS or a JetStream quorum is down). A message that meets it is handed
// back to its log and answered once the backend is back; nobody is told of
// an error.
var ErrUnavailable = errors.New("unavailable for now")

// ErrSuperseded is MarkAttempt's answer for a delivery whose update is
// answered, or being answered, through a newer delivery (in a cluster,
// the server handed it to another instance after an outage): it is left
// to that one, with no reply of this one's, and its Done and Abandon do
// nothing.
var ErrSuperseded = errors.New("answered through a newer delivery")

var (
	// ErrPanelStarted: a run for this /panel message exists already (it
	// reached another member bot first).
	ErrPanelStarted = errors.New("store: a panel run for this message exists")
	// ErrPanelBusy: another panel runs in the chat.
	ErrPanelBusy = errors.New("store: a panel is running in this chat")
)

// ErrNotesFull is AddNote's answer when the user's notes are at the
// brain's bound: a note must be dropped before another is kept.
var ErrNotesFull = errors.New("store: the notes about this user are at their bound")

// UnavailableError is an ErrUnavailable that names what could not be
// reached, for the admin reading the log.
type UnavailableError struct {
	// What could not be reached ("nats").
	What string
	Err  error
}

// Unavailable wraps err as an ErrUnavailable of what.
func Unavailable(what string, err error) error { return &UnavailableError{What: what, Err: err} }

func (e *UnavailableError) Error() string        { return e.Err.Error() }
func (e *UnavailableError) Unwrap() error        { return e.Err }
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Cause names what err waits for, for a log line's cause: "nats
// unavailable" for an UnavailableError of "nats", "state unavailable" for
// another ErrUnavailable, "" for an error that is none.
func Cause(err error) string {
	if u, ok := errors.AsType[*UnavailableError](err); ok {
		return fmt.Sprintf("%s unavailable", u.What)
	}
	if errors.Is(err, ErrUnavailable) {
		return "state unavailable"
	}
	return ""
}
