// Package engine runs a panel: several members answer one question (turn
// 1), each comments on one other member's answer (turn 2), and each member
// whose answer got comments replies to them (turn 3). It knows nothing of
// Telegram or of the Claude CLI: the caller supplies the members (Members),
// the chat (Chat) and the journal (Journal), each a small interface.
//
// A Run is the whole state of one panel run and is saved through the
// Journal after every step, so Engine.Run resumes a run an earlier process
// left at the turn it reached, without doing or sending again what was
// done and sent.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"
)

// Members runs the members' work.
type Members interface {
	// Ask runs one member's turn through the model.
	Ask(ctx context.Context, run *Run, q Question) (Answer, error)
	// Voice speaks one turn of member in its own voice (a panel that
	// speaks).
	Voice(ctx context.Context, run *Run, member string) Voice
}

// Voice is one member's turn spoken: the text the engine keeps of it is
// handed over while the model writes it (Write), so that its speech can
// start before the turn ends, then whole (Finish).
type Voice interface {
	// Write takes the text written so far that the engine keeps whatever
	// the model writes next. It is called from the model's stream and
	// must not block.
	Write(text string)
	// Finish takes the turn's text as the engine keeps it, "" when it
	// keeps none (the turn failed), and returns its voice note and the
	// file's extension (".mp3"). usd is what all the speech made for the
	// turn cost, that of text the engine then dropped included, with an
	// error too.
	Finish(ctx context.Context, text string) (data []byte, ext string, usd float64, err error)
}

// Chat is where the panel happens.
type Chat interface {
	// Send posts the item (its Text, or with Run.Speak its File under the
	// engine's Dir) as the item's member, as a reply to message replyTo
	// (0: none), and returns the message's id.
	Send(ctx context.Context, run *Run, it *Item, replyTo int) (messageID int, err error)
	// Note posts a short note of the panel's own (who sat out).
	Note(ctx context.Context, run *Run, text string) error
}

// Journal keeps the run across restarts.
type Journal interface {
	Save(ctx context.Context, run *Run) error
}

// Question is one member's turn for the model.
type Question struct {
	Member string
	Turn   int
	Prompt string
	// Schema, when set, is the JSON Schema the answer must follow
	// (Answer.Structured).
	Schema string
	// OnText, when set, takes the answer's text so far each time the
	// model writes more of it; it does not block.
	OnText func(text string)
}

// Answer is what the model made of a Question.
type Answer struct {
	Text       string
	Structured json.RawMessage
	CostUSD    float64
}

// ErrInterrupted marks a member's work cut short by shutdown: the item
// stays to do, and the run is resumed after the restart.
var ErrInterrupted = errors.New("panel: interrupted by shutdown")

// The states of an Item.
const (
	Pending = ""        // to do
	Done    = "done"    // its text (and file) are ready
	Failed  = "failed"  // model error, timeout, speech failure: the member sits out later turns
	Skipped = "skipped" // turn 2: no valid target twice; the member sits this turn out
)

// Run is one panel run, as journaled.
type Run struct {
	ID          string `json:"id"`
	Panel       string `json:"panel"`
	Chat        int64  `json:"chat"`
	Thread      int    `json:"thread,omitempty"`
	MessageID   int    `json:"message_id"` // the /panel message
	Question    string `json:"question"`
	Starter     int64  `json:"starter"`
	StarterName string `json:"starter_name,omitempty"`
	// Members speak in this order; Names are how they are shown to each
	// other (brain names), by member.
	Members []string          `json:"members"`
	Names   map[string]string `json:"names,omitempty"`
	Speak   bool              `json:"speak"`
	// MaxChars bounds each turn's text: answer, comment, reply.
	MaxChars   [3]int `json:"max_chars"`
	CommentCap int    `json:"comment_cap"`
	// Seed chooses the comments forwarded when there are more than
	// CommentCap on one answer.
	Seed    uint64    `json:"seed"`
	Started time.Time `json:"started"`
	// Turn is the turn reached (1 to 3).
	Turn  int     `json:"turn"`
	Items []*Item `json:"items"`
	// NoteSent: the closing note (who sat out) is out.
	NoteSent bool      `json:"note_sent,omitempty"`
	Finished time.Time `json:"finished,omitzero"`
	// Resumes counts the restarts the run went through.
	Resumes int `json:"resumes,omitempty"`
}

