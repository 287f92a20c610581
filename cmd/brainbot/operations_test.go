package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state/sqlite"
)

// docSection returns the section of the operator's guide (the pages of
// docs/) under the heading title, up to the next heading of its level.
func docSection(t *testing.T, title string) string {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if _, rest, ok := strings.Cut(string(doc), "\n## "+title+"\n"); ok {
			section, _, _ := strings.Cut(rest, "\n## ")
			return section
		}
	}
	t.Fatalf("no page of docs/ has a section %q", title)
	return ""
}

// shellBlocks are the ```sh blocks of a piece of Markdown.
var shellBlocks = regexp.MustCompile("(?s)```sh\n(.*?)```")

// recipeShims stand in, for a recipe run in a temporary root, for what
// needs the real server: sudo runs the command as it is, systemctl notes
// what it was asked, there is no brainbot user to give files to, and date
// gives each archive a time of its own (two runs within one second would
// otherwise name the same archive).
const recipeShims = `set -euo pipefail
sudo() { "$@"; }
systemctl() { echo "$*" >> "$ROOT/systemctl.log"; }
chown() { :; }
install() {
	local args=()
	while (($#)); do case $1 in -o|-g) shift 2 ;; *) args+=("$1"); shift ;; esac; done
	command install "${args[@]}"
}
date() { n=$(( $(cat "$ROOT/date.count" 2>/dev/null || echo 0) + 1 )); echo $n > "$ROOT/date.count"; printf '20250301T1200%02dZ\n' "$n"; }
`

// The backup and restore recipes of docs/backup.md, run as the page
// shows them, in a temporary root: the backup twice in a row (it used to
// fail the second time), then the restore of the first archive, which
// brings back the state of then but not its secrets.
func TestOperationsBackupRecipe(t *testing.T) {
	blocks := shellBlocks.FindAllStringSubmatch(docSection(t, "Back up and restore"), -1)
	if len(blocks) != 2 {
		t.Fatalf("want two shell blocks in Back up and restore (backup, restore), got %d", len(blocks))
	}
	backupRecipe, restoreRecipe := blocks[0][1], blocks[1][1]

	root := t.TempDir()
	path := func(p string) string { return filepath.Join(root, p) }
	moved := strings.NewReplacer("/var/backups/brainbot", path("var/backups/brainbot"),
		"/var/lib/brainbot", path("var/lib/brainbot"), "/etc/brainbot", path("etc/brainbot"))
	data := path("var/lib/brainbot/data")
	envFile := path("etc/brainbot/brainbot.env")
	brain := path("etc/brainbot/brains/poet.yaml")
	conversation := filepath.Join(data, "claude/home/bot-poet/.claude/projects/p/s.jsonl")
	for _, dir := range []string{path("etc/brainbot/panels"), filepath.Dir(brain), filepath.Dir(conversation)} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, envFile, "BRAINBOT_DATA="+data+"\nPOET_TOKEN=the-token-of-then\n")
	bin := brainbotBinary(t)
	sh := func(recipe string) {
		t.Helper()
		cmd := exec.Command("bash", "-c", recipeShims+moved.Replace(recipe))
		cmd.Env = append(os.Environ(), "ROOT="+root, "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s\nrecipe:\n%s", err, out, recipe)
		}
	}
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(data, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	// state is one moment of the service's state: a conversation, its
	// transcript and the brain.
	state := func(n string) {
		t.Helper()
		if err := db.UseSession(ctx, message.Key{Bot: "poet", Chat: 1}, "session-"+n, time.Now()); err != nil {
			t.Fatal(err)
		}
		writeFile(t, conversation, "transcript "+n)
		writeFile(t, brain, "name: Poet "+n+"\n")
	}

	state("1")
	sh(backupRecipe) // the service runs: the database is open
	state("2")
	sh(backupRecipe)
	archives, _ := filepath.Glob(path("var/backups/brainbot/brainbot-*.tar.gz"))
	if len(archives) != 2 {
		t.Fatalf("two backups made %d archives: %v", len(archives), archives)
	}
	if left, _ := os.ReadDir(path("var/backups/brainbot")); len(left) != 2 {
		t.Errorf("the backups left more than their archives: %v", left)
	}
	listing, err := exec.Command("tar", "tzf", archives[0]).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"brainbot.db", "claude/home/bot-poet/.claude/projects/p/s.jsonl", "brains/poet.yaml", "panels/"} {
		if !slices.Contains(strings.Split(string(listing), "\n"), want) {
			t.Errorf("the archive lacks %s:\n%s", want, listing)
		}
	}
	if strings.Contains(string(listing), "brainbot.env") {
		t.Errorf("the archive holds the secrets of brainbot.env:\n%s", listing)
	}

	// Later: more state, a rotated token, the files of the open database.
	state("3")
	if err := db.Close(); err != nil { // the restore stops the service
		t.Fatal(err)
	}
	writeFile(t, envFile, "BRAINBOT_DATA="+data+"\nPOET_TOKEN=the-token-of-now\n")
	writeFile(t, filepath.Join(data, sqlite.FileName+"-answered"), "1\n")
	sh(strings.Replace(restoreRecipe, "brainbot-20250301T120000Z.tar.gz", filepath.Base(archives[0]), 1))

	restored, err := sqlite.Open(ctx, filepath.Join(data, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	if s, _, err := restored.Session(ctx, message.Key{Bot: "poet", Chat: 1}); err != nil || s.ID != "session-1" {
		t.Errorf("restored session %q (%v), want the first backup's", s.ID, err)
	}
	for file, want := range map[string]string{conversation: "transcript 1", brain: "name: Poet 1\n",
		envFile: "BRAINBOT_DATA=" + data + "\nPOET_TOKEN=the-token-of-now\n"} {
		if got, _ := os.ReadFile(file); string(got) != want {
			t.Errorf("%s after the restore: %q, want %q", file, got, want)
		}
	}
	for _, gone := range []string{filepath.Join(data, sqlite.FileName+"-answered"), path("var/backups/brainbot/restore")} {
		if _, err := os.Stat(gone); err == nil {
			t.Errorf("the restore left %s", gone)
		}
	}
	if log, _ := os.ReadFile(path("systemctl.log")); string(log) != "stop brainbot\nstart brainbot\n" {
		t.Errorf("systemctl was asked %q, want stop, then start", log)
	}
}

// The command doctor and version give for installing the CLI is the one
// the Install section runs.
func TestOperationsInstallsTheCLIAsBrainbotSays(t *testing.T) {
	command, _, _ := strings.Cut(installClaude, " (")
	if !strings.Contains(docSection(t, "Install"), "   "+command+"\n") {
		t.Errorf("docs/install.md, Install, does not run %q", command)
	}
}
