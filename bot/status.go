package bot

// What each bot does now, for an admin's status page (cmd/brainbot's
// /status and `brainbot status`).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"brainbot/bot/brain"
	"brainbot/bot/intake"
	"brainbot/state"
)

// A bot's states: it runs its brain file as it is; it runs an older
// version of it because the file now has problems; it waits for the token
// its brain names (not set, or its file not written yet: a brain the
// admin has not configured, such as the package's examples); Telegram
// rejected its token; or it does not run for another reason.
const (
	StateRunning    = "running"
	StateOlder      = "running an older version"
	StateNoToken    = "waiting for its token"
	StateRejected   = "not running: token rejected"
	StateNotStarted = "not started"
)

// How a running bot gets its updates from Telegram.
const (
	TelegramPolling  = "polling"
	TelegramWebhook  = "webhook"
	TelegramStandby  = "standby" // another instance polls it (a cluster)
	TelegramRejected = "token rejected"
	// TelegramConnecting: Telegram has not answered it yet, or not since
	// a network error.
	TelegramConnecting = "connecting"
)

// BotStatus is what one bot does now.
type BotStatus struct {
	ID string `json:"name"`
	// File is the brain file it runs (or, not started, the one that has
	// problems).
	File  string `json:"file,omitempty"`
	State string `json:"state"`
	// Problem is why it does not run, or what keeps the newer version of
	// its file from running: each problem as file:line: field: message.
	Problem string `json:"problem,omitempty"`
	// Telegram is how its updates come (Telegram*; "" when not started).
	Telegram string `json:"telegram,omitempty"`
	// LastAnswer is when Telegram last answered it (connect or poll).
	LastAnswer time.Time `json:"last_telegram_answer,omitzero"`
	// LastUpdate, the messages waiting and those answered now.
	intake.Backlog
	// Today is what it did since the UTC day began; Caps its brain's
	// limits on a day (zero: none).
	Today BotDay       `json:"today"`
	Caps  brain.Limits `json:"caps"`
	// OK: it runs its brain file as it is, and Telegram takes its token.
	OK bool `json:"ok"`
}

// Failing: the bot does not run as its brain file says, for a reason the
// admin must look at. A bot waiting for a token it was never given is not
// failing: a brain can be installed before its bot is configured.
func (s BotStatus) Failing() bool { return !s.OK && s.State != StateNoToken }

// BotDay is what a bot did today (UTC): the requests answered and what
// they cost, Claude's and OpenAI's together.
type BotDay struct {
	Requests int64   `json:"requests"`
	USD      float64 `json:"usd"`
}

// Status says what each bot of the brains folder does now, by name: the
// running ones, those not started and the files with problems. Today's
// requests and costs come from the state's usage records; when they
// cannot be read, usageErr says why and the bots' Today is zero.
func (m *Manager) Status(ctx context.Context) (bots []BotStatus, usageErr error) {
	// The day the daily counters and spending caps count (UTC).
	today := state.NextReset(m.cfg.Now()).AddDate(0, 0, -1)
	lines, usageErr := m.cfg.State.UsageReport(ctx, state.UsageFilter{Since: today})
	if usageErr != nil {
		usageErr = fmt.Errorf("today's usage: %w", usageErr)
	}
	spent := map[string]BotDay{}
	for _, l := range lines {
		d := spent[l.Bot]
		d.Requests += l.Requests
		d.USD += l.ClaudeUSD + l.OpenAIUSD
		spent[l.Bot] = d
	}

	bots = m.botStates(spent)
	for i := range bots { // outside m.mu: the intake calls the Manager under its own lock
		bots[i].Backlog = m.intake.Backlog(bots[i].ID)
	}
	return bots, usageErr
}

// botStates is Status but for the backlogs.
func (m *Manager) botStates(spent map[string]BotDay) (bots []BotStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	problems := map[string][]string{} // bot → its files' problems
	files := map[string]string{}
	for file, err := range m.problems {
		id := brain.IDOf(file)
		problems[id] = append(problems[id], err.Error())
		files[id] = file
	}
	ids := slices.Sorted(maps.Keys(m.brains))
	for id := range problems {
		if m.brains[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		s := BotStatus{ID: id, File: files[id], Today: spent[id]}
		if b := m.brains[id]; b != nil {
			s.File, s.Caps = b.Path, b.Limits
		}
		slices.Sort(problems[id])
		why := problems[id]
		if err := m.notStarted[id]; err != nil {
			why = append([]string{err.Error()}, why...)
		}
		s.Problem = strings.Join(why, "\n")
		m.describe(&s, len(problems[id]) > 0)
		bots = append(bots, s)
	}
	return bots
}

// describe fills in s's state and Telegram's side; broken: its file has
// problems now. The caller holds m.mu.
func (m *Manager) describe(s *BotStatus, broken bool) {
	r := m.bots[s.ID]
	if r == nil {
		s.State = StateNotStarted
		if !broken && errors.Is(m.notStarted[s.ID], brain.ErrNoToken) {
			s.State = StateNoToken
		}
		if s.Problem == "" {
			s.Problem = "starting, or stopping"
		}
		return
	}
	s.State = StateRunning
	if broken {
		s.State = StateOlder
	}
	if last := r.lastPoll.Load(); last != 0 {
		s.LastAnswer = time.Unix(0, last)
	}
	client, _ := r.current()
	switch {
	case r.rejected.Load():
		s.State, s.Telegram = StateRejected, TelegramRejected
	case r.polling.Load():
		s.Telegram = TelegramPolling
	case client == nil:
		s.Telegram = TelegramConnecting
	case m.cfg.WebhookURL != "":
		s.Telegram = TelegramWebhook
	default:
		s.Telegram = TelegramStandby
	}
	s.OK = s.State == StateRunning && s.Telegram != TelegramRejected
}

// brainProblems keeps what the brains folder's watcher says of the files
// with problems, and counts them for the metrics.
func (m *Manager) brainProblems(files map[string]error) {
	m.cfg.Metrics.BrainFilesInvalid.Set(float64(len(files)))
	m.mu.Lock()
	m.problems = files
	m.mu.Unlock()
}