// Item is one member's part in one turn.
type Item struct {
	Turn   int    `json:"turn"`
	Member string `json:"member"`
	// Target is whose answer a comment is on (turn 2).
	Target string `json:"target,omitempty"`
	// On is the member whose item of the turn before this one replies to:
	// turn 2 the target's answer, turn 3 the first comment forwarded (by
	// its member). "" replies to the question.
	On    string `json:"on,omitempty"`
	State string `json:"state"`
	Text  string `json:"text,omitempty"`
	// File is the item's file, relative to the engine's Dir.
	File  string `json:"file,omitempty"`
	Error string `json:"error,omitempty"`
	// Dropped: a comment over the cap, not forwarded to its target.
	Dropped bool `json:"dropped,omitempty"`
	// Comments are the members whose comments a reply answers (turn 3).
	Comments []string `json:"comments,omitempty"`
	// MessageID is the chat message sent for it (0: not sent).
	MessageID  int     `json:"message_id,omitempty"`
	SendError  string  `json:"send_error,omitempty"`
	Attempts   int     `json:"attempts,omitempty"`
	DurationMS int64   `json:"duration_ms"`
	CostUSD    float64 `json:"cost_usd"`
	OpenAIUSD  float64 `json:"openai_usd,omitempty"`
}

// Engine runs panels.
type Engine struct {
	Members Members
	Chat    Chat
	Journal Journal
	// Dir is the data folder: a run's files go to
	// Dir/panel-output/<chat>/<run id>/.
	Dir string
	Log *zap.Logger
}

// OutputDir holds the runs' files, in the data folder.
const OutputDir = "panel-output"

// Folder is where a run's files go, relative to the data folder.
func Folder(chat int64, runID string) string {
	return filepath.Join(OutputDir, strconv.FormatInt(chat, 10), runID)
}

// Report sums up a finished (or interrupted) run for its log line.
type Report struct {
	Answers, Comments, Replies, Dropped int
	// SatOut lists "member (turn n)" for each member that sat a turn out.
	SatOut             []string
	CostUSD, OpenAIUSD float64
	// Sends counts the messages sent by this call of Run.
	Sends int
}

// runState is one call of Run: the run and who may touch it.
type runState struct {
	e     *Engine
	run   *Run
	log   *zap.Logger
	mu    sync.Mutex // guards run
	sends int
}

// queued is an item waiting to be sent, and when its work is done.
type queued struct {
	it    *Item
	ready <-chan struct{}
}

// Run runs run from the turn it reached to its end, journaling every
// step. It returns ErrInterrupted (or ctx's error) when shutdown cut it
// short: the journal then holds what to resume.
func (e *Engine) Run(ctx context.Context, run *Run) (Report, error) {
	log := e.Log
	if log == nil {
		log = zap.NewNop()
	}
	s := &runState{e: e, run: run, log: log.With(zap.String("panel_run", run.ID))}
	if run.Turn == 0 {
		run.Turn = 1
	}
	queue := make(chan queued, 3*len(run.Members)+1)
	sent := make(chan error, 1)
	go func() { sent <- s.sender(ctx, queue) }()
	var err error
	for turn := run.Turn; turn <= 3 && err == nil; turn++ {
		s.mu.Lock()
		run.Turn = turn
		items := s.plan(turn)
		s.mu.Unlock()
		s.save(ctx)
		var wg sync.WaitGroup
		var interrupted error
		var imu sync.Mutex
		for _, it := range items {
			done := make(chan struct{})
			queue <- queued{it, done}
			if it.State != Pending {
				close(done)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(done)
				if werr := s.work(ctx, it); werr != nil {
					imu.Lock()
					interrupted = werr
					imu.Unlock()
				}
			}()
		}
		wg.Wait()
		err = interrupted
		s.save(ctx)
		s.writeManifest()
	}
	close(queue)
	if serr := <-sent; err == nil {
		err = serr
	}
	if err == nil && ctx.Err() != nil {
		err = ErrInterrupted
	}
	rep := s.report()
	if err != nil {
		return rep, err
	}
	if len(rep.SatOut) > 0 && !run.NoteSent {
		if nerr := e.Chat.Note(ctx, run, "Sat out: "+strings.Join(s.names(rep.SatOut), ", ")+"."); nerr != nil {
			s.log.Warn("panel note not sent", zap.Error(nerr))
		}
		run.NoteSent = true
	}
	run.Finished = time.Now()
	// The manifest first: a run marked finished is not resumed.
	s.writeManifest()
	s.save(ctx)
	return rep, nil
}

