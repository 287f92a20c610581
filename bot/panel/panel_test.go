package panel

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParseDefaults(t *testing.T) {
	dir := t.TempDir()
	p, err := Parse(write(t, dir, "cities.yaml", "members: [chat, voice, painter]\nspeak: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != "cities" || p.Name != "cities" || len(p.Members) != 3 || !p.Speak || p.CommentCap != DefaultCommentCap ||
		p.MaxChars != (Lengths{DefaultAnswer, DefaultComment, DefaultReply}) {
		t.Fatalf("parsed %+v", p)
	}
	if !p.Allowed(5) {
		t.Error("a panel without access rules refuses a user")
	}
}

func TestParseProblemsHaveLines(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "bad.yaml", "name: Bad\nmembers:\n  - chat\n  - chat\n  - Not An Id\ncomment_cap: 9\nmax_chars:\n  answer: 10\nspeek: true\n")
	_, err := Parse(path)
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		path + ":4: members[1]: \"chat\" is listed twice",
		path + ":5: members[2]: \"Not An Id\" is not a brain id",
		path + ":6: comment_cap: must be between 1 and 5, got 9",
		path + ":8: max_chars.answer: must be between 50 and 4000 characters, got 10",
		path + ":9: speek: unknown field",
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("errors lack %q:\n%v", w, err)
		}
	}
	if _, err := Parse(write(t, dir, "one.yaml", "members: [chat]\n")); err == nil || !strings.Contains(err.Error(), "one.yaml:1: members: must list 2 to 6 brain ids, got 1") {
		t.Errorf("one member: %v", err)
	}
	if _, err := Parse(write(t, dir, "none.yaml", "name: x\n")); err == nil || !strings.Contains(err.Error(), "members: is required") {
		t.Errorf("no members: %v", err)
	}
}

func TestLoadDirAndCheckMembers(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", "members: [chat, voice]\n")
	path := write(t, dir, "b.yaml", "members:\n  - chat\n  - ghost\n")
	write(t, dir, "c.yaml", "members: nope\n")
	write(t, dir, ".c.yaml.swp", "junk")
	panels, err := LoadDir(dir)
	if len(panels) != 2 || err == nil || !strings.Contains(err.Error(), "c.yaml:1: members: must be a list") {
		t.Fatalf("LoadDir = %d panels, %v", len(panels), err)
	}
	err = CheckMembers(panels[1], []string{"chat", "voice"})
	if err == nil || err.Error() != path+`:3: members[1]: no brain "ghost" in the brains folder` {
		t.Errorf("CheckMembers = %v", err)
	}
	if ps, err := LoadDir(filepath.Join(dir, "missing")); ps != nil || err != nil {
		t.Errorf("a missing folder: %v %v", ps, err)
	}
}

func TestFor(t *testing.T) {
	a := &Panel{ID: "a", Members: []string{"chat", "voice"}}
	b := &Panel{ID: "b", Members: []string{"voice", "painter"}}
	panels := []*Panel{a, b}
	if p, q, ok := For(panels, "voice", "b should cities ban cars?"); !ok || p != b || q != "should cities ban cars?" {
		t.Errorf("named: %v %q", p, q)
	}
	if p, q, ok := For(panels, "voice", "should cities ban cars?"); !ok || p != a || q != "should cities ban cars?" {
		t.Errorf("first: %v %q", p, q)
	}
	if p, _, ok := For(panels, "painter", "a question"); !ok || p != b {
		t.Errorf("painter: %v", p)
	}
	if _, _, ok := For(panels, "clock", "a question"); ok {
		t.Error("a bot of no panel got one")
	}
}

// The reference documents every field, and the example panel is valid.
func TestREADMEDocumentsEveryField(t *testing.T) {
	data, err := os.ReadFile("../../panels/README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	for _, field := range []string{"`members`", "`name`", "`speak`", "`access.allowed_users`", "`max_chars.answer`", "`.comment`", "`.reply`", "`comment_cap`"} {
		if !strings.Contains(readme, field) {
			t.Errorf("panels/README.md does not document %s", field)
		}
	}
	typ := reflect.TypeFor[Panel]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" && !strings.Contains(readme, "`"+name) {
			t.Errorf("panels/README.md does not document the field %s", name)
		}
	}
	panels, err := LoadDir("../../panels")
	if err != nil || len(panels) == 0 {
		t.Fatalf("example panels: %d, %v", len(panels), err)
	}
}

// An edit that breaks a panel file keeps the panel as it was, the way a
// broken brain edit keeps the bot running; removing the file ends it.
func TestFolderKeepsTheLastGoodVersion(t *testing.T) {
	dir := t.TempDir()
	f := &Folder{Dir: dir}
	path := write(t, dir, "cities.yaml", "members: [chat, voice]\n")
	if got, err := f.Panels(); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0].Members, []string{"chat", "voice"}) {
		t.Fatalf("first read: %v %v", got, err)
	}
	write(t, dir, "cities.yaml", "members: [chat, voice, painter]\nspeek: true\n")
	got, err := f.Panels()
	if err == nil || !strings.Contains(err.Error(), path+":2: speek: unknown field") || !strings.Contains(err.Error(), "keeping the last good version") {
		t.Errorf("broken edit: error %v, want its file:line and that the last good version is kept", err)
	}
	if len(got) != 1 || !reflect.DeepEqual(got[0].Members, []string{"chat", "voice"}) {
		t.Fatalf("broken edit: panels %v, want the last good version", got)
	}
	write(t, dir, "cities.yaml", "members: [chat, painter]\n")
	if got, err := f.Panels(); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0].Members, []string{"chat", "painter"}) {
		t.Fatalf("fixed: %v %v", got, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Panels(); err != nil || len(got) != 0 {
		t.Fatalf("removed: %v %v, want no panel", got, err)
	}
	// A file that was never valid gives no panel, only its problems.
	write(t, dir, "bad.yaml", "members: [chat]\n")
	if got, err := f.Panels(); err == nil || len(got) != 0 || strings.Contains(err.Error(), "keeping") {
		t.Fatalf("never valid: %v %v", got, err)
	}
}
