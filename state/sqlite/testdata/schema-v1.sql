-- The schema of the first release (brainbot before numbered migrations,
-- commit 6cb141c), frozen here with rows in every table: migrate_test.go
-- opens a database made from it and checks that the upgrade keeps them.
-- Never edit this file; a new release adds schema-v<N>.sql beside it.
CREATE TABLE sessions (
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
) WITHOUT ROWID;

-- 2025-03-09 22:30:00 UTC is 1741559400000 ms.
INSERT INTO sessions VALUES ('narrator', 1001, '6f1c2a7e-3b9d-4c51-9e0a-2d8f7b6c5a41', 1741559400000, 1741559460000);
INSERT INTO sessions VALUES ('voice', 1002, '0b7d9e23-5a1f-4c8e-b2d6-91e4f3a7c058', 1741559400000, 1741559400000);
INSERT INTO session_history VALUES ('narrator', 1001, 'c3e8a1f4-7d2b-4e9c-8a5f-6b1d0e2c9f37', 1741473000000, 1741559340000);
INSERT INTO voice VALUES ('voice', 1002, 0);
INSERT INTO voice VALUES ('voice', 1003, 1);
INSERT INTO daily VALUES ('narrator', 1001, '2025-03-09', 7);
INSERT INTO journal (bot, chat_id, user_id, message_id, text, mode, attempts, created)
	VALUES ('painter', 1003, 1003, 42, 'Please draw a lighthouse at dusk.', 'image', 1, 1741559400000);
INSERT INTO offsets VALUES ('painter@7000000001', 815244021);

PRAGMA user_version = 1;
