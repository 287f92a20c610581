package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"brainbot/bot/store"
)

// backup copies the state database to a file (replacing the previous
// backup there once the copy is complete) while `brainbot run` may be
// using it. It never changes the database (no schema upgrade), so a
// newer brainbot can back up the database of an older running one before
// the upgrade.
func (m *Main) backup(ctx context.Context, args []string) error {
	fs := m.newFlagSet("backup", "backup [-data DIR] [-env-file FILE] FILE\n\nCopies $BRAINBOT_DATA/"+store.FileName+" to FILE while brainbot runs; a FILE there already (the previous backup) is replaced once the copy is complete.")
	cfg, err := m.loadConfig(fs, args, settingsNamed("BRAINBOT_DATA"))
	if err != nil {
		return usageError{err}
	}
	if fs.NArg() != 1 {
		return usageError{fmt.Errorf("want one argument, the backup file to write; got %d", fs.NArg())}
	}
	dest := fs.Arg(0)
	src := filepath.Join(cfg.DataDir, store.FileName)
	db, err := store.OpenExisting(ctx, src)
	if err != nil {
		return fmt.Errorf("%s: %w", lookupSetting("BRAINBOT_DATA").name(), err)
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
