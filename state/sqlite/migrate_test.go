package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"brainbot/message"
)

func TestMigrationsAreNumberedInOrder(t *testing.T) {
	for i, m := range migrations {
		if m.version != i+1 {
			t.Errorf("migrations[%d] is numbered %d, want %d", i, m.version, i+1)
		}
	}
}

// releaseChecks read, through the Store, the rows each testdata/schema-v<N>.sql
// fixture holds. Every release a step upgrades from has a fixture and a check.
var releaseChecks = map[int]func(*testing.T, *Store){
	1: checkRelease1Rows,
	2: checkRelease2Rows,
	3: checkRelease3Rows,
	4: checkRelease4Rows,
	5: checkRelease5Rows,
	6: checkRelease6Rows,
	7: checkRelease7Rows,
}

// TestUpgradeFromEveryRelease makes a database as each earlier release left
// it, with rows in every table, opens it with this release and checks that
// the schema is the one a new database gets and that no row was lost.
func TestUpgradeFromEveryRelease(t *testing.T) {
	for v := 1; v < len(migrations); v++ {
		t.Run(fmt.Sprintf("from v%d", v), func(t *testing.T) {
			check := releaseChecks[v]
			if check == nil {
				t.Fatalf("no releaseChecks[%d] for testdata/schema-v%d.sql", v, v)
			}
			path := fromFixture(t, v)
			// The fixture is what steps 1..v make: no released step was
			// edited since.
			if got, want := schemaOf(t, path), schemaAt(t, v); got != want {
				t.Fatalf("testdata/schema-v%d.sql differs from what migrations 1..%d create:\nfixture:\n%s\nsteps:\n%s", v, v, got, want)
			}
			before := rowCounts(t, path)

			s, err := Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got, want := schemaOf(t, path), schemaAt(t, len(migrations)); got != want {
				t.Errorf("upgraded schema:\n%s\nnew database's:\n%s", got, want)
			}
			if after := rowCounts(t, path); after != before {
				t.Errorf("rows per table before the upgrade %s, after %s", before, after)
			}
			check(t, s)
		})
	}
}

func checkRelease1Rows(t *testing.T, s *Store) {
	ctx := context.Background()
	at := time.UnixMilli(1741559400000).UTC()
	sess, ok, err := s.Session(ctx, message.Key{Bot: "narrator", Chat: 1001})
	if err != nil || !ok || sess.ID != "6f1c2a7e-3b9d-4c51-9e0a-2d8f7b6c5a41" || !sess.LastUsed.Equal(at.Add(time.Minute)) {
		t.Errorf("session = %+v, %v, %v", sess, ok, err)
	}
	hist, err := s.SessionHistory(ctx, message.Key{Bot: "narrator", Chat: 1001})
	if err != nil || len(hist) != 1 || hist[0].ID != "c3e8a1f4-7d2b-4e9c-8a5f-6b1d0e2c9f37" {
		t.Errorf("history = %+v, %v", hist, err)
	}
	if on, set, err := s.Voice(ctx, "voice", 1003); !on || !set || err != nil {
		t.Errorf("voice toggle = %v, %v, %v", on, set, err)
	}
	if n, err := s.DailyCount(ctx, "narrator", 1001, at); n != 7 || err != nil {
		t.Errorf("daily count = %d, %v", n, err)
	}
	pending, err := pendingOf(ctx, s, "painter")
	if err != nil || len(pending) != 1 || pending[0].Text != "Please draw a lighthouse at dusk." || pending[0].Attempts != 1 {
		t.Errorf("journal = %+v, %v", pending, err)
	}
	if off, err := s.Offset(ctx, "painter@7000000001"); off != 815244021 || err != nil {
		t.Errorf("offset = %d, %v", off, err)
	}
	// AUTOINCREMENT goes on after the old rows: a new entry never reuses an
	// id a replay may still hold.
	id, err := s.Journal(ctx, Entry{Bot: "painter", Text: "again", Created: at}, "painter@7000000001", 815244022)
	if err != nil || id <= pending[0].ID {
		t.Errorf("new journal id %d after %d, %v", id, pending[0].ID, err)
	}
}

