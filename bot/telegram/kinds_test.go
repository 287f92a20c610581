package telegram

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"brainbot/message"
)

// Every kind of update brainbot asks Telegram for reads as something it
// handles, from a raw update as Telegram sends it
// (testdata/updates/<kind>.json); and there is a fixture for exactly the
// kinds it asks for, so a kind handled but not asked for (never
// delivered again once left out) or asked for but not read fails here.
func TestEveryAllowedKindDecodes(t *testing.T) {
	dir := filepath.Join("testdata", "updates")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var fixtures []string
	for _, e := range entries {
		fixtures = append(fixtures, strings.TrimSuffix(e.Name(), ".json"))
	}
	if want := slices.Sorted(slices.Values(AllowedUpdates)); !slices.Equal(fixtures, want) {
		t.Fatalf("fixtures %v, want one for each allowed kind %v", fixtures, want)
	}
	for _, kind := range AllowedUpdates {
		raw, err := os.ReadFile(filepath.Join(dir, kind+".json"))
		if err != nil {
			t.Fatal(err)
		}
		u := Decode(message.Envelope{Bot: "b", Me: bot, Raw: raw})
		if u.What != kind || u.Kind == message.Unhandled || u.Kind == message.Unreadable || u.ID == 0 || u.Key.Chat == 0 {
			t.Errorf("%s read as %+v: want a kind brainbot handles, in its chat", kind, u)
		}
	}
}
