package main

import (
	"path/filepath"
	"strings"
	"testing"

	"brainbot/bot/brain"
)

// Every brain init can write is a valid brain, with and without an OpenAI
// key to hear voice messages.
func TestInitTemplatesAreValidBrains(t *testing.T) {
	for kind, tmpl := range brainTemplates {
		for _, listens := range []bool{false, true} {
			var sb strings.Builder
			if err := tmpl.Execute(&sb, newBrainFile{Name: "First Bot", TokenEnv: "FIRST_BOT_TOKEN", Username: "first_bot", Listens: listens}); err != nil {
				t.Fatal(err)
			}
			b, err := brain.ParseBytes(filepath.Join(t.TempDir(), "first-bot.yaml"), []byte(sb.String()))
			if err != nil {
				t.Errorf("%s (listens %v): %v\n%s", kind, listens, err, sb.String())
				continue
			}
			if got := describe(b); !strings.Contains(got, map[string]string{"text": "(text)", "voice": "voice", "pictures": "images"}[kind]) {
				t.Errorf("%s brain does %s", kind, got)
			}
			if b.STT.Enabled != (listens || kind != "text") {
				t.Errorf("%s brain (listens %v): stt.enabled %v", kind, listens, b.STT.Enabled)
			}
		}
	}
}

func TestIDFromUsername(t *testing.T) {
	for username, want := range map[string]string{"Lighthouse_Bot": "lighthouse", "storybot": "story", "bot": "mybot", "my.weird_bot": "my-weird"} {
		if got := idFrom(username); got != want {
			t.Errorf("idFrom(%q) = %q, want %q", username, got, want)
		}
	}
}