// names replaces member ids by their names in "member (turn n)" entries.
func (s *runState) names(list []string) []string {
	out := make([]string, len(list))
	for i, e := range list {
		id, rest, _ := strings.Cut(e, " ")
		out[i] = strings.TrimSpace(s.name(id) + " " + rest)
	}
	return out
}

func (s *runState) name(member string) string {
	if n := s.run.Names[member]; n != "" {
		return n
	}
	return member
}

// save journals the run; a failure is logged: the run goes on.
func (s *runState) save(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.e.Journal.Save(context.WithoutCancel(ctx), s.run); err != nil {
		s.log.Warn("could not journal the panel run", zap.Error(err))
	}
}

// items are the run's items of turn.
func (run *Run) items(turn int) []*Item {
	var out []*Item
	for _, it := range run.Items {
		if it.Turn == turn {
			out = append(out, it)
		}
	}
	return out
}

// item is member's item of turn (nil if it has none).
func (run *Run) item(turn int, member string) *Item {
	for _, it := range run.Items {
		if it.Turn == turn && it.Member == member {
			return it
		}
	}
	return nil
}

// in reports whether member is still in the panel at turn: it answered,
// and nothing of it failed since (a skipped comment does not count).
func (run *Run) in(turn int, member string) bool {
	for t := 1; t < turn; t++ {
		it := run.item(t, member)
		if t == 1 && (it == nil || it.State != Done) {
			return false
		}
		if it != nil && (it.State == Failed || it.SendError != "") {
			return false
		}
	}
	return true
}

// plan makes turn's items, unless a run being resumed has them already.
// Called with s.mu held.
func (s *runState) plan(turn int) []*Item {
	run := s.run
	if items := run.items(turn); len(items) > 0 {
		return items
	}
	switch turn {
	case 1:
		for _, m := range run.Members {
			run.Items = append(run.Items, &Item{Turn: 1, Member: m})
		}
	case 2:
		var active []string
		for _, m := range run.Members {
			if run.in(2, m) {
				active = append(active, m)
			}
		}
		if len(active) < 2 {
			break // nobody to comment on
		}
		for _, m := range active {
			run.Items = append(run.Items, &Item{Turn: 2, Member: m})
		}
	case 3:
		rng := rand.New(rand.NewPCG(run.Seed, 3))
		for _, m := range run.Members {
			if !run.in(3, m) {
				continue
			}
			var comments []*Item
			for _, c := range run.items(2) {
				if c.State == Done && c.Target == m && c.SendError == "" {
					comments = append(comments, c)
				}
			}
			if len(comments) == 0 {
				continue
			}
			if len(comments) > run.CommentCap {
				keep := rng.Perm(len(comments))[:run.CommentCap]
				var kept []*Item
				for i, c := range comments {
					if slices.Contains(keep, i) {
						kept = append(kept, c)
					} else {
						c.Dropped = true
					}
				}
				comments = kept
			}
			it := &Item{Turn: 3, Member: m, On: comments[0].Member}
			for _, c := range comments {
				it.Comments = append(it.Comments, c.Member)
			}
			run.Items = append(run.Items, it)
		}
	}
	return run.items(turn)
}