func checkRelease2Rows(t *testing.T, s *Store) {
	ctx := context.Background()
	group := message.Key{Bot: "narrator", Chat: -1001501}
	if sess, ok, err := s.Session(ctx, group); err != nil || !ok || sess.ID != "6f1c2a7e-3b9d-4c51-9e0a-2d8f7b6c5a41" {
		t.Errorf("session = %+v, %v, %v", sess, ok, err)
	}
	pending, err := pendingOf(ctx, s, "painter")
	if err != nil || len(pending) != 1 || pending[0].Sender != "Ann" || pending[0].ChatType != "supergroup" {
		t.Errorf("journal = %+v, %v", pending, err)
	}
	if runs, err := s.RunningPanels(ctx); err != nil || len(runs) != 0 {
		t.Errorf("panel runs after the upgrade = %v, %v", runs, err)
	}
}

// checkRelease3Rows reads release 3's rows, its journal's as the entries
// they were: without the update as received (Update nil), so that the
// bots build it from these fields.
func checkRelease3Rows(t *testing.T, s *Store) {
	ctx := context.Background()
	if sess, ok, err := s.Session(ctx, message.Key{Bot: "alpha", Chat: 7}); err != nil || !ok || sess.ID != "0d4a5f9e-1c2b-4e7a-9f3d-8b6c5a4e3f21" {
		t.Errorf("session = %+v, %v, %v", sess, ok, err)
	}
	pending, err := s.Pending(ctx)
	if err != nil || len(pending) != 5 {
		t.Fatalf("journal = %+v, %v", pending, err)
	}
	group := pending[1]
	if group.Update != nil || group.UpdateID != 0 || group.Sender != "Ann Lee" || group.ChatType != "supergroup" || group.Chat != -1001500 ||
		group.User != 8 || group.Attempts != 1 || group.Mode != "text" {
		t.Errorf("group entry = %+v", group)
	}
	if album := pending[4]; album.Media != `[{"kind":"image","file_id":"file-2","size":631,"mime":"image/jpeg","album":"77"}]` {
		t.Errorf("album entry = %+v", album)
	}
	if runs, err := s.RunningPanels(ctx); err != nil || len(runs) != 0 {
		t.Errorf("running panel runs = %v, %v", runs, err)
	}
	if n, err := s.DailyCount(ctx, "alpha", 7, time.UnixMilli(1741559400000)); n != 3 || err != nil {
		t.Errorf("daily count = %d, %v", n, err)
	}
}

// checkRelease4Rows reads release 4's journal entry as Telegram sent it.
func checkRelease4Rows(t *testing.T, s *Store) {
	ctx := context.Background()
	pending, err := s.Pending(ctx)
	if err != nil || len(pending) != 6 {
		t.Fatalf("journal = %+v, %v", pending, err)
	}
	raw := pending[5]
	if raw.UpdateID != 815244030 || !strings.Contains(string(raw.Update), `"text":"kept as it came"`) || raw.MeID != 7000000001 ||
		raw.MeUsername != "alpha_bot" || raw.Attempts != 1 {
		t.Errorf("raw entry = %+v", raw)
	}
	if holders, err := s.TelegramBotHolders(ctx); err != nil || len(holders) != 0 {
		t.Errorf("brains of the Telegram bots after the upgrade = %v, %v", holders, err)
	}
}

// checkRelease5Rows reads release 5's brain of a Telegram bot and its
// open question.
func checkRelease5Rows(t *testing.T, s *Store) {
	ctx := context.Background()
	if holders, err := s.TelegramBotHolders(ctx); err != nil || len(holders) != 1 || holders["7000000001"] != "alpha" {
		t.Errorf("brains of the Telegram bots = %v, %v", holders, err)
	}
	b, ok, err := s.LookupButtons(ctx, "q-5d1e")
	if err != nil || !ok || b.User != 7 || b.Conversation != (message.Key{Bot: "alpha", Chat: 7}) || len(b.Options) != 2 || b.Text != "Which one?" {
		t.Errorf("buttons = %+v, %v, %v", b, ok, err)
	}
}

// checkRelease6Rows reads release 6's rows, release 5's; no notes were
// kept before release 7.
func checkRelease6Rows(t *testing.T, s *Store) {
	checkRelease5Rows(t, s)
	if notes, err := s.Notes(context.Background(), "alpha", 7); err != nil || len(notes) != 0 {
		t.Errorf("notes after the upgrade = %+v, %v", notes, err)
	}
}

