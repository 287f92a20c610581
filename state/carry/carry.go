// Package carry copies the conversations one backend of brainbot's state
// keeps into another: from a cluster back into one instance's SQLite
// file, or from that file into a cluster. A conversation is carried with
// its current session (when it began and was last used), its transcript
// (so the CLI resumes it with its whole history), its user's /voice
// choice, the notes the persona keeps about its user, their pending
// reminders and what their check-ins go by (time zone, no, last message,
// check-ins sent). brainbot carry runs it while the instances are
// stopped.
package carry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"brainbot/state"
)

// From is the backend the conversations are carried from. Its Restore
// brings a session's transcript to this machine's CLI folder (Config.Local).
type From interface {
	state.Conversations
	state.Transcripts
	state.Voices
	state.Memories
	state.Reminders
	state.Contacts
}

// To is the backend they are carried into.
type To interface {
	state.Sessions
	state.Voices
	state.Memories
	state.Reminders
	state.Contacts
}

// Config says what to carry where.
type Config struct {
	From From
	To   To
	// ToTranscripts is To's transcript store on files at path. The carry
	// restores the copy To keeps (if any) into a scratch folder, puts this
	// machine's over it and saves that: the copy follows the one kept, as
	// the next turn's would.
	ToTranscripts func(path func(bot, session string) string) state.Transcripts
	// Local is where this machine's CLI keeps a session's transcript
	// (claude.SessionFileIn).
	Local func(bot, session string) string
	// Scratch is an empty folder the carry may write to.
	Scratch string
}

// Outcome is what became of one conversation.
type Outcome string

const (
	Carried Outcome = "carried"
	// Already: To has this session, used as late: carried before.
	Already Outcome = "already there"
	// Newer: To has a session of the conversation used later than this
	// one; it stays.
	Newer  Outcome = "kept, newer there"
	Failed Outcome = "failed"
)

// Result is one conversation's outcome; Err says why it failed.
type Result struct {
	state.Conversation
	Outcome Outcome
	Err     error
}

// Carry carries every conversation From keeps into To and says what
// became of each, the most recently used first. err is an error of the
// listing alone: each conversation's own is in its Result. Carrying again
// changes nothing more (Already).
func Carry(ctx context.Context, cfg Config) ([]Result, error) {
	convs, err := cfg.From.Conversations(ctx, state.ConversationFilter{})
	if err != nil {
		return nil, fmt.Errorf("list the conversations to carry: %w", err)
	}
	scratch := func(bot, session string) string { return filepath.Join(cfg.Scratch, bot, session+".jsonl") }
	into := cfg.ToTranscripts(scratch)
	out := make([]Result, 0, len(convs))
	for _, c := range convs {
		outcome, err := cfg.carry(ctx, c, into, scratch)
		if err != nil {
			outcome = Failed
		}
		out = append(out, Result{Conversation: c, Outcome: outcome, Err: err})
	}
	return out, nil
}

func (cfg Config) carry(ctx context.Context, c state.Conversation, into state.Transcripts, scratch func(bot, session string) string) (Outcome, error) {
	k, s := c.Key, c.Session
	have, ok, err := cfg.To.Session(ctx, k)
	if err != nil {
		return Failed, fmt.Errorf("read the session kept there: %w", err)
	}
	// SQLite keeps milliseconds.
	if ok && !have.LastUsed.Before(s.LastUsed.Truncate(time.Millisecond)) {
		if have.ID != s.ID {
			return Newer, nil
		}
		if _, err := os.Stat(cfg.Local(k.Bot, s.ID)); err == nil {
			return Already, nil
		}
		// Kept before without its transcript: try that again.
	}
	lost := cfg.transcript(ctx, k.Bot, s.ID, into, scratch)
	if err := cfg.voice(ctx, k.Bot, k.User()); err != nil {
		return Failed, err
	}
	if err := cfg.notes(ctx, k.Bot, k.User()); err != nil {
		return Failed, err
	}
	if err := cfg.reminders(ctx, k.Bot, k.User()); err != nil {
		return Failed, err
	}
	if err := cfg.contact(ctx, k.Bot, k.User()); err != nil {
		return Failed, err
	}
	// The session is kept even without its transcript: the CLI then
	// finds no such session and the user's next message starts a new one
	// with the brain's messages.expired, not silently. UseSession keeps
	// when a session began from its first use: first then, then when it
	// was last used.
	for _, at := range []time.Time{s.Created, s.LastUsed} {
		if err := cfg.To.UseSession(ctx, k, s.ID, at); err != nil {
			return Failed, fmt.Errorf("keep the session: %w", err)
		}
	}
	if lost != nil {
		return Failed, lost
	}
	return Carried, nil
}

