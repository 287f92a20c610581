package store

import (
	"context"
	"database/sql"
	"fmt"
)

// migration is one numbered step of the schema. A database at version n has
// had steps 1 to n applied; SQLite's PRAGMA user_version records n.
type migration struct {
	version int
	sql     string
}

// migrations are applied in order on Open. A released step is never edited
// (databases in the field already ran it): append a new one, and add
// testdata/schema-v<N>.sql for the release it upgrades from (see
// migrate_test.go).
var migrations = []migration{
	// 1: the first released schema.
	{1, `CREATE TABLE sessions (
		bot        TEXT    NOT NULL,
		user_id    INTEGER NOT NULL,
		session_id TEXT    NOT NULL,
		created    INTEGER NOT NULL,
		last_used  INTEGER NOT NULL,
		PRIMARY KEY (bot, user_id)
	) WITHOUT ROWID;
	CREATE TABLE session_history (
		bot        TEXT    NOT NULL,
		user_id    INTEGER NOT NULL,
		session_id TEXT    NOT NULL,
		created    INTEGER NOT NULL,
		ended      INTEGER NOT NULL
	);
	CREATE INDEX session_history_by_user ON session_history (bot, user_id);
	CREATE TABLE voice (
		bot     TEXT    NOT NULL,
		user_id INTEGER NOT NULL,
		on_     INTEGER NOT NULL,
		PRIMARY KEY (bot, user_id)
	) WITHOUT ROWID;
	CREATE TABLE daily (
		bot     TEXT    NOT NULL,
		user_id INTEGER NOT NULL,
		day     TEXT    NOT NULL,
		count   INTEGER NOT NULL,
		PRIMARY KEY (bot, user_id, day)
	) WITHOUT ROWID;
	CREATE TABLE journal (
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
		bot        TEXT    NOT NULL,
		chat_id    INTEGER NOT NULL,
		user_id    INTEGER NOT NULL,
		message_id INTEGER NOT NULL,
		text       TEXT    NOT NULL,
		mode       TEXT    NOT NULL DEFAULT '',
		attempts   INTEGER NOT NULL DEFAULT 0,
		created    INTEGER NOT NULL
	);
	CREATE INDEX journal_by_bot ON journal (bot, id);
	CREATE TABLE offsets (
		poller    TEXT    PRIMARY KEY,
		update_id INTEGER NOT NULL
	) WITHOUT ROWID;`},
	// 2: Prune deletes ended sessions by age; without this index it would
	// scan the whole history, which grows with every /reset.
	{2, `CREATE INDEX session_history_by_ended ON session_history (ended);`},
}

// migrate brings db from its recorded version to target, all steps in one
// transaction: an upgrade that fails leaves the database as it was, still
// usable by the release that wrote it.
func migrate(ctx context.Context, db *sql.DB, target int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("database schema version %d is newer than this program's %d: run the newer brainbot, or restore a backup made by this one",
			version, len(migrations))
	}
	if version >= target {
		return nil
	}
	for _, m := range migrations[version:target] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("schema step %d: %w", m.version, err)
		}
	}
	// PRAGMA takes no bound parameters; the value is our own integer.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, target)); err != nil {
		return fmt.Errorf("record schema version: %w", err)
	}
	return tx.Commit()
}
