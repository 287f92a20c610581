package brain

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// LoadDir parses every brain file in dir (not its subfolders; dotfiles and
// editor backups are skipped) and returns the valid brains sorted by ID.
// Problems of every invalid file come back together as Errors, alongside
// the brains that are fine, so one broken file does not stop the others.
// Besides each file's own rules, LoadDir rejects a second file for an ID
// already taken (a.yaml and a.yml) and a second brain with the token source
// of another (Telegram allows one poller per token): of the two, the
// first by file name keeps it (see LoadDirHeld).
func LoadDir(dir string) ([]*Brain, error) {
	return LoadDirHeld(dir, nil)
}

// LoadDirHeld is LoadDir where a token stays with the brain that has it:
// of two brains with one token, the one held reports true for (it
// polled the token's bot last, as brainbot remembers) keeps it and the
// other is refused, naming both files. held nil holds none.
func LoadDirHeld(dir string, held func(id string) bool) ([]*Brain, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read brains folder: %w", err)
	}
	var (
		parsed, brains []*Brain
		errs           Errors
	)
	// ReadDir sorts by name, so of a.yaml and a.yml the .yaml one wins.
	for _, e := range entries {
		if e.IsDir() || !isBrainFileName(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := Parse(path)
		if err != nil {
			errs = append(errs, asErrors(path, err)...)
			continue
		}
		parsed = append(parsed, b)
	}
	for _, b := range HeldFirst(parsed, held) {
		if conflict := conflictWith(b, brains); conflict != nil {
			errs = append(errs, conflict)
			continue
		}
		brains = append(brains, b)
	}
	slices.SortFunc(brains, func(a, b *Brain) int { return strings.Compare(a.ID, b.ID) })
	return brains, errs.err()
}

// HeldFirst returns brains with those held reports true for first, each
// part in its order: where two brains claim one token, the first keeps
// it (LoadDirHeld, CheckTokens). held nil holds none.
func HeldFirst(brains []*Brain, held func(id string) bool) []*Brain {
	ordered := slices.Clone(brains)
	if held != nil {
		slices.SortStableFunc(ordered, func(a, b *Brain) int {
			switch ha, hb := held(a.ID), held(b.ID); {
			case ha && !hb:
				return -1
			case hb && !ha:
				return 1
			}
			return 0
		})
	}
	return ordered
}

// LoadFile parses one brain file and reports its problems as LoadDir does
// for each file of a folder, an unreadable file included, always as Errors.
// Conflicts between files (ids, tokens) need the folder: see LoadDir.
func LoadFile(path string) (*Brain, error) {
	b, err := Parse(path)
	if err != nil {
		return nil, asErrors(path, err)
	}
	return b, nil
}

// asErrors turns Parse's error into Errors, so that a file that cannot be
// read is reported like any other problem.
func asErrors(path string, err error) Errors {
	if errs, ok := err.(Errors); ok {
		return errs
	}
	return Errors{{File: path, Line: 1, Msg: err.Error()}}
}

// conflictWith reports why b cannot run next to others, or nil: the same ID
// from another file, or a token another brain already polls.
func conflictWith(b *Brain, others []*Brain) *Error {
	for _, o := range others {
		switch {
		case o.ID == b.ID:
			return duplicateID(b.Path, b.ID, o.Path)
		case o.Telegram.source() != b.Telegram.source():
			continue
		case b.Telegram.TokenEnv != "":
			return b.tokenError("%s is already the token of %s; Telegram allows one bot per token", b.Telegram.TokenEnv, o.Path)
		default:
			return b.tokenError("the same token is already used by %s; Telegram allows one bot per token", o.Path)
		}
	}
	return nil
}

// duplicateID is the problem of a second file for one bot id.
func duplicateID(path, id, otherPath string) *Error {
	return &Error{File: path, Line: 1, Msg: fmt.Sprintf("bot id %q is already used by %s; keep one of the files", id, otherPath)}
}
