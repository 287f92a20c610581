package brain

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// DefaultDebounce is how long a Watcher waits after the last event on a
// file before re-reading it: one editor save is a burst of events.
const DefaultDebounce = 150 * time.Millisecond

// Change is one bot added, edited or removed in the brains folder.
type Change struct {
	ID string
	// Brain is the bot's new valid configuration, or nil when its file was
	// removed or renamed away: the bot should stop.
	Brain *Brain
}

// Watcher follows a brains folder so that edits take effect without a
// restart. It watches the folder, not the files: editors save by writing a
// temporary file and renaming it over the old one, which a watch on the
// file itself would lose.
type Watcher struct {
	Dir string
	Log *zap.Logger // nil: no logging
	// Debounce is the quiet time per file before it is re-read
	// (DefaultDebounce when zero).
	Debounce time.Duration
	// Held reports whether brain id has its token's bot (LoadDirHeld): of
	// two files with one token at the start, it keeps it, and its bot is
	// reported first. Later, a bot running keeps its token. nil: none.
	Held func(id string) bool
	// Loaded, when set, is called once the brains already there have been
	// reported, before the first edit.
	Loaded func()
	// Problems, when set, is told every brain file with problems and what
	// they are (file path → the error logged, each problem as
	// file:line: field: message): once the brains already there are
	// reported, then whenever they change. The map is the callee's.
	Problems func(map[string]error)
}

// Run reports the folder's brains to onChange until ctx ends, then returns
// nil. First comes a Change for every valid brain already there (watching
// starts before that scan, so no edit falls in between), then one per
// effective edit: a valid edit or a new valid file gives the new Brain, a
// removed file a nil Brain. An invalid edit gives no Change, so the last
// good version stays; it is logged at Error level with every problem as
// file:line: field: message. onChange runs on Run's goroutine, one call at
// a time, in order; a slow onChange delays later changes.
//
// Run returns an error only when the folder cannot be watched or read.
func (w *Watcher) Run(ctx context.Context, onChange func(Change)) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch brains folder: %w", err)
	}
	defer fw.Close()
	if err := fw.Add(w.Dir); err != nil {
		return fmt.Errorf("watch brains folder: %w", err)
	}

	s := &watchState{dir: w.Dir, log: w.Log, known: make(map[string]*Brain), waiting: make(map[string]bool), invalid: make(map[string]error)}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	brains, err := LoadDirHeld(w.Dir, w.Held)
	var problems Errors
	if err != nil && !errors.As(err, &problems) {
		return err
	}
	for path, errs := range groupByFile(problems) {
		s.logInvalid(path, errs)
		s.waiting[path] = true // LoadDir does not say which were refused for a token
	}
	for _, b := range HeldFirst(brains, w.Held) {
		s.known[b.ID] = b
		s.logChange(Change{ID: b.ID, Brain: b})
		onChange(Change{ID: b.ID, Brain: b})
	}
	if w.Loaded != nil {
		w.Loaded()
	}
	reported := w.reportProblems(nil, s.invalid)

	debounce := w.Debounce
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	due := make(map[string]time.Time) // file path → when to re-read it
	timer := time.NewTimer(time.Hour)
	timer.Stop() // armed by the first event
	schedule := func(path string) {
		due[path] = time.Now().Add(debounce)
		timer.Reset(time.Until(earliest(due)))
	}
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return errors.New("watch brains folder: event stream closed")
			}
			if ev.Op == fsnotify.Chmod || !isBrainFileName(filepath.Base(ev.Name)) {
				continue
			}
			schedule(ev.Name)
		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("watch brains folder: error stream closed")
			}
			s.log.Warn("watching brains folder", zap.String("dir", w.Dir), zap.Error(err))
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// Events were lost: look at every file and every bot again.
				for _, path := range s.allPaths() {
					schedule(path)
				}
			}
		case now := <-timer.C:
			var ready []string
			for path, t := range due {
				if !t.After(now) {
					ready = append(ready, path)
				}
			}
			slices.Sort(ready) // same order for the same burst of edits
			for _, path := range ready {
				delete(due, path)
				if c, changed := s.refresh(path); changed {
					// Logged once applied: "brain loaded" means in effect.
					onChange(c)
					s.logChange(c)
					// The bot may have let go of a token another file wants.
					for p := range s.waiting {
						schedule(p)
					}
				}
			}
			if len(due) > 0 {
				timer.Reset(time.Until(earliest(due)))
			}
			reported = w.reportProblems(reported, s.invalid)
		}
	}
}

