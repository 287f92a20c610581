package output

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	safePrefix = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	safeName   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}-1761837902984(-[0-9]+)?\.mp3$`)
)

// A request's prefix is what the earlier system made, survives
// sanitising unchanged, and is what Locate finds the tool's file by.
func TestPrefix(t *testing.T) {
	at := time.UnixMilli(1761837889351)
	p := Prefix("mattyatlas", 7764813487, at)
	if p != "bot-mattyatlas-user-7764813487-1761837889351" {
		t.Fatalf("Prefix = %q", p)
	}
	if SanitizePrefix(p) != p {
		t.Errorf("sanitising changes %q", p)
	}
	dir := t.TempDir()
	saved, err := Save(dir, p, ".png", []byte("x"), at.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if found, err := Locate(dir, p, ".png", ""); err != nil || found != saved {
		t.Errorf("Locate = %q, %v; want %q", found, err, saved)
	}
}

func TestSanitizePrefix(t *testing.T) {
	long := strings.Repeat("a", 10<<10)
	tests := []struct{ in, want string }{
		{"bot-narrator-user-42-1761837889351", "bot-narrator-user-42-1761837889351"},
		{"../../etc/passwd", "etcpasswd"},
		{"/tmp/x", "tmpx"},
		{"", DefaultPrefix},
		{"..", DefaultPrefix},
		{"///", DefaultPrefix},
		{long, strings.Repeat("a", MaxPrefixLen)},
		{"héllo-wörld_✓", "hllo-wrld_"},
		{"日本語", DefaultPrefix},
		{`C:\Windows\x`, "CWindowsx"},
		{"a\x00b\nc", "abc"},
	}
	for _, tt := range tests {
		got := SanitizePrefix(tt.in)
		if got != tt.want {
			t.Errorf("SanitizePrefix(%.40q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSaveHostileNamesStayInside(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, Audio.Dir())
	now := time.UnixMilli(1761837902984)
	for _, name := range []string{"../../etc/passwd", "/tmp/x", "", strings.Repeat("x", 10<<10), "ünï/cödé", "..", "a/../../b"} {
		path, err := Save(dir, name, ".mp3", []byte("data"), now)
		if err != nil {
			t.Fatalf("Save(%.40q): %v", name, err)
		}
		if filepath.Dir(path) != dir {
			t.Errorf("Save(%.40q) = %s, not directly in %s", name, path, dir)
		}
		if base := filepath.Base(path); !safeName.MatchString(base) {
			t.Errorf("Save(%.40q) wrote unsafe name %q", name, filepath.Base(path))
		}
	}
	// Nothing escaped into the root.
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != Audio.Dir() {
		t.Errorf("root holds %v, want only %s", entries, Audio.Dir())
	}
}

func FuzzSanitizePrefix(f *testing.F) {
	for _, s := range []string{"../../etc/passwd", "/tmp/x", "", "..", "ü", strings.Repeat("-", 300), "a/b\\c"} {
		f.Add(s)
	}
	dir := filepath.Join(string(filepath.Separator), "data", "audio-output")
	f.Fuzz(func(t *testing.T, name string) {
		got := SanitizePrefix(name)
		if !safePrefix.MatchString(got) {
			t.Fatalf("SanitizePrefix(%q) = %q: unsafe", name, got)
		}
		if strings.Contains(got, "..") {
			t.Fatalf("SanitizePrefix(%q) = %q contains ..", name, got)
		}
		path := filepath.Join(dir, got+"-1.mp3")
		if ok, err := inside(dir, path); err != nil || !ok || filepath.Dir(path) != dir {
			t.Fatalf("SanitizePrefix(%q) = %q leaves %s", name, got, dir)
		}
	})
}

func TestSaveWritesAtomicallyWithModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Image.Dir())
	now := time.UnixMilli(1700000000123)
	path, err := Save(dir, "bot-a-user-1-99", ".png", []byte("png bytes"), now)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "bot-a-user-1-99-1700000000123.png"); path != want {
		t.Errorf("path = %s, want %s", path, want)
	}
	assertFile(t, path, "png bytes", FileMode)
	assertMode(t, dir, DirMode)

	// Same prefix, same millisecond: a second file, never an overwrite.
	second, err := Save(dir, "bot-a-user-1-99", ".png", []byte("other"), now)
	if err != nil {
		t.Fatal(err)
	}
	if second == path {
		t.Fatalf("second Save reused %s", path)
	}
	assertFile(t, path, "png bytes", FileMode)
	assertFile(t, second, "other", FileMode)
	assertNoTemporaries(t, dir)
}

func TestSaveRejectsBadExtension(t *testing.T) {
	for _, ext := range []string{"", "mp3", "./x", "/.mp3", ".MP3/..", ".toolongext"} {
		if _, err := Save(t.TempDir(), "p", ext, nil, time.Now()); err == nil {
			t.Errorf("Save with ext %q succeeded", ext)
		}
	}
}

func TestLocate(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mod time.Time) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(name), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := time.Unix(1700000000, 0)
	write("bot-a-user-1-100-1000.mp3", base)
	newest := write("bot-a-user-1-100-3000.mp3", base.Add(2*time.Second))
	write("bot-a-user-1-100-2000.mp3", base.Add(time.Second))
	write("bot-a-user-1-100-9000.png", base.Add(time.Hour))  // other ext
	write("bot-a-user-1-1000-9000.mp3", base.Add(time.Hour)) // other prefix sharing digits
	write("bot-a-user-2-100-9000.mp3", base.Add(time.Hour))  // other user
	write("bot-a-user-1-100.mp3", base.Add(time.Hour))       // no "-<ms>"
	if err := os.Mkdir(filepath.Join(dir, "bot-a-user-1-100-dir.mp3"), 0o750); err != nil {
		t.Fatal(err)
	}

	got, err := Locate(dir, "bot-a-user-1-100", ".mp3", "")
	if err != nil || got != newest {
		t.Fatalf("Locate = %q, %v; want %s", got, err, newest)
	}

	older := filepath.Join(dir, "bot-a-user-1-100-1000.mp3")
	for _, tt := range []struct{ reported, want string }{
		{older, older}, // the exact file the tool reported wins
		{filepath.Join(dir, "x", "..", "bot-a-user-1-100-1000.mp3"), older},
		{filepath.Join(dir, "bot-a-user-2-100-9000.mp3"), newest}, // other prefix: ignored
		{filepath.Join(dir, "bot-a-user-1-100-4000.mp3"), newest}, // missing: ignored
		{"/etc/bot-a-user-1-100-1.mp3", newest},                   // outside: ignored
		{filepath.Join(dir, "bot-a-user-1-100-9000.png"), newest}, // other ext: ignored
		{filepath.Join(dir, "bot-a-user-1-100-dir.mp3"), newest},  // not a file
	} {
		got, err := Locate(dir, "bot-a-user-1-100", ".mp3", tt.reported)
		if err != nil || got != tt.want {
			t.Errorf("Locate(reported %s) = %q, %v; want %s", tt.reported, got, err, tt.want)
		}
	}

	if _, err := Locate(dir, "bot-a-user-3-100", ".mp3", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("Locate(no match) error = %v, want ErrNotFound", err)
	}
	if _, err := Locate(filepath.Join(dir, "missing"), "p", ".mp3", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("Locate(missing dir) error = %v, want ErrNotFound", err)
	}
	if _, err := Locate(dir, "", ".mp3", ""); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Locate(empty prefix) error = %v, want a usage error", err)
	}
}

func TestOrganize(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, Audio.Dir())
	now := time.UnixMilli(1700000000000)
	src, err := Save(dir, "bot-narrator-user-42-1", ".mp3", []byte("voice"), now)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(src, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Organize(root, src, Audio, "narrator", 42)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "bot-narrator", "user-42", filepath.Base(src))
	if got != want {
		t.Errorf("Organize = %s, want %s", got, want)
	}
	assertFile(t, got, "voice", FileMode)
	assertMode(t, filepath.Dir(got), DirMode)
	assertMode(t, filepath.Dir(filepath.Dir(got)), DirMode)
	if _, err := os.Stat(src); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("source still exists: %v", err)
	}

	// A file of the same name arrives again: it gets a new name, the first
	// organised file is kept.
	again, err := Save(dir, "bot-narrator-user-42-1", ".mp3", []byte("second"), now)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Organize(root, again, Audio, "narrator", 42)
	if err != nil {
		t.Fatal(err)
	}
	if second == got || filepath.Dir(second) != filepath.Dir(got) {
		t.Errorf("second Organize = %s (first %s)", second, got)
	}
	assertFile(t, got, "voice", FileMode)
	assertFile(t, second, "second", FileMode)
}

func TestOrganizeRejects(t *testing.T) {
	root := t.TempDir()
	src, err := Save(filepath.Join(root, Image.Dir()), "p", ".png", []byte("x"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(root, "elsewhere.png")
	if err := os.WriteFile(outside, []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, path string
		kind       Kind
		bot        string
		user       int64
	}{
		{"bad bot id", src, Image, "../x", 1},
		{"upper-case bot id", src, Image, "Narrator", 1},
		{"empty bot id", src, Image, "", 1},
		{"zero user", src, Image, "a", 0},
		{"wrong kind", src, Audio, "a", 1},
		{"unknown kind", src, Kind(9), "a", 1},
		{"outside", outside, Image, "a", 1},
		{"missing", filepath.Join(root, Image.Dir(), "nope.png"), Image, "a", 1},
	} {
		if got, err := Organize(root, tt.path, tt.kind, tt.bot, tt.user); err == nil {
			t.Errorf("%s: Organize = %s, want an error", tt.name, got)
		}
	}
	assertFile(t, src, "x", FileMode)
}

// Two requests of different users run at once in one folder: each finds and
// files exactly its own file.
func TestConcurrentRequestsKeepTheirFiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, Audio.Dir())
	now := time.UnixMilli(1700000000000)
	const rounds = 50
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds)
	for _, user := range []int64{1, 2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				prefix := fmt.Sprintf("bot-a-user-%d-%d", user, now.UnixMilli()+int64(i))
				content := fmt.Sprintf("user %d round %d", user, i)
				reported, err := Save(dir, prefix, ".mp3", []byte(content), now)
				if err != nil {
					errs <- err
					return
				}
				_ = reported // the bot must not depend on it
				found, err := Locate(dir, prefix, ".mp3", "")
				if err != nil {
					errs <- err
					return
				}
				final, err := Organize(root, found, Audio, "a", user)
				if err != nil {
					errs <- err
					return
				}
				if got, err := os.ReadFile(final); err != nil || string(got) != content {
					errs <- fmt.Errorf("user %d round %d got %q (%v)", user, i, got, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, user := range []string{"user-1", "user-2"} {
		entries, err := os.ReadDir(filepath.Join(dir, "bot-a", user))
		if err != nil || len(entries) != rounds {
			t.Errorf("%s holds %d files (%v), want %d", user, len(entries), err, rounds)
		}
	}
}

func TestPrune(t *testing.T) {
	now := time.Unix(1700000000, 0)
	setup := func(t *testing.T) (string, map[string]string) {
		root := t.TempDir()
		kindDir := filepath.Join(root, Audio.Dir())
		files := map[string]string{ // name → relative path
			"old":     "bot-a/user-1/old.mp3",
			"middle":  "bot-a/user-2/middle.mp3",
			"new":     "bot-b/user-1/new.mp3",
			"flatOld": "flat-old.mp3",
			"flatNew": "flat-new.mp3",
			"stray":   "other/stray.mp3", // not ours: never touched
		}
		ages := map[string]time.Duration{"old": 72 * time.Hour, "middle": 48 * time.Hour, "new": time.Hour, "flatOld": 72 * time.Hour, "flatNew": time.Minute, "stray": 100 * time.Hour}
		for key, rel := range files {
			p := filepath.Join(kindDir, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, make([]byte, 100), 0o640); err != nil {
				t.Fatal(err)
			}
			mod := now.Add(-ages[key])
			if err := os.Chtimes(p, mod, mod); err != nil {
				t.Fatal(err)
			}
			files[key] = p
		}
		return root, files
	}
	tests := []struct {
		name string
		r    Retention
		gone []string
	}{
		// A flat file older than ScratchAge goes whatever the retention:
		// no request will organise it any more.
		{"off", Retention{}, []string{"flatOld"}},
		{"age", Retention{MaxAge: 24 * time.Hour}, []string{"old", "middle", "flatOld"}},
		{"bytes", Retention{MaxBytes: 150}, []string{"old", "middle", "flatOld"}},
		{"bytes keeps all that fit", Retention{MaxBytes: 300}, []string{"flatOld"}},
		{"both", Retention{MaxAge: 60 * time.Hour, MaxBytes: 200}, []string{"old", "flatOld"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, files := setup(t)
			removed, err := Prune(root, Audio, tt.r, now)
			if err != nil {
				t.Fatal(err)
			}
			if removed != len(tt.gone) {
				t.Errorf("removed %d, want %d", removed, len(tt.gone))
			}
			for key, p := range files {
				_, err := os.Stat(p)
				gone := errors.Is(err, os.ErrNotExist)
				want := false
				for _, g := range tt.gone {
					want = want || g == key
				}
				if gone != want {
					t.Errorf("%s: gone = %v, want %v", key, gone, want)
				}
			}
		})
	}
	if n, err := Prune(t.TempDir(), Image, Retention{MaxAge: time.Hour}, now); n != 0 || err != nil {
		t.Errorf("Prune of a missing folder = %d, %v", n, err)
	}
}

// BenchmarkLocate measures a scan of a folder with 10,000 unrelated files
// (target: at most 5 ms/op).
func BenchmarkLocate(b *testing.B) {
	dir := b.TempDir()
	for i := range 10000 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("bot-x-user-%d-1700000000000-1700000000001.mp3", i)), nil, 0o640); err != nil {
			b.Fatal(err)
		}
	}
	want, err := Save(dir, "bot-a-user-1-1700000000000", ".mp3", []byte("x"), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		got, err := Locate(dir, "bot-a-user-1-1700000000000", ".mp3", "")
		if err != nil || got != want {
			b.Fatalf("Locate = %s, %v", got, err)
		}
	}
}

func assertFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || string(got) != content {
		t.Errorf("%s holds %q (%v), want %q", path, got, err, content)
	}
	assertMode(t, path, mode)
}

func assertMode(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != mode {
		t.Errorf("%s mode %v, want %v", path, fi.Mode().Perm(), mode)
	}
}

func assertNoTemporaries(t *testing.T, dir string) {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	if err != nil || len(matches) > 0 {
		t.Errorf("temporary files left: %v (%v)", matches, err)
	}
}

// The admin finds a reported file where it is now: organised under its
// bot and user, or still where the tool wrote it; one at neither place is
// said to be gone.
func TestOrganized(t *testing.T) {
	root := t.TempDir()
	name := Prefix("my-bot", 703, time.UnixMilli(1795749467163)) + "-1795749471761.ogg"
	reported := filepath.Join(root, Audio.Dir(), name)
	if err := os.MkdirAll(filepath.Dir(reported), DirMode); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(reported, []byte("OggS"), FileMode); err != nil {
		t.Fatal(err)
	}
	if where, found := Organized(reported); where != reported || !found {
		t.Errorf("before it is organised: %s, %v", where, found)
	}
	moved, err := Organize(root, reported, Audio, "my-bot", 703)
	if err != nil {
		t.Fatal(err)
	}
	if where, found := Organized(reported); where != moved || !found || where != filepath.Join(root, "audio-output", "bot-my-bot", "user-703", name) {
		t.Errorf("organised: %s, %v; want %s", where, found, moved)
	}
	os.Remove(moved)
	if where, found := Organized(reported); where != reported || found {
		t.Errorf("gone: %s, %v", where, found)
	}
	if where, found := Organized("/etc/passwd"); where != "/etc/passwd" || !found {
		t.Errorf("another file: %s, %v", where, found)
	}
}
