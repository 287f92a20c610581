package output

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWriteSidecar(t *testing.T) {
	root := t.TempDir()
	src, err := Save(filepath.Join(root, Audio.Dir()), "bot-a-user-7-1", ".mp3", []byte("mp3!"), time.UnixMilli(1700000000000))
	if err != nil {
		t.Fatal(err)
	}
	path, err := Organize(root, src, Audio, "a", 7)
	if err != nil {
		t.Fatal(err)
	}
	cost := 0.0015
	created := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	m := Metadata{Brain: "Speaker", BotID: "a", Chat: -100, User: 7, RequestID: "r-1", Created: created, Mode: "speech",
		Text: "Hello there", Model: "tts-1", Voice: "nova", Speed: 1, Format: "mp3", DurationSeconds: 1.5, Bytes: 4, CostUSD: &cost}
	if err := WriteSidecar(path, m); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("sidecar is not JSON: %v\n%s", err, data)
	}
	want := map[string]any{"file": filepath.Base(path), "brain": "Speaker", "bot_id": "a", "chat": -100.0, "user": 7.0,
		"request_id": "r-1", "created": "2026-11-23T10:00:00Z", "mode": "speech", "text": "Hello there", "model": "tts-1",
		"voice": "nova", "speed": 1.0, "format": "mp3", "duration_seconds": 1.5, "bytes": 4.0, "cost_usd": 0.0015}
	if len(got) != len(want) {
		t.Errorf("sidecar %s\nwant the fields %v (unknown ones left out)", data, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	assertMode(t, path+".json", FileMode)
	assertNoTemporaries(t, filepath.Dir(path))
}

// A file and its sidecar are one thing to retention: counted together,
// removed together. A sidecar left alone is pruned like a file.
func TestPruneTakesSidecars(t *testing.T) {
	now := time.Unix(1700000000, 0)
	root := t.TempDir()
	dir := filepath.Join(root, Image.Dir(), "bot-a", "user-1")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	write := func(name string, size int, age time.Duration) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, make([]byte, size), 0o640); err != nil {
			t.Fatal(err)
		}
		mod := now.Add(-age)
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old := write("old.png", 100, 3*time.Hour)
	oldMeta := write("old.png.json", 50, time.Minute) // written after its file
	fresh := write("fresh.png", 100, time.Hour)
	freshMeta := write("fresh.png.json", 50, time.Hour)
	orphan := write("gone.png.json", 50, 5*time.Hour)

	// 350 bytes in all; 200 fit: the orphan (oldest) goes, then old.png
	// with its sidecar.
	removed, err := Prune(root, Image, Retention{MaxBytes: 200}, now)
	if err != nil {
		t.Fatal(err)
	}
	if removed != 2 {
		t.Errorf("removed %d, want 2 (the orphan, old.png)", removed)
	}
	for p, wantGone := range map[string]bool{old: true, oldMeta: true, orphan: true, fresh: false, freshMeta: false} {
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) != wantGone {
			t.Errorf("%s: gone = %v, want %v", filepath.Base(p), !wantGone, wantGone)
		}
	}

	removed, err = Prune(root, Image, Retention{MaxAge: 30 * time.Minute}, now)
	if err != nil || removed != 1 {
		t.Errorf("by age: removed %d, %v; want fresh.png", removed, err)
	}
	if _, err := os.Stat(freshMeta); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("fresh.png's sidecar outlived it: %v", err)
	}
}