// reportProblems tells Problems about now unless it is what was reported
// before (nil: nothing yet), and returns what was reported.
func (w *Watcher) reportProblems(before, now map[string]error) map[string]error {
	same := before != nil && maps.EqualFunc(before, now, func(a, b error) bool { return a.Error() == b.Error() })
	if same || w.Problems == nil {
		return before
	}
	reported := maps.Clone(now)
	w.Problems(maps.Clone(reported))
	return reported
}

// watchState is what Run knows: the last good brain of every bot.
type watchState struct {
	dir   string
	log   *zap.Logger
	known map[string]*Brain
	// waiting holds the files refused because another bot has their
	// token: they are read again after every change.
	waiting map[string]bool
	// invalid holds the files with problems, as last read, and them.
	invalid map[string]error
}

// refresh re-reads the bot whose file is at path (either of id.yaml and
// id.yml) and reports the Change, if any.
func (s *watchState) refresh(path string) (Change, bool) {
	delete(s.waiting, path)
	id := fileID(filepath.Base(path))
	var files []string
	for _, name := range []string{id + ".yaml", id + ".yml"} {
		p := filepath.Join(s.dir, name)
		delete(s.invalid, p) // read again below: logInvalid puts it back
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() {
			files = append(files, p)
		}
	}
	switch len(files) {
	case 0:
		if s.known[id] == nil {
			return Change{}, false
		}
		delete(s.known, id)
		return Change{ID: id}, true
	case 2:
		// Keep the file the running bot came from; blame the other one.
		keep, extra := files[0], files[1]
		if old := s.known[id]; old != nil && old.Path == extra {
			keep, extra = extra, keep
		}
		s.logInvalid(extra, Errors{duplicateID(extra, id, keep)})
		return Change{}, false
	}

	b, err := Parse(files[0])
	if errors.Is(err, fs.ErrNotExist) {
		return Change{}, false // removed since; its own event follows
	}
	if err == nil {
		var others []*Brain
		for otherID, o := range s.known {
			if otherID != id {
				others = append(others, o)
			}
		}
		if conflict := conflictWith(b, others); conflict != nil {
			s.waiting[files[0]] = true
			err = Errors{conflict}
		}
	}
	if err != nil {
		s.logInvalid(files[0], err)
		return Change{}, false
	}
	s.known[id] = b
	return Change{ID: id, Brain: b}, true
}

// allPaths lists every brain file in the folder and the file of every
// known bot, to re-read after lost events.
func (s *watchState) allPaths() []string {
	var paths []string
	entries, _ := os.ReadDir(s.dir) // an unreadable folder: the known bots below are still checked
	for _, e := range entries {
		if isBrainFileName(e.Name()) {
			paths = append(paths, filepath.Join(s.dir, e.Name()))
		}
	}
	for _, b := range s.known {
		paths = append(paths, b.Path)
	}
	return paths
}

func (s *watchState) logInvalid(path string, err error) {
	s.invalid[path] = err
	id := fileID(filepath.Base(path))
	msg := "brain file has problems; bot not started"
	if s.known[id] != nil {
		msg = "brain file has problems; keeping the last good version"
	}
	s.log.Error(msg, zap.String("bot", id), zap.String("file", path), zap.Error(err))
}

func (s *watchState) logChange(c Change) {
	if c.Brain == nil {
		s.log.Info("brain removed", zap.String("bot", c.ID))
		return
	}
	s.log.Info("brain loaded", zap.String("bot", c.ID), zap.String("file", c.Brain.Path))
}

func groupByFile(errs Errors) map[string]Errors {
	byFile := make(map[string]Errors)
	for _, e := range errs {
		byFile[e.File] = append(byFile[e.File], e)
	}
	return byFile
}

func earliest(due map[string]time.Time) time.Time {
	var first time.Time
	for _, t := range due {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first
}
