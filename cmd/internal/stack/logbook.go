package stack

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
)

// Line is one JSON log line of brainbot's.
type Line struct {
	Raw    string
	Level  string
	Msg    string
	Fields map[string]any
}

// Str returns a string field ("" if absent).
func (l Line) Str(key string) string {
	s, _ := l.Fields[key].(string)
	return s
}

// Int returns a numeric field (0 if absent).
func (l Line) Int(key string) int64 {
	f, _ := l.Fields[key].(float64)
	return int64(f)
}

// Float returns a numeric field (0 if absent).
func (l Line) Float(key string) float64 {
	f, _ := l.Fields[key].(float64)
	return f
}

// LogBook collects brainbot's log lines and lets callers wait for a
// condition on them.
type LogBook struct {
	mu      sync.Mutex
	lines   []Line
	changed chan struct{} // closed and replaced on every new line
}

func newLogBook() *LogBook {
	return &LogBook{changed: make(chan struct{})}
}

func (b *LogBook) add(raw string) {
	l := Line{Raw: raw, Fields: map[string]any{}}
	if json.Unmarshal([]byte(raw), &l.Fields) == nil {
		l.Level, _ = l.Fields["level"].(string)
		l.Msg, _ = l.Fields["msg"].(string)
	}
	b.mu.Lock()
	b.lines = append(b.lines, l)
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// Len is the number of lines so far.
func (b *LogBook) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.lines)
}

// Lines returns a copy of all lines so far.
func (b *LogBook) Lines() []Line {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Line(nil), b.lines...)
}

// Text is every line, as written.
func (b *LogBook) Text() string {
	var sb strings.Builder
	for _, l := range b.Lines() {
		sb.WriteString(l.Raw)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// Tail returns the last n lines as text, for failure messages.
func (b *LogBook) Tail(n int) string {
	lines := b.Lines()
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var sb strings.Builder
	for _, l := range lines {
		sb.WriteString(l.Raw)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// Find returns the lines (from index from on) that match.
func (b *LogBook) Find(from int, match func(Line) bool) []Line {
	var out []Line
	lines := b.Lines()
	if from > len(lines) {
		from = len(lines)
	}
	for _, l := range lines[from:] {
		if match(l) {
			out = append(out, l)
		}
	}
	return out
}

// WaitFrom waits until cond holds for the lines from index from on, ctx
// ends, or exited is closed (brainbot is gone: nothing more will come).
func (b *LogBook) WaitFrom(ctx context.Context, from int, cond func([]Line) bool, exited <-chan struct{}) ([]Line, error) {
	for {
		b.mu.Lock()
		lines := b.lines[min(from, len(b.lines)):]
		changed := b.changed
		ok := cond(lines)
		lines = append([]Line(nil), lines...)
		b.mu.Unlock()
		if ok {
			return lines, nil
		}
		select {
		case <-changed:
		case <-exited:
			// One more look: the last lines may have arrived with the exit.
			b.mu.Lock()
			lines := append([]Line(nil), b.lines[min(from, len(b.lines)):]...)
			b.mu.Unlock()
			if cond(lines) {
				return lines, nil
			}
			return nil, errExited
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

var errExited = errors.New("brainbot exited")
