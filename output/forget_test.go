package output

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A forgotten user's files go, organised or not, sidecars too; another
// user's, and the same user's with another bot, stay.
func TestRemoveUser(t *testing.T) {
	root := t.TempDir()
	files := []string{
		"audio-output/bot-alpha/user-7/a.mp3", "audio-output/bot-alpha/user-7/a.mp3.json",
		"image-output/bot-alpha/user-7/p.png", "audio-output/bot-alpha-user-7-1-2.mp3",
		"audio-output/bot-alpha/user-17/b.mp3", "audio-output/bot-beta/user-7/c.mp3",
		"audio-output/bot-alpha-user-17-1-2.mp3",
	}
	for _, f := range files {
		path := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(path), DirMode); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("x"), FileMode); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := RemoveUser(root, "alpha", 7); err != nil || n != 4 {
		t.Errorf("removed %d files, %v; want 4", n, err)
	}
	if got := remaining(t, root); !slices.Equal(got, []string{"audio-output/bot-alpha-user-17-1-2.mp3",
		"audio-output/bot-alpha/user-17/b.mp3", "audio-output/bot-beta/user-7/c.mp3"}) {
		t.Errorf("left %q", got)
	}
	if n, err := RemoveUser(root, "", 7); err != nil || n != 1 {
		t.Errorf("every bot: removed %d files, %v; want 1", n, err)
	}
	if _, err := RemoveUser(root, "../x", 7); err == nil {
		t.Error("a bot id that leaves the folder was taken")
	}
}

func remaining(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			out = append(out, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
