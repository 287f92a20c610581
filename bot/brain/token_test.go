package brain

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// A brain may keep its token in a file, read each time the token is
// resolved: a bot added while brainbot runs needs no restart, and systemd's
// LoadCredential= folder can hold it.
func TestResolveTokenFromFile(t *testing.T) {
	dir := t.TempDir()
	creds := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "poet.token"), secretToken+"\n")
	write(filepath.Join(creds, "poet"), secretToken)
	write(filepath.Join(dir, "empty.token"), " \n")
	write(filepath.Join(dir, "big.token"), strings.Repeat("x", 2000))
	brainPath := filepath.Join(dir, "poet.yaml")
	env := map[string]string{}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	resolve := func(tokenFile string) (string, error) {
		b, err := ParseBytes(brainPath, []byte("name: Poet\ntelegram:\n  token_file: "+tokenFile+"\nsystem_prompt: p\n"))
		if err != nil {
			t.Fatalf("token_file %s: %v", tokenFile, err)
		}
		if got := b.Telegram.String(); got != "token from file "+tokenFile {
			t.Errorf("Telegram.String() = %q", got)
		}
		return b.ResolveToken(lookup)
	}

	for _, tokenFile := range []string{filepath.Join(dir, "poet.token"), "poet.token", "$CREDENTIALS_DIRECTORY/poet", "${CREDENTIALS_DIRECTORY}/poet"} {
		env[CredentialsDirectory] = creds
		if got, err := resolve(tokenFile); err != nil || got != secretToken {
			t.Errorf("token_file %s: %q, %v; want the file's token, trimmed", tokenFile, got, err)
		}
	}

	delete(env, CredentialsDirectory)
	missing := []struct{ tokenFile, want, short string }{
		{"later.token", "no telegram token: token file " + filepath.Join(dir, "later.token") + " (telegram.token_file in " + brainPath + ") does not exist",
			"token file " + filepath.Join(dir, "later.token") + " does not exist"},
		{"empty.token", "no telegram token: token file " + filepath.Join(dir, "empty.token") + " (telegram.token_file in " + brainPath + ") is empty",
			"token file " + filepath.Join(dir, "empty.token") + " is empty"},
		{"$CREDENTIALS_DIRECTORY/poet", "no telegram token: token file $CREDENTIALS_DIRECTORY/poet (telegram.token_file in " + brainPath +
			") names $CREDENTIALS_DIRECTORY, which is not set (systemd sets it for a unit with LoadCredential=)", "$CREDENTIALS_DIRECTORY not set"},
	}
	for _, tt := range missing {
		_, err := resolve(tt.tokenFile)
		var noToken *NoTokenError
		if !errors.Is(err, ErrNoToken) || !errors.As(err, &noToken) || err.Error() != tt.want || noToken.Short != tt.short {
			t.Errorf("token_file %s: %v\nwant ErrNoToken: %s (short %q)", tt.tokenFile, err, tt.want, tt.short)
		}
	}

	// Other problems are errors of their own, naming the brain and the file.
	for tokenFile, want := range map[string]string{
		".":         "telegram.token_file in " + brainPath + ": " + dir + " is a directory, not a regular file",
		"big.token": "telegram.token_file in " + brainPath + ": " + filepath.Join(dir, "big.token") + " holds more than 1024 bytes: not a token file",
	} {
		_, err := resolve(tokenFile)
		if err == nil || errors.Is(err, ErrNoToken) || err.Error() != want {
			t.Errorf("token_file %s: %v, want %q", tokenFile, err, want)
		}
	}
}

// The token a file holds is checked as a variable's is, and two brains
// polling one token through a file and a variable are caught.
// A token_file that is a named pipe would block its reader until someone
// writes into it: check, a reload of the brains, a stop. It is refused at
// once, as anything but a regular file is, naming the file.
func TestTokenFileThatIsAPipe(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "poet.token")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	brainPath := filepath.Join(dir, "poet.yaml")
	b, err := ParseBytes(brainPath, []byte("name: Poet\ntelegram:\n  token_file: poet.token\nsystem_prompt: p\n"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.ResolveToken(func(string) (string, bool) { return "", false })
		done <- err
	}()
	select {
	case err := <-done:
		want := "telegram.token_file in " + brainPath + ": " + fifo + " is a named pipe, not a regular file"
		if err == nil || errors.Is(err, ErrNoToken) || err.Error() != want {
			t.Errorf("a named pipe: %v, want %q", err, want)
		}
	case <-time.After(time.Minute): // a bound on the hang, so the run ends
		// Unblock the reader: it would hold the test binary.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("reading a named pipe as the token file hung")
	}
}

// A token file any user of the machine may read is a leaked token in
// waiting: the admin is told, with the command that fixes it.
func TestTokenFileReadableByAll(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"poet.token": secretToken})
	path := filepath.Join(dir, "poet.token")
	b, err := ParseBytes(filepath.Join(dir, "poet.yaml"), []byte("name: Poet\ntelegram:\n  token_file: poet.token\nsystem_prompt: p\n"))
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(string) (string, bool) { return "", false }
	for mode, want := range map[os.FileMode]string{
		0o600: "",
		0o640: "",
		0o644: "token file " + path + " is readable by every user of this machine (mode 0644): chmod o-r " + path,
	} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if got := b.TokenFileWarning(lookup); got != want {
			t.Errorf("mode %#o: warning %q, want %q", mode, got, want)
		}
		if token, err := b.ResolveToken(lookup); err != nil || token != secretToken {
			t.Errorf("mode %#o: %v; want the token read", mode, err)
		}
	}
}

func TestCheckTokensFromFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"chat.yaml":    brainWithEnv("Chat", "CHAT_TOKEN"),
		"copy.yaml":    "name: Copy\ntelegram:\n  token_file: copy.token\nsystem_prompt: p\n",
		"broken.yaml":  "name: Broken\ntelegram:\n  token_file: broken.token\nsystem_prompt: p\n",
		"copy.token":   secretToken,
		"broken.token": "paste the token here",
	})
	brains, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	tokens := ResolveTokens(brains, func(k string) (string, bool) { return secretToken, k == "CHAT_TOKEN" })
	p := func(name string) string { return filepath.Join(dir, name) }
	want := []string{
		p("broken.yaml") + ":3: telegram.token_file: token file broken.token does not hold a BotFather token (<bot id>:<35 letters, digits, _ or ->): it holds a space or line break",
		p("copy.yaml") + ":3: telegram.token_file: token file copy.token holds the same token as CHAT_TOKEN of " + p("chat.yaml") + "; Telegram allows one bot per token",
	}
	if got := problems(t, CheckTokens(brains, tokens)); !slices.Equal(got, want) {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
}
