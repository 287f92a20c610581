package output

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Retention limits what Prune keeps of one kind. The zero value keeps
// everything.
type Retention struct {
	// MaxAge removes files last modified longer ago than this (0: no limit).
	MaxAge time.Duration
	// MaxBytes removes the oldest organised files until the organised files
	// of the kind total at most this many bytes (0: no limit).
	MaxBytes int64
}

// Off reports whether r removes no organised file.
func (r Retention) Off() bool { return r.MaxAge <= 0 && r.MaxBytes <= 0 }

// ScratchAge is how long a file stays in a kind's flat folder, where the
// tools write, when no request organised it (its request failed after the
// tool ran): whatever the Retention, it is removed after this.
const ScratchAge = 24 * time.Hour

type prunable struct {
	path      string
	size      int64 // its sidecar's included
	mod       time.Time
	organised bool
	sidecar   bool // it has one
}

// Prune applies r to root/<kind dir>, oldest files first, and returns how
// many files it removed. It only removes regular files: in bot-*/user-*/
// folders, and in the flat folder (MaxAge, and ScratchAge at the most). An
// organised file's sidecar counts with it and goes with it; a sidecar
// whose file is gone is pruned like a file.
func Prune(root string, kind Kind, r Retention, now time.Time) (removed int, err error) {
	if kind.Dir() == "" {
		return 0, fmt.Errorf("output: unknown kind %v", kind)
	}
	files, err := prunables(filepath.Join(root, kind.Dir()))
	if err != nil {
		return 0, err
	}
	slices.SortFunc(files, func(a, b prunable) int { return a.mod.Compare(b.mod) })
	var organisedBytes int64
	for _, f := range files {
		if f.organised {
			organisedBytes += f.size
		}
	}
	var errs []error
	for _, f := range files {
		tooOld := r.MaxAge > 0 && now.Sub(f.mod) > r.MaxAge || !f.organised && now.Sub(f.mod) > ScratchAge
		tooMuch := r.MaxBytes > 0 && f.organised && organisedBytes > r.MaxBytes
		if !tooOld && !tooMuch {
			continue
		}
		if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		if f.sidecar {
			if err := os.Remove(SidecarPath(f.path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		removed++
		if f.organised {
			organisedBytes -= f.size
		}
	}
	return removed, errors.Join(errs...)
}

// prunables lists the regular files of a kind folder: its own files and
// those of bot-*/user-*/ below it.
func prunables(kindDir string) ([]prunable, error) {
	var files []prunable
	err := filepath.WalkDir(kindDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == kindDir {
				return fs.SkipAll
			}
			return err
		}
		rel, _ := filepath.Rel(kindDir, path)
		depth := strings.Count(rel, string(filepath.Separator))
		if d.IsDir() {
			switch {
			case path == kindDir:
				return nil
			case depth == 0 && strings.HasPrefix(d.Name(), "bot-"),
				depth == 1 && strings.HasPrefix(d.Name(), "user-"):
				return nil
			}
			return fs.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // gone since the read
		}
		switch depth {
		case 0:
			files = append(files, prunable{path: path, size: info.Size(), mod: info.ModTime()})
		case 2:
			if f, ok := organisedFile(path, info); ok {
				files = append(files, f)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("output: prune %s: %w", kindDir, err)
	}
	return files, nil
}

// organisedFile is the prunable of an organised file, its sidecar's size
// included; not ok for a sidecar whose file is there (it goes with it).
func organisedFile(path string, info fs.FileInfo) (prunable, bool) {
	if file, isSidecar := strings.CutSuffix(path, SidecarExt); isSidecar {
		if _, err := os.Lstat(file); err == nil {
			return prunable{}, false
		}
	}
	f := prunable{path: path, size: info.Size(), mod: info.ModTime(), organised: true}
	if sc, err := os.Lstat(SidecarPath(path)); err == nil && sc.Mode().IsRegular() {
		f.size += sc.Size()
		f.sidecar = true
	}
	return f, true
}
