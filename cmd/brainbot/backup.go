package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"brainbot/bot/store"
)

// backup copies the state database to a new file while `brainbot run` may
// be using it. It never changes the database (no schema upgrade), so a
// newer brainbot can back up the database of an older running one before
// the upgrade.
func (m *Main) backup(ctx context.Context, args []string) error {
	fs := m.newFlagSet("backup", "backup [-data DIR] FILE\n\nCopies $BRAINBOT_DATA/"+store.FileName+" to FILE, which must not exist, while brainbot runs.")
	data := lookupSetting("BRAINBOT_DATA")
	dataDir := fs.String(data.flag, cmp.Or(m.getenv(data.env), data.def), fmt.Sprintf("%s (env %s)", data.usage, data.env))
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() != 1 {
		return usageError{fmt.Errorf("want one argument, the backup file to create; got %d", fs.NArg())}
	}
	dest := fs.Arg(0)
	db, err := store.OpenExisting(ctx, filepath.Join(*dataDir, store.FileName))
	if err != nil {
		return fmt.Errorf("%s (-%s): %w", data.env, data.flag, err)
	}
	defer db.Close()
	if err := db.Backup(ctx, dest); err != nil {
		return err
	}
	info, err := os.Stat(dest)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "backed up %s to %s (%d bytes)\n", filepath.Join(*dataDir, store.FileName), dest, info.Size())
	return nil
}
