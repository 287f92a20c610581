package brain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem in a brain file, located so that an editor can jump
// to it.
type Error struct {
	File  string // path of the brain file
	Line  int    // 1-based; problems of the whole file point at line 1
	Field string // dotted path such as "tts.speed" or "access.allowed_users[1]"; empty for the whole file
	Msg   string
}

// Error formats the problem as file:line: field: message, the form
// `brainbot check` prints.
func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
}

// Errors lists every problem found, so an author can fix a file in one go.
// Parse and LoadDir return it as their error; get it back with errors.As.
type Errors []*Error

// Error lists the problems one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find a single *Error.
func (es Errors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}

// err returns es as an error, or nil when there is no problem: a nil Errors
// in an error interface would not compare equal to nil.
func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	slices.SortStableFunc(es, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
	return es
}
