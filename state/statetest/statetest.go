// Package statetest is the conformance suite of brainbot's state
// backends (package state): every behaviour the contract promises, run
// the same way against each backend, so that no backend (and no fake kept
// for unit tests) drifts from the others. Each backend's package runs it
// in its own conformance_test.go with a Harness that opens it on new,
// empty storage.
//
// The suite asserts only what every backend promises. Where a backend
// does more (SQLite's Prune counts what it deleted; JetStream's buckets
// expire records by themselves), a comment says so and the suite asserts
// the common part.
package statetest

import (
	"context"
	"testing"
	"time"

	"brainbot/state"
)

// Harness opens the backend under test for one subtest, on new and empty
// storage, and closes it when t ends. dataDir is brainbot's data folder
// (BRAINBOT_DATA), new and empty: the backend keeps its files there, if
// it keeps any on this machine. sessionFile is where the Claude CLI
// keeps a session's transcript on this machine (the suite writes the
// files there; a backend that stores transcripts reads them there, as
// claude.Driver.SessionFile tells it in production).
//
// restart stops the backend opened last, as `brainbot run` stops at a
// SIGTERM (the suite has ended its Consume and its Lease, and finished or
// abandoned every delivery it was handed), and opens the same storage
// again: what a restarted process finds, or in a cluster the next
// instance (under another name). The backend it returns replaces the one
// before, which the suite uses no more.
type Harness func(t *testing.T, dataDir string, sessionFile func(bot, session string) string) (first state.Backend, restart func() state.Backend)

// Run runs every behaviour of the contract against the backend h opens,
// one subtest each, one after the other.
func Run(t *testing.T, h Harness) {
	groups := []struct {
		name  string
		tests []behaviour
	}{
		{"Sessions", sessionTests},
		{"Voices", voiceTests},
		{"Counters", counterTests},
		{"Spending", spendingTests},
		{"Buttons", buttonTests},
		{"Panels", panelTests},
		{"Holders", holderTests},
		{"Log", logTests},
		{"Leases", leaseTests},
		{"Transcripts", transcriptTests},
		{"Maintenance", maintenanceTests},
		{"AtOnce", raceTests},
		{"Conversations", forgetTests},
		{"Memories", memoryTests},
		{"Reminders", reminderTests},
		{"Contacts", contactTests},
		{"Scheduled", scheduledTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, b := range g.tests {
				t.Run(b.name, func(t *testing.T) { b.run(t, open(t, h)) })
			}
		})
	}
}

// behaviour is one subtest of the suite.
type behaviour struct {
	name string
	run  func(t *testing.T, s *subject)
}

// subject is the backend a subtest runs against, where its storage
// keeps the transcripts, and its data folder.
type subject struct {
	state.Backend
	restart func() state.Backend
	dir     string
	data    string
}

func open(t *testing.T, h Harness) *subject {
	s := &subject{dir: t.TempDir(), data: t.TempDir()}
	s.Backend, s.restart = h(t, s.data, s.sessionFile)
	return s
}

// sessionFile is where the CLI keeps a transcript in this subtest.
func (s *subject) sessionFile(bot, session string) string {
	return s.dir + "/" + bot + "/" + session + ".jsonl"
}

// restarted stops the backend and opens its storage again.
func (s *subject) restarted() { s.Backend = s.restart() }

// hangGuard bounds a wait only a hang reaches: what the suite waits for
// comes much sooner even on a loaded machine, and each wait ends as soon
// as it does.
const hangGuard = time.Minute

// ctx is a context for one call of the backend, bounded by hangGuard.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return c
}

// base is the time the subtests' records are made at: now, to the
// millisecond (what every backend keeps of a time), as a usage report's
// Since is compared with when a record was stored too.
func base() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// must fails the test at once on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
