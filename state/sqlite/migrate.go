package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"go.uber.org/zap"
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
	// 2: sessions belong to a conversation, a chat and in forum groups one
	// of its topics, not to a user: what someone told a bot privately must
	// not surface in a group. A private chat's id is its user's id, so the
	// sessions of release 1 stay with their private chats. The journal
	// keeps what a group message needs to be answered after a restart.
	// Prune deletes ended sessions by age; without the index on ended it
	// would scan the whole history, which grows with every /reset. usage
	// records what each request cost, for reports and spending limits. The
	// journal keeps the files a message carries (photos, voice, documents),
	// so a replay fetches them again.
	{2, `ALTER TABLE sessions RENAME TO sessions_by_user;
	CREATE TABLE sessions (
		bot        TEXT    NOT NULL,
		chat_id    INTEGER NOT NULL,
		thread_id  INTEGER NOT NULL,
		session_id TEXT    NOT NULL,
		created    INTEGER NOT NULL,
		last_used  INTEGER NOT NULL,
		PRIMARY KEY (bot, chat_id, thread_id)
	) WITHOUT ROWID;
	INSERT INTO sessions SELECT bot, user_id, 0, session_id, created, last_used FROM sessions_by_user;
	DROP TABLE sessions_by_user;
	DROP INDEX session_history_by_user;
	ALTER TABLE session_history RENAME COLUMN user_id TO chat_id;
	ALTER TABLE session_history ADD COLUMN thread_id INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX session_history_by_chat ON session_history (bot, chat_id, thread_id);
	ALTER TABLE journal ADD COLUMN thread_id INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE journal ADD COLUMN chat_type TEXT NOT NULL DEFAULT 'private';
	ALTER TABLE journal ADD COLUMN sender TEXT NOT NULL DEFAULT '';
	ALTER TABLE journal ADD COLUMN media TEXT NOT NULL DEFAULT '';
	CREATE INDEX session_history_by_ended ON session_history (ended);
	CREATE TABLE usage (
		id                 INTEGER PRIMARY KEY AUTOINCREMENT,
		at                 INTEGER NOT NULL,
		bot                TEXT    NOT NULL,
		chat_id            INTEGER NOT NULL,
		user_id            INTEGER NOT NULL,
		request_id         TEXT    NOT NULL,
		mode               TEXT    NOT NULL,
		outcome            TEXT    NOT NULL,
		input_tokens       INTEGER NOT NULL,
		output_tokens      INTEGER NOT NULL,
		cache_read_tokens  INTEGER NOT NULL,
		cache_write_tokens INTEGER NOT NULL,
		claude_usd         REAL    NOT NULL,
		openai_usd         REAL    NOT NULL
	);
	CREATE INDEX usage_by_time ON usage (at);
	CREATE INDEX usage_by_bot_user ON usage (bot, user_id, at);`},
	// 3: panel runs (issue 17), journaled as a whole after every step so a
	// restart resumes them; one per /panel message (a message several
	// member bots receive starts one run), and the running ones found fast.
	{3, `CREATE TABLE panel_runs (
		id         TEXT    PRIMARY KEY,
		chat_id    INTEGER NOT NULL,
		thread_id  INTEGER NOT NULL,
		message_id INTEGER NOT NULL,
		running    INTEGER NOT NULL,
		run        TEXT    NOT NULL,
		created    INTEGER NOT NULL,
		updated    INTEGER NOT NULL,
		UNIQUE (chat_id, message_id)
	);
	CREATE INDEX panel_runs_running ON panel_runs (running, chat_id);`},
	// 4: the journal keeps every update as Telegram sent it (raw), with
	// its id and the bot as its poller knew it, so a replay reads it as it
	// came and a kind of update this release does not know is not lost.
	// Entries of earlier releases keep their columns and a NULL raw.
	{4, `ALTER TABLE journal ADD COLUMN update_id INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE journal ADD COLUMN raw BLOB;
	ALTER TABLE journal ADD COLUMN me_id INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE journal ADD COLUMN me_username TEXT NOT NULL DEFAULT '';`},
	// 5: which brain each Telegram bot (the number its token starts with)
	// belongs to, so that a copied brain file with the same token never
	// takes the bot over, after a restart neither; and what the buttons
	// under the bots' messages mean (issue 28): a tap carries only their
	// id; the open questions of a conversation found fast (a message typed
	// closes them), old rows pruned by age.
	{5, `CREATE TABLE telegram_bots (
		bot_number TEXT    PRIMARY KEY,
		brain      TEXT    NOT NULL,
		since      INTEGER NOT NULL
	) WITHOUT ROWID;
	CREATE TABLE buttons (
		id         TEXT    PRIMARY KEY,
		kind       TEXT    NOT NULL,
		bot        TEXT    NOT NULL,
		chat_id    INTEGER NOT NULL,
		thread_id  INTEGER NOT NULL,
		message_id INTEGER NOT NULL,
		user_id    INTEGER NOT NULL,
		options    TEXT    NOT NULL,
		text       TEXT    NOT NULL,
		created    INTEGER NOT NULL,
		used_by    INTEGER NOT NULL DEFAULT 0,
		file       TEXT    NOT NULL DEFAULT ''
	) WITHOUT ROWID;
	CREATE INDEX buttons_open ON buttons (bot, chat_id, thread_id, kind) WHERE used_by = 0;
	CREATE INDEX buttons_by_created ON buttons (created);`},
	// 6: no change to the schema. Releases 1 to 5 deleted without
	// secure_delete: what they deleted (every journal entry answered,
	// with the user's words) stayed in the database's free space. Open
	// rewrites such a database once before this step (eraseOldDeletes).
	{6, `-- nothing: see eraseOldDeletes`},
	// 7: the notes a persona keeps about each user, per bot (issue 49): a
	// brain's memory. The id is never reused, so a note the model names
	// from an older listing is never another one; a user's notes are
	// read, counted and deleted together.
	{7, `CREATE TABLE notes (
		id      INTEGER PRIMARY KEY AUTOINCREMENT,
		bot     TEXT    NOT NULL,
		user_id INTEGER NOT NULL,
		text    TEXT    NOT NULL,
		created INTEGER NOT NULL
	);
	CREATE INDEX notes_by_user ON notes (bot, user_id, id);`},
	// 8: reminders and check-ins (issue 49). A reminder's id is never
	// reused: the log knows a due one by it. A contact is what the
	// check-ins of a user with a bot go by (check_ins: a JSON array of
	// Unix ms, the last week's). The journal keeps the scheduled messages
	// appended (JSON; user_id their user's, for a forget), and
	// scheduled_log the ids stored in the last day, so a due one appended
	// twice is stored once.
	{8, `CREATE TABLE reminders (
		id        INTEGER PRIMARY KEY AUTOINCREMENT,
		bot       TEXT    NOT NULL,
		chat_id   INTEGER NOT NULL,
		thread_id INTEGER NOT NULL,
		user_id   INTEGER NOT NULL,
		text      TEXT    NOT NULL,
		due       INTEGER NOT NULL,
		created   INTEGER NOT NULL
	);
	CREATE INDEX reminders_by_user ON reminders (bot, user_id, due);
	CREATE INDEX reminders_by_due ON reminders (due);
	CREATE TABLE contacts (
		bot           TEXT    NOT NULL,
		user_id       INTEGER NOT NULL,
		zone          TEXT    NOT NULL DEFAULT '',
		wrote         INTEGER NOT NULL DEFAULT 0,
		check_ins     TEXT    NOT NULL DEFAULT '[]',
		last_check_in INTEGER NOT NULL DEFAULT 0,
		declined      INTEGER NOT NULL DEFAULT 0,
		blocked       INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (bot, user_id)
	) WITHOUT ROWID;
	ALTER TABLE journal ADD COLUMN scheduled TEXT;
	CREATE TABLE scheduled_log (
		bot      TEXT    NOT NULL,
		id       TEXT    NOT NULL,
		user_id  INTEGER NOT NULL,
		appended INTEGER NOT NULL,
		PRIMARY KEY (bot, id)
	) WITHOUT ROWID;
	CREATE INDEX scheduled_log_by_time ON scheduled_log (appended);`},
}

// secureDeleteSince is the first schema version whose databases were
// written with secure_delete on.
const secureDeleteSince = 6

// eraseOldDeletes rewrites (VACUUM) a database a release before
// secureDeleteSince wrote, and empties its write-ahead log, so that what
// those releases deleted is gone from the files. It runs before the
// schema step that marks the database as erased, so an upgrade cut
// short erases again; it takes as long as copying the database.
func eraseOldDeletes(ctx context.Context, d *db) error {
	var version int
	if err := d.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version == 0 || version >= secureDeleteSince {
		return nil
	}
	start := time.Now()
	if _, err := d.ExecContext(ctx, `VACUUM`); err != nil {
		return fmt.Errorf("erase what earlier releases deleted (VACUUM): %w", err)
	}
	if err := d.truncateWAL(ctx); err != nil {
		return fmt.Errorf("erase what earlier releases deleted: %w", err)
	}
	d.log.Info("database rewritten once to erase what earlier releases deleted", zap.Int("schema_version", version),
		zap.Duration("took_ms", time.Since(start)))
	return nil
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