// transcript carries the session's transcript: From's latest copy to this
// machine, then stored in To over the copy To keeps.
func (cfg Config) transcript(ctx context.Context, bot, session string, into state.Transcripts, scratch func(bot, session string) string) error {
	if err := cfg.From.Restore(ctx, bot, session, func() {}); err != nil {
		return fmt.Errorf("fetch the transcript: %w", err)
	}
	data, err := os.ReadFile(cfg.Local(bot, session))
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("no transcript of the session is kept: its next message starts a new session, with the brain's messages.expired")
	}
	if err != nil {
		return fmt.Errorf("read the transcript: %w", err)
	}
	if err := into.Restore(ctx, bot, session, func() {}); err != nil {
		return fmt.Errorf("fetch the transcript kept there: %w", err)
	}
	path := scratch(bot, session)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	if err := into.Save(ctx, bot, session); err != nil {
		return fmt.Errorf("store the transcript: %w", err)
	}
	return nil
}

// voice carries user's /voice choice with bot, if they made one. The
// contract lists no choices: those of users without a conversation stay.
func (cfg Config) voice(ctx context.Context, bot string, user int64) error {
	if user == 0 {
		return nil // a group's conversation
	}
	on, set, err := cfg.From.Voice(ctx, bot, user)
	if err != nil {
		return fmt.Errorf("read the /voice choice: %w", err)
	}
	if !set {
		return nil
	}
	if err := cfg.To.SetVoice(ctx, bot, user, on); err != nil {
		return fmt.Errorf("keep the /voice choice: %w", err)
	}
	return nil
}

// notes carries the notes kept about user with bot that To lacks (by
// their text: carrying again doubles none), in order. Like /voice
// choices, the contract lists the notes of a user it is asked about:
// those of users without a conversation stay.
func (cfg Config) notes(ctx context.Context, bot string, user int64) error {
	if user == 0 {
		return nil // a group's conversation
	}
	from, err := cfg.From.Notes(ctx, bot, user)
	if err != nil {
		return fmt.Errorf("read the notes: %w", err)
	}
	if len(from) == 0 {
		return nil
	}
	there, err := cfg.To.Notes(ctx, bot, user)
	if err != nil {
		return fmt.Errorf("read the notes kept there: %w", err)
	}
	for _, n := range from {
		if slices.ContainsFunc(there, func(t state.Note) bool { return t.Text == n.Text }) {
			continue
		}
		// Unbounded: the brain's bound held where they were kept.
		if _, err := cfg.To.AddNote(ctx, bot, user, n.Text, 0, n.Created); err != nil {
			return fmt.Errorf("keep the notes: %w", err)
		}
	}
	return nil
}

// reminders carries user's pending reminders with bot (in any chat) that
// To lacks (the same chat, words and time: carrying again doubles none).
// They get To's ids. Like the notes, those of users without a
// conversation stay.
func (cfg Config) reminders(ctx context.Context, bot string, user int64) error {
	if user == 0 {
		return nil // a group's conversation
	}
	from, err := cfg.From.Reminders(ctx, bot, user)
	if err != nil {
		return fmt.Errorf("read the reminders: %w", err)
	}
	if len(from) == 0 {
		return nil
	}
	there, err := cfg.To.Reminders(ctx, bot, user)
	if err != nil {
		return fmt.Errorf("read the reminders kept there: %w", err)
	}
	for _, r := range from {
		if slices.ContainsFunc(there, func(t state.Reminder) bool { return t.Key == r.Key && t.Text == r.Text && t.Due.Equal(r.Due) }) {
			continue
		}
		// Unbounded: the brain's bound held where they were kept.
		if _, err := cfg.To.AddReminder(ctx, r, 0); err != nil {
			return fmt.Errorf("keep the reminders: %w", err)
		}
	}
	return nil
}

// contact carries what user's check-ins with bot go by: their last
// private message (To keeps the later), their time zone and no (From's),
// the check-ins sent that To lacks, and a block (unless they wrote to To
// since).
func (cfg Config) contact(ctx context.Context, bot string, user int64) error {
	if user == 0 {
		return nil // a group's conversation
	}
	c, _, err := cfg.From.Contact(ctx, bot, user)
	if err != nil {
		return fmt.Errorf("read the contact: %w", err)
	}
	there, _, err := cfg.To.Contact(ctx, bot, user)
	if err != nil {
		return fmt.Errorf("read the contact kept there: %w", err)
	}
	var steps []func() error
	if !c.Wrote.IsZero() {
		steps = append(steps, func() error { return cfg.To.Wrote(ctx, bot, user, c.Wrote) })
	}
	if c.Zone != "" {
		steps = append(steps, func() error { return cfg.To.SetTimeZone(ctx, bot, user, c.Zone) })
	}
	if c.Declined {
		steps = append(steps, func() error { return cfg.To.DeclineCheckIns(ctx, bot, user, true) })
	}
	for _, at := range c.CheckIns {
		if !slices.ContainsFunc(there.CheckIns, at.Equal) {
			steps = append(steps, func() error { return cfg.To.CheckedIn(ctx, bot, user, at) })
		}
	}
	if c.Blocked && !there.Wrote.After(c.Wrote) {
		steps = append(steps, func() error { return cfg.To.EndSchedule(ctx, bot, user) })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("keep the contact: %w", err)
		}
	}
	return nil
}
