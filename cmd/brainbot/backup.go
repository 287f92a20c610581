package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"brainbot/state/sqlite"
)

// backup copies the state database to a file (replacing the previous
// backup there once the copy is complete) while `brainbot run` may be
// using it. It never changes the database (no schema upgrade), so a
// newer brainbot can back up the database of an older running one before
// the upgrade.
func (m *Main) backup(ctx context.Context, args []string) error {
	fs := m.newFlagSet("backup", "backup [-data DIR] [-env-file FILE] FILE\n\nCopies $BRAINBOT_DATA/"+sqlite.FileName+" to FILE while brainbot runs; a FILE there already (the previous backup) is replaced once the copy is complete.")
	cfg, err := m.loadConfig(fs, args, settingsNamed("BRAINBOT_DATA"))
	if err != nil {
		return usageError{err}
	}
	if fs.NArg() != 1 {
		return usageError{fmt.Errorf("want one argument, the backup file to write; got %d", fs.NArg())}
	}
	dest := fs.Arg(0)
	src := filepath.Join(cfg.DataDir, sqlite.FileName)
	db, err := openState(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Backup(ctx, dest); err != nil {
		return err
	}
	info, err := os.Stat(dest)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "backed up %s to %s (%d bytes)\n", src, dest, info.Size())
	return nil
}

// openState opens the state database of an existing installation for an
// admin command, without changing it. A missing database most often means
// the command did not get the service's settings: the error says how.
func openState(ctx context.Context, cfg Config) (*sqlite.Store, error) {
	db, err := sqlite.OpenExisting(ctx, filepath.Join(cfg.DataDir, sqlite.FileName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s: %w (not the service's data folder? Give the command its settings: -env-file /etc/brainbot/brainbot.env)",
			lookupSetting("BRAINBOT_DATA").name(), err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", lookupSetting("BRAINBOT_DATA").name(), err)
	}
	return db, nil
}
