package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"brainbot/cmd/internal/stack"
	"brainbot/state/sqlite"
	"brainbot/state/sqlite/sqlitetest"
)

// A session brainbot cannot save (an admin's sqlite3 shell holds the
// database's write lock past the busy timeout) holds the answer back: the
// message is handed back, unanswered, and once the lock is gone answered
// once, in its conversation. The real CLI counts the session's messages:
// a new conversation's first message is remembered by the next, and a
// message held back in a running conversation is its next, not two.
func TestEndToEndUnsavedSessionHoldsTheAnswer(t *testing.T) {
	s := newStack(t, nil)
	const user = 1101
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLong)
	defer cancel()
	token := stack.Token("narrator")
	// answer sends text and returns the reply its request line with
	// outcome ok came with.
	answer := func(text string, underLock bool) string {
		t.Helper()
		mark, replies := s.Logs().Len(), len(s.ChatCalls("narrator", user))
		resume := s.Model.Pause()
		defer resume()
		s.Telegram.SendText(token, user, user, text)
		if underLock {
			// The CLI's turn began (the attempt is journaled): lock, then
			// let the model answer.
			waitLine(ctx, t, s, mark, func(l stack.Line) bool {
				return l.Msg == "claude: event" && l.Str("subtype") == "init" && l.Int("user") == user
			})
			unlock := sqlitetest.LockWrites(t, filepath.Join(s.DataDir, sqlite.FileName))
			resume()
			// Handed back once saving the session waited out the busy
			// timeout; unlocked then, not after the usage record waits
			// it out too (the request line comes after that).
			waitLine(ctx, t, s, mark, func(l stack.Line) bool {
				return strings.HasPrefix(l.Msg, "state unavailable for now") && l.Int("user") == user
			})
			if n := len(s.ChatCalls("narrator", user)); n != replies {
				t.Errorf("%q: %d replies while its session could not be saved, want none", text, n-replies)
			}
			unlock()
			paused := waitLine(ctx, t, s, mark, func(l stack.Line) bool { return l.Msg == "request" && l.Int("user") == user })
			if paused.Str("outcome") != "paused" {
				t.Errorf("%q: request line of the attempt under the lock %s, want outcome paused", text, paused.Raw)
			}
		}
		resume()
		waitLine(ctx, t, s, mark, func(l stack.Line) bool {
			return l.Msg == "request" && l.Int("user") == user && l.Str("outcome") == "ok"
		})
		calls := s.ChatCalls("narrator", user)[replies:]
		if len(calls) != 1 {
			t.Fatalf("%q: %d replies, want one", text, len(calls))
		}
		return stack.Rendered(calls[0])
	}
	if got := answer("remember the lighthouse", true); got != "You said: remember the lighthouse (message 1)" {
		t.Errorf("a new conversation's first message held back: reply %q", got)
	}
	if got := answer("what did I say?", false); got != "You said: what did I say? (message 2)" {
		t.Errorf("the next message: reply %q, want the conversation's message 2", got)
	}
	if got := answer("and before that?", true); got != "You said: and before that? (message 3)" {
		t.Errorf("a running conversation's message held back: reply %q, want its message 3", got)
	}
}

// waitLine waits for a log line from mark on that matches, and returns
// the first.
func waitLine(ctx context.Context, t *testing.T, s *stack.Stack, mark int, match func(stack.Line) bool) stack.Line {
	t.Helper()
	lines, err := s.Logs().WaitFrom(ctx, mark, func(lines []stack.Line) bool { return slices.ContainsFunc(lines, match) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return lines[slices.IndexFunc(lines, match)]
}
