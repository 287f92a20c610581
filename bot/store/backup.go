package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Backup writes a consistent copy of the database to dest, a file that must
// not exist yet, while other connections (the running service) go on
// reading and writing: SQLite's VACUUM INTO copies one read transaction's
// snapshot, so the copy holds every transaction committed before it began
// and none of the later ones. The copy is compact and opens with Open.
func (s *Store) Backup(ctx context.Context, dest string) (err error) {
	// Absolute, so that SQLite never reads a "file:" name as a URI.
	dest, err = filepath.Abs(dest)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// O_EXCL refuses an existing file atomically; VACUUM INTO then fills
	// the empty file we own. 0600: the copy holds users' messages.
	f, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("backup: %w", errors.Join(err, os.Remove(dest)))
	}
	if _, err := s.db.ExecContext(ctx, `VACUUM INTO ?`, dest); err != nil {
		// Leave no half-written copy that could be mistaken for a backup.
		return fmt.Errorf("backup to %s: %w", dest, errors.Join(err, os.Remove(dest)))
	}
	return nil
}
