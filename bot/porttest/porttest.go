// Package porttest is the ordered log the fakes at a room's ports write
// to in its unit tests (bot/conversation, bot/panel/host): each fake adds
// what it was asked as "port: what", so a test reads exactly what reached
// each port, and in which order across them.
package porttest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Log is safe for concurrent use; the zero Log is empty.
type Log struct {
	mu   sync.Mutex
	list []string
}

// Add logs one event, formatted as fmt.Sprintf does.
func (l *Log) Add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, fmt.Sprintf(format, args...))
}

// All is every event so far, in order.
func (l *Log) All() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}

// Of lists the events of one port, in order, without their "port: ".
func (l *Log) Of(port string) []string {
	var out []string
	for _, ev := range l.All() {
		if rest, ok := strings.CutPrefix(ev, port+": "); ok {
			out = append(out, rest)
		}
	}
	return out
}

// Index is where the first event equal to ev is (-1: none).
func (l *Log) Index(ev string) int { return slices.Index(l.All(), ev) }
