package panel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"brainbot/bot/brain"
)

// Folder is a panels folder read on use, so edits apply to the next
// /panel without a restart. Like the brains folder, an edit that breaks a
// file keeps the panel's last good version; removing the file ends the
// panel.
type Folder struct {
	Dir string

	mu   sync.Mutex
	good map[string]*Panel // by id: the last valid version read
}

// Panels returns the folder's panels, sorted by id, and the problems of
// its invalid files (each as file:line), saying which panels kept their
// last good version.
func (f *Folder) Panels() ([]*Panel, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	panels, err := LoadDir(f.Dir)
	var problems brain.Errors
	if err != nil && !errors.As(err, &problems) {
		return nil, err
	}
	current := map[string]*Panel{}
	for _, p := range panels {
		current[p.ID] = p
	}
	var kept []string
	for _, e := range problems {
		id, _ := brain.FileID(filepath.Base(e.File))
		if old := f.good[id]; old != nil && current[id] == nil && old.Path == e.File && stillThere(old.Path) {
			current[id] = old
			panels = append(panels, old)
			kept = append(kept, id)
		}
	}
	f.good = current
	slices.SortFunc(panels, func(a, b *Panel) int { return strings.Compare(a.ID, b.ID) })
	if len(kept) > 0 {
		err = fmt.Errorf("%w\nkeeping the last good version of %s", err, strings.Join(kept, ", "))
	}
	return panels, err
}

func stillThere(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
