-- The schema of release 7 (release 6's with the notes personas keep
-- about users), frozen here with rows in every table: migrate_test.go
-- opens a database made from it and checks that the upgrade keeps them.
-- It holds release 6's rows and a note. Made with sqlite3's .dump. Never
-- edit this file; a new release adds schema-v<N>.sql beside it.
CREATE TABLE session_history (
	bot        TEXT    NOT NULL,
	chat_id    INTEGER NOT NULL,
	session_id TEXT    NOT NULL,
	created    INTEGER NOT NULL,
	ended      INTEGER NOT NULL
, thread_id INTEGER NOT NULL DEFAULT 0);
INSERT INTO session_history VALUES('alpha',7,'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d',1741473000000,1741559340000,0);
CREATE TABLE voice (
	bot     TEXT    NOT NULL,
	user_id INTEGER NOT NULL,
	on_     INTEGER NOT NULL,
	PRIMARY KEY (bot, user_id)
) WITHOUT ROWID;
INSERT INTO voice VALUES('alpha',9,0);
CREATE TABLE daily (
	bot     TEXT    NOT NULL,
	user_id INTEGER NOT NULL,
	day     TEXT    NOT NULL,
	count   INTEGER NOT NULL,
	PRIMARY KEY (bot, user_id, day)
) WITHOUT ROWID;
INSERT INTO daily VALUES('alpha',7,'2025-03-09',3);
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
, thread_id INTEGER NOT NULL DEFAULT 0, chat_type TEXT NOT NULL DEFAULT 'private', sender TEXT NOT NULL DEFAULT '', media TEXT NOT NULL DEFAULT '', update_id INTEGER NOT NULL DEFAULT 0, raw BLOB, me_id INTEGER NOT NULL DEFAULT 0, me_username TEXT NOT NULL DEFAULT '');
INSERT INTO journal VALUES(1,'alpha',7,7,11,'hello from before the upgrade','',0,1741559400000,0,'private','','',0,NULL,0,'');
INSERT INTO journal VALUES(2,'alpha',-1001500,8,12,'what did I miss?','text',1,1741559401000,0,'supergroup','Ann Lee','',0,NULL,0,'');
INSERT INTO journal VALUES(3,'alpha',9,9,13,'/help','',0,1741559402000,0,'private','','',0,NULL,0,'');
INSERT INTO journal VALUES(4,'alpha',10,10,14,'two photos','',0,1741559403000,0,'private','','[{"kind":"image","file_id":"file-1","size":631,"mime":"image/jpeg","album":"77"}]',0,NULL,0,'');
INSERT INTO journal VALUES(5,'alpha',10,10,15,'','',0,1741559403000,0,'private','','[{"kind":"image","file_id":"file-2","size":631,"mime":"image/jpeg","album":"77"}]',0,NULL,0,'');
INSERT INTO journal VALUES(6,'alpha',7,0,0,'','text',1,1741559402000,0,'private','','',815244030,X'7b227570646174655f6964223a3831353234343033302c226d657373616765223a7b226d6573736167655f6964223a31332c2264617465223a313734313535393430322c2263686174223a7b226964223a372c2274797065223a2270726976617465222c2266697273745f6e616d65223a22426f227d2c2266726f6d223a7b226964223a372c2269735f626f74223a66616c73652c2266697273745f6e616d65223a22426f227d2c2274657874223a226b6570742061732069742063616d65227d7d',7000000001,'alpha_bot');
CREATE TABLE offsets (
	poller    TEXT    PRIMARY KEY,
	update_id INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO offsets VALUES('painter@7000000001',815244021);
CREATE TABLE sessions (
	bot        TEXT    NOT NULL,
	chat_id    INTEGER NOT NULL,
	thread_id  INTEGER NOT NULL,
	session_id TEXT    NOT NULL,
	created    INTEGER NOT NULL,
	last_used  INTEGER NOT NULL,
	PRIMARY KEY (bot, chat_id, thread_id)
) WITHOUT ROWID;
INSERT INTO sessions VALUES('alpha',7,0,'0d4a5f9e-1c2b-4e7a-9f3d-8b6c5a4e3f21',1741559400000,1741559460000);
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
INSERT INTO usage VALUES(1,1741559400000,'alpha',7,7,'r1','text','ok',10,20,0,0,0.010000000000000000208,0.0);
CREATE TABLE panel_runs (
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
INSERT INTO panel_runs VALUES('5b0c7e1a-2f3d-4c8b-9a6e-1d2f3a4b5c6d',-1001500,0,40,0,'{"id":"5b0c7e1a-2f3d-4c8b-9a6e-1d2f3a4b5c6d"}',1741559000000,1741559300000);
CREATE TABLE telegram_bots (
		bot_number TEXT    PRIMARY KEY,
		brain      TEXT    NOT NULL,
		since      INTEGER NOT NULL
	) WITHOUT ROWID;
INSERT INTO telegram_bots VALUES('7000000001','alpha',1741559400000);
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
INSERT INTO buttons VALUES('q-5d1e','question','alpha',7,0,42,7,'["tea","coffee"]','Which one?',1741559400000,0,'');
CREATE TABLE notes (
		id      INTEGER PRIMARY KEY AUTOINCREMENT,
		bot     TEXT    NOT NULL,
		user_id INTEGER NOT NULL,
		text    TEXT    NOT NULL,
		created INTEGER NOT NULL
	);
INSERT INTO notes VALUES(1,'alpha',7,'Ann has a cat named Miso',1741559400000);
DELETE FROM sqlite_sequence;
INSERT INTO sqlite_sequence VALUES('journal',6);
INSERT INTO sqlite_sequence VALUES('usage',1);
INSERT INTO sqlite_sequence VALUES('notes',1);
CREATE INDEX journal_by_bot ON journal (bot, id);
CREATE INDEX session_history_by_chat ON session_history (bot, chat_id, thread_id);
CREATE INDEX session_history_by_ended ON session_history (ended);
CREATE INDEX usage_by_time ON usage (at);
CREATE INDEX usage_by_bot_user ON usage (bot, user_id, at);
CREATE INDEX panel_runs_running ON panel_runs (running, chat_id);
CREATE INDEX buttons_open ON buttons (bot, chat_id, thread_id, kind) WHERE used_by = 0;
CREATE INDEX buttons_by_created ON buttons (created);
CREATE INDEX notes_by_user ON notes (bot, user_id, id);
PRAGMA user_version = 7;
