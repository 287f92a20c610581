package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Backup writes a consistent copy of the database to dest while other
// connections (the running service) go on reading and writing: SQLite's
// VACUUM INTO copies one read transaction's snapshot, so the copy holds
// every transaction committed before it began and none of the later ones.
// The copy is compact and opens with Open. An existing dest (the previous
// backup) is replaced at once, when the copy is complete: a failed backup
// leaves it as it was. dest may not be the database or one of its own
// files.
func (s *Maintenance) Backup(ctx context.Context, dest string) (err error) {
	// Absolute, so that SQLite never reads a "file:" name as a URI.
	dest, err = filepath.Abs(dest)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := s.notOwnFile(dest); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// VACUUM INTO fills an empty file; it is made beside dest, so that the
	// rename below is atomic. 0600: the copy holds users' messages.
	f, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp-*")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			// Leave no half-written copy that could be mistaken for a backup.
			err = errors.Join(err, os.Remove(tmp))
		}
	}()
	if err := errors.Join(f.Chmod(0o600), f.Close()); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		return fmt.Errorf("backup to %s: %w", dest, err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// notOwnFile refuses dest when it is the database or one of the files
// SQLite and the store keep beside it: replacing one under the running
// service would lose its data.
func (s *Maintenance) notOwnFile(dest string) error {
	db, err := filepath.Abs(s.db.path)
	if err != nil {
		return err
	}
	for _, own := range []string{db, db + "-wal", db + "-shm", db + answeredSuffix} {
		if dest == own || sameFile(dest, own) {
			return fmt.Errorf("%s is the database's own file, not a place for its backup", dest)
		}
	}
	return nil
}

// sameFile reports whether a and b both exist and are one file.
func sameFile(a, b string) bool {
	ia, errA := os.Stat(a)
	ib, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(ia, ib)
}
