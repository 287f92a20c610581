package sqlite

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// answered remembers the journal entries that were answered but could not
// be deleted (another process held the database locked past the busy
// timeout), in a file beside the database, one id a line. Pending leaves
// them out, so a restart does not answer them again, and Open deletes
// them. Entry ids are never reused (AUTOINCREMENT), so an id kept after
// its entry is gone does no harm.
type answered struct {
	path string

	mu  sync.Mutex
	ids map[int64]bool
}

// loadAnswered reads the file at path (missing: none kept).
func loadAnswered(path string) (*answered, error) {
	a := &answered{path: path, ids: map[int64]bool{}}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return a, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the answered journal entries: %w", err)
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		// A line cut short by a crash is a number too, or nothing.
		if id, err := strconv.ParseInt(strings.TrimSpace(lines.Text()), 10, 64); err == nil {
			a.ids[id] = true
		}
	}
	if err := lines.Err(); err != nil {
		return nil, fmt.Errorf("read the answered journal entries: %w", err)
	}
	return a, nil
}

// keep records id as answered, on disk before it returns.
func (a *answered) keep(id int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ids[id] {
		return nil
	}
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, id)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	a.ids[id] = true
	return nil
}

func (a *answered) has(id int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ids[id]
}

func (a *answered) list() []int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(maps.Keys(a.ids))
}

// forget drops ids whose entries are deleted now; the file goes with the
// last of them. Until then it keeps listing them, which does no harm.
func (a *answered) forget(ids ...int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.ids) == 0 {
		return
	}
	for _, id := range ids {
		delete(a.ids, id)
	}
	if len(a.ids) == 0 {
		_ = os.Remove(a.path) // left behind, it lists only deleted entries
	}
}