// work does one item: asks the model (turn 2 with one retry of an invalid
// target), speaks it when the panel speaks, and saves its file. It
// returns an error only when shutdown cut it short.
func (s *runState) work(ctx context.Context, it *Item) error {
	start := time.Now()
	var voice Voice
	if s.run.Speak {
		voice = s.e.Members.Voice(ctx, s.run, it.Member)
	}
	s.mu.Lock()
	q := s.question(it, "")
	it.Attempts++
	s.mu.Unlock()
	if voice != nil && it.Turn != 2 {
		// Turn 2's comment comes whole, in its structured choice, once
		// the choice is in; turns 1 and 3 are spoken as they are written.
		limit := s.run.MaxChars[it.Turn-1]
		q.OnText = func(text string) { voice.Write(keeps(text, limit)) }
	}
	ans, err := s.e.Members.Ask(ctx, s.run, q)
	var text, target string
	if err == nil {
		text, target, err = s.read(it, ans)
		if errors.Is(err, errInvalidTarget) {
			s.log.Info("panel member chose an invalid target; asking once more", zap.String("member", it.Member), zap.Error(err))
			s.mu.Lock()
			q = s.question(it, err.Error())
			it.Attempts++
			it.CostUSD += ans.CostUSD
			s.mu.Unlock()
			ans, err = s.e.Members.Ask(ctx, s.run, q)
			if err == nil {
				text, target, err = s.read(it, ans)
			}
		}
	}
	var file string
	var usd float64
	switch {
	case err == nil:
		file, usd, err = s.saveFile(ctx, it, voice, target, text)
	case voice != nil:
		_, _, usd, _ = voice.Finish(ctx, "") // nothing kept; what was spoken is billed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it.OpenAIUSD += usd
	if interrupted(ctx, err) {
		return ErrInterrupted
	}
	it.CostUSD += ans.CostUSD
	it.DurationMS = time.Since(start).Milliseconds()
	switch {
	case errors.Is(err, errInvalidTarget):
		it.State, it.Error = Skipped, err.Error()
		s.log.Info("panel member sits turn 2 out: no valid target twice", zap.String("member", it.Member), zap.Error(err))
	case err != nil:
		it.State, it.Error = Failed, err.Error()
		s.log.Warn("panel member failed; it sits out the later turns", zap.String("member", it.Member), zap.Int("turn", it.Turn), zap.Error(err))
	default:
		it.State, it.Text, it.Target, it.File = Done, text, target, file
		if it.Turn == 2 {
			it.On = target
		}
	}
	return nil
}

func interrupted(ctx context.Context, err error) bool {
	return err != nil && (errors.Is(err, ErrInterrupted) || ctx.Err() != nil)
}

var errInvalidTarget = errors.New("invalid target")

// comment is turn 2's structured answer.
type comment struct {
	Target  string `json:"target"`
	Comment string `json:"comment"`
}

// read takes the text (and turn 2's target) from an answer.
func (s *runState) read(it *Item, ans Answer) (text, target string, err error) {
	if it.Turn != 2 {
		text = strings.TrimSpace(ans.Text)
		if text == "" {
			return "", "", errors.New("empty answer")
		}
		return clip(text, s.run.MaxChars[it.Turn-1]), "", nil
	}
	var c comment
	if err := json.Unmarshal(ans.Structured, &c); err != nil {
		return "", "", fmt.Errorf("%w: the answer is not {target, comment}: %v", errInvalidTarget, err)
	}
	s.mu.Lock()
	valid := s.targets(it.Member)
	s.mu.Unlock()
	switch {
	case !slices.Contains(valid, c.Target):
		return "", "", fmt.Errorf("%w: %q is not one of %s", errInvalidTarget, c.Target, strings.Join(valid, ", "))
	case strings.TrimSpace(c.Comment) == "":
		return "", "", fmt.Errorf("%w: empty comment", errInvalidTarget)
	}
	return clip(strings.TrimSpace(c.Comment), s.run.MaxChars[1]), c.Target, nil
}

// targets are the members member may comment on: the others that
// answered. Called with s.mu held.
func (s *runState) targets(member string) []string {
	var out []string
	for _, it := range s.run.items(1) {
		if it.Member != member && it.State == Done && it.SendError == "" {
			out = append(out, it.Member)
		}
	}
	return out
}

// clip shortens text to max characters, at a word if it can.
func clip(text string, max int) string {
	if max <= 0 || utf8.RuneCountInString(text) <= max {
		return text
	}
	return clipped(text, max) + "…"
}

// clipped is what clip keeps of a text longer than max characters: it
// depends on its first max-1 characters only.
func clipped(text string, max int) string {
	cut := string([]rune(text)[:max-1])
	if i := strings.LastIndexAny(cut, " \n"); i > len(cut)/2 {
		cut = cut[:i]
	}
	return strings.TrimSpace(cut)
}

// keeps is what read and clip surely keep of a turn's text so far,
// whatever the model writes next: a prefix of the text they will make of
// the whole. Under limit characters, the words up to the last space (clip
// may cut a longer text there); from limit on, what clip keeps of it.
func keeps(text string, limit int) string {
	text = strings.TrimLeftFunc(text, unicode.IsSpace)
	if limit > 0 && utf8.RuneCountInString(text) >= limit {
		return clipped(text, limit)
	}
	end := max(strings.LastIndexAny(text, " \n"), 0)
	return strings.TrimRightFunc(text[:end], unicode.IsSpace)
}

// saveFile writes the item's file: its voice note (voice), or its text.
func (s *runState) saveFile(ctx context.Context, it *Item, voice Voice, target, text string) (string, float64, error) {
	var data []byte
	ext := ".txt"
	var usd float64
	if voice != nil {
		var err error
		data, ext, usd, err = voice.Finish(ctx, text)
		if err != nil {
			return "", usd, fmt.Errorf("speech: %w", err)
		}
	} else {
		data = []byte(text + "\n")
	}
	name := it.Member
	if target != "" {
		name += "-to-" + target
	}
	rel := filepath.Join(Folder(s.run.Chat, s.run.ID), fmt.Sprintf("turn-%d", it.Turn), name+ext)
	if err := writeFile(filepath.Join(s.e.Dir, rel), data); err != nil {
		return "", usd, err
	}
	return rel, usd, nil
}

// writeFile writes data atomically (a crash leaves no half file).
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o640); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// sender sends the items in the order they are queued, each once its work
// is done: the chat shows the turns in member order whatever order the
// work finishes in.
func (s *runState) sender(ctx context.Context, queue <-chan queued) error {
	var err error
	for q := range queue {
		it := q.it
		select {
		case <-q.ready:
		case <-ctx.Done():
		}
		if err != nil || ctx.Err() != nil {
			continue // drain: the run is resumed after the restart
		}
		s.mu.Lock()
		due := it.State == Done && it.MessageID == 0 && it.SendError == ""
		replyTo := s.replyTo(it)
		s.mu.Unlock()
		if !due {
			continue
		}
		id, serr := s.e.Chat.Send(ctx, s.run, it, replyTo)
		if interrupted(ctx, serr) {
			err = ErrInterrupted
			continue
		}
		s.mu.Lock()
		if serr != nil {
			it.SendError = serr.Error()
			s.log.Warn("panel message not sent; the member sits out the later turns", zap.String("member", it.Member),
				zap.Int("turn", it.Turn), zap.Error(serr))
		} else {
			it.MessageID = id
			s.sends++
		}
		s.mu.Unlock()
		s.save(ctx)
		if serr == nil {
			s.log.Info("panel message sent", zap.String("member", it.Member), zap.Int("turn", it.Turn), zap.Int("message_id", id))
		}
	}
	return err
}