// checkRelease7Rows reads release 7's rows, release 6's and a note; no
// reminder or contact was kept before release 8, and the journal's
// entries are updates, none scheduled.
func checkRelease7Rows(t *testing.T, s *Store) {
	ctx := context.Background()
	checkRelease5Rows(t, s)
	if notes, err := s.Notes(ctx, "alpha", 7); err != nil || len(notes) != 1 || notes[0].Text != "Ann has a cat named Miso" {
		t.Errorf("notes after the upgrade = %+v, %v", notes, err)
	}
	if rs, err := s.Reminders(ctx, "alpha", 7); err != nil || len(rs) != 0 {
		t.Errorf("reminders after the upgrade = %+v, %v", rs, err)
	}
	if _, ok, err := s.Contact(ctx, "alpha", 7); err != nil || ok {
		t.Errorf("contact after the upgrade: %v, %v", ok, err)
	}
	entries, err := s.Pending(ctx)
	if err != nil || len(entries) == 0 || slices.ContainsFunc(entries, func(e Entry) bool { return e.Scheduled != nil }) {
		t.Errorf("journal after the upgrade = %+v, %v", entries, err)
	}
}

func TestFixtureForEveryReleaseIsChecked(t *testing.T) {
	paths, err := filepath.Glob("testdata/schema-v*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		var v int
		if _, err := fmt.Sscanf(filepath.Base(p), "schema-v%d.sql", &v); err != nil || releaseChecks[v] == nil || v >= len(migrations) {
			t.Errorf("%s: want a releaseChecks entry and a later migration step", p)
		}
	}
}

func TestOpenRejectsNewerSchema(t *testing.T) {
	s, path := openTemp(t)
	if _, err := s.db.Exec(`PRAGMA user_version = 999`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := Open(context.Background(), path)
	if err == nil {
		s2.Close()
		t.Fatal("opened a database from a newer program")
	}
	if !strings.Contains(err.Error(), "999") {
		t.Errorf("error does not name the version: %v", err)
	}
}

// fromFixture creates a database from testdata/schema-v<v>.sql.
func fromFixture(t *testing.T, v int) string {
	t.Helper()
	ddl, err := os.ReadFile(fmt.Sprintf("testdata/schema-v%d.sql", v))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), FileName)
	withDB(t, path, func(db *sql.DB) {
		if _, err := db.Exec(string(ddl)); err != nil {
			t.Fatal(err)
		}
	})
	return path
}

// schemaAt is the schema migrations 1..v create in a new database.
func schemaAt(t *testing.T, v int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	withDB(t, path, func(db *sql.DB) {
		if err := migrate(context.Background(), db, v); err != nil {
			t.Fatal(err)
		}
	})
	return schemaOf(t, path)
}

// schemaOf lists the database's version and definitions, with white space
// normalised (the fixture is indented differently from the Go source).
func schemaOf(t *testing.T, path string) string {
	t.Helper()
	var out strings.Builder
	withDB(t, path, func(db *sql.DB) {
		var version int
		if err := db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "user_version %d\n", version)
		rows, err := db.Query(`SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var typ, name, def string
			if err := rows.Scan(&typ, &name, &def); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "%s %s: %s\n", typ, name, strings.Join(strings.Fields(def), " "))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	})
	return out.String()
}

// rowCounts counts the rows of every table, as "table=n ...".
// rowCounts lists the tables that hold rows, with their counts.
func rowCounts(t *testing.T, path string) string {
	t.Helper()
	var out []string
	withDB(t, path, func(db *sql.DB) {
		rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		var tables []string
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			tables = append(tables, name)
		}
		rows.Close()
		for _, table := range tables {
			var n int
			// The names come from sqlite_master, not from input.
			if err := db.QueryRow(`SELECT count(*) FROM "` + table + `"`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			// An empty table is no lost row: upgrades add new ones empty.
			if n > 0 {
				out = append(out, fmt.Sprintf("%s=%d", table, n))
			}
		}
	})
	return strings.Join(out, " ")
}

// withDB runs fn on a plain connection to path, outside the Store.
func withDB(t *testing.T, path string, fn func(*sql.DB)) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fn(db)
}
