package brain

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestValidToken(t *testing.T) {
	for token, want := range map[string]string{
		"7000000001:AAE5kq0Lx-Yb_u3hQm9PzW2cR7nTfVdJ4sE": "",
		"123:PtYgjmUhBel31iEl2hpChYgCfrL1spNxnyV":        "",
		"": "it is empty",
		"7000000001:AAE5kq0Lx-Yb_u3hQm9PzW2cR7nTfVdJ4sE\n":  "it holds a space or line break",
		"bot7000000001:AAE5kq0Lx-Yb_u3hQm9PzW2cR7nTfVdJ4sE": "the part before the colon must be the bot's numeric id",
		"7000000001:AAE5kq0Lx-Yb_u3hQm9PzW2cR7nTfVdJ4sEx":   "the part after the colon has 36 characters, want 35",
		"7000000001:AAE5kq0Lx-Yb_u3hQm9PzW2cR7nTfVdJ4s!":    "the part after the colon may hold only letters, digits, _ and -",
		"7000000001:AAE5kq0Lx-Yb_u3hQm9PzW2cR7nTfVdJ4sé":    "the part after the colon may hold only letters, digits, _ and -",
	} {
		err := ValidToken(token)
		if want == "" {
			if err != nil {
				t.Errorf("ValidToken(%q) = %v, want nil", token, err)
			}
			continue
		}
		if !errors.Is(err, ErrMalformedToken) || !strings.HasSuffix(err.Error(), ": "+want) {
			t.Errorf("ValidToken(%q) = %v, want ErrMalformedToken ending %q", token, err, want)
		}
		if strings.Contains(err.Error(), "AAE5kq") {
			t.Errorf("ValidToken's error shows the token: %v", err)
		}
	}
}

// TestCheckTokens finds what only the resolved tokens show: two variables
// holding one token, and a variable holding something else than a token.
func TestCheckTokens(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"chat.yaml":    brainWithEnv("Chat", "CHAT_TOKEN"),
		"voice.yaml":   brainWithEnv("Voice", "VOICE_TOKEN"),
		"painter.yaml": brainWithEnv("Painter", "PAINTER_TOKEN"),
		"limited.yaml": brainWithEnv("Limited", "LIMITED_TOKEN"),
		"inline.yaml":  "name: Inline\ntelegram:\n  token: \"" + secretToken + "\"\nsystem_prompt: p\n",
	})
	brains, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"CHAT_TOKEN":    "7000000001:AAE5kq0Lx-Yb_u3hQm9PzW2cR7nTfVdJ4sE",
		"VOICE_TOKEN":   "7000000001:AAE5kq0Lx-Yb_u3hQm9PzW2cR7nTfVdJ4sE", // the chat bot's, by mistake
		"PAINTER_TOKEN": "paste the token here",
		"ALSO_INLINE":   secretToken,
		// LIMITED_TOKEN unset: run skips that bot, it is no conflict.
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	tokens := ResolveTokens(brains, lookup)
	if _, ok := tokens["limited"]; ok || tokens["chat"] != env["CHAT_TOKEN"] || tokens["inline"] != secretToken {
		t.Errorf("ResolveTokens = %d tokens, want chat, inline, painter and voice", len(tokens))
	}
	p := func(name string) string { return dir + "/" + name }
	want := []string{
		p("painter.yaml") + ":3: telegram.token_env: PAINTER_TOKEN does not hold a BotFather token (<bot id>:<35 letters, digits, _ or ->): it holds a space or line break",
		p("voice.yaml") + ":3: telegram.token_env: VOICE_TOKEN holds the same token as CHAT_TOKEN of " + p("chat.yaml") + "; Telegram allows one bot per token",
	}
	got := problems(t, CheckTokens(brains, tokens))
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
	for _, line := range got {
		if strings.Contains(line, "AAE5kq") {
			t.Errorf("a problem shows the token: %s", line)
		}
	}
	if err := CheckTokens(brains[:1], tokens); err != nil {
		t.Errorf("one brain: %v", err)
	}
}
