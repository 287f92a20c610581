-- The schema of release 2 (conversations, usage, media in the journal),
-- frozen here with rows in every table: migrate_test.go opens a database
-- made from it and checks that the upgrade keeps them. Never edit this
-- file; a new release adds schema-v<N>.sql beside it.
CREATE TABLE session_history (
	bot        TEXT    NOT NULL,
	chat_id    INTEGER NOT NULL,
	session_id TEXT    NOT NULL,
	created    INTEGER NOT NULL,
	ended      INTEGER NOT NULL
, thread_id INTEGER NOT NULL DEFAULT 0);
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
, thread_id INTEGER NOT NULL DEFAULT 0, chat_type TEXT NOT NULL DEFAULT 'private', sender TEXT NOT NULL DEFAULT '', media TEXT NOT NULL DEFAULT '');
CREATE TABLE offsets (
	poller    TEXT    PRIMARY KEY,
	update_id INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE sessions (
	bot        TEXT    NOT NULL,
	chat_id    INTEGER NOT NULL,
	thread_id  INTEGER NOT NULL,
	session_id TEXT    NOT NULL,
	created    INTEGER NOT NULL,
	last_used  INTEGER NOT NULL,
	PRIMARY KEY (bot, chat_id, thread_id)
) WITHOUT ROWID;
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
CREATE INDEX journal_by_bot ON journal (bot, id);
CREATE INDEX session_history_by_chat ON session_history (bot, chat_id, thread_id);
CREATE INDEX session_history_by_ended ON session_history (ended);
CREATE INDEX usage_by_time ON usage (at);
CREATE INDEX usage_by_bot_user ON usage (bot, user_id, at);

-- 2025-03-09 22:30:00 UTC is 1741559400000 ms.
INSERT INTO sessions VALUES ('narrator', -1001501, 0, '6f1c2a7e-3b9d-4c51-9e0a-2d8f7b6c5a41', 1741559400000, 1741559460000);
INSERT INTO session_history VALUES ('narrator', -1001501, 'c3e8a1f4-7d2b-4e9c-8a5f-6b1d0e2c9f37', 1741473000000, 1741559340000, 0);
INSERT INTO voice VALUES ('voice', 1003, 1);
INSERT INTO daily VALUES ('narrator', 1001, '2025-03-09', 7);
INSERT INTO journal (bot, chat_id, user_id, message_id, text, mode, attempts, created, thread_id, chat_type, sender, media)
	VALUES ('painter', -1001501, 1003, 42, 'Please draw a lighthouse at dusk.', 'image', 1, 1741559400000, 0, 'supergroup', 'Ann', '');
INSERT INTO offsets VALUES ('painter@7000000001', 815244021);
INSERT INTO usage (at, bot, chat_id, user_id, request_id, mode, outcome, input_tokens, output_tokens, cache_read_tokens,
	cache_write_tokens, claude_usd, openai_usd)
	VALUES (1741559400000, 'narrator', 1001, 1001, 'r1', 'text', 'ok', 10, 20, 0, 0, 0.01, 0);

PRAGMA user_version = 2;