// replyTo is the message it answers. Called with s.mu held.
func (s *runState) replyTo(it *Item) int {
	if it.Turn == 1 || it.On == "" {
		return s.run.MessageID
	}
	if on := s.run.item(it.Turn-1, it.On); on != nil && on.MessageID != 0 {
		return on.MessageID
	}
	return s.run.MessageID
}

// report sums the run up.
func (s *runState) report() Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := Report{Sends: s.sends}
	for _, it := range s.run.Items {
		r.CostUSD += it.CostUSD
		r.OpenAIUSD += it.OpenAIUSD
		switch {
		case it.State == Done && it.SendError == "":
			switch it.Turn {
			case 1:
				r.Answers++
			case 2:
				r.Comments++
				if it.Dropped {
					r.Dropped++
				}
			case 3:
				r.Replies++
			}
		case it.State != Pending:
			r.SatOut = append(r.SatOut, fmt.Sprintf("%s (turn %d)", it.Member, it.Turn))
		}
	}
	return r
}

// manifest is run.json: the run and every file it made.
type manifest struct {
	*Run
	Files []string `json:"files"`
}

// writeManifest writes run.json as the run stands; a failure is logged.
func (s *runState) writeManifest() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.e.writeManifest(s.run); err != nil {
		s.log.Warn("panel manifest not written", zap.Error(err))
	}
}

func (e *Engine) writeManifest(run *Run) error {
	m := manifest{Run: run, Files: []string{}}
	for _, it := range run.Items {
		if it.File != "" {
			m.Files = append(m.Files, it.File)
		}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(e.Dir, Folder(run.Chat, run.ID), "run.json"), append(data, '\n'))
}

// NewSeed is a seed for a new run.
func NewSeed(runID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(runID))
	return h.Sum64() ^ rand.Uint64()
}
