package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"golang.org/x/term"

	"brainbot/bot/brain"
	"brainbot/bot/telegram"
)

// initBot is `brainbot init`: a first bot, guided. It asks for the
// BotFather token (and shows the bot's @name from getMe), the model
// credential and, for a bot that speaks or draws, the OpenAI key; writes
// an env file (mode 0600) and a first brain from a template; runs doctor
// on them and prints the command that starts the bot. Every question has
// a flag, so it runs unattended; it never overwrites a file.
func (m *Main) initBot(ctx context.Context, args []string) error {
	fs := m.newFlagSet("init", "init [flags]\n\n"+
		"Sets up a first bot: asks what it needs (or takes it from the flags), writes DIR/brainbot.env (mode 0600)\n"+
		"and DIR/brains/ID.yaml, runs doctor on them and prints the command that starts the bot.\n"+
		"It refuses to overwrite either file. Secrets given as flags show in ps: prefer answering the questions.")
	dir := fs.String("dir", ".", "folder to set up: brainbot.env, brains/ and data/ go there")
	token := fs.String("token", "", "the bot's token from @BotFather (/newbot)")
	id := fs.String("id", "", "the brain's id, its file name in brains/ (default: from the bot's @username)")
	kind := fs.String("kind", "", "what the bot answers with: text, voice or pictures")
	credential := fs.String("model-credential", "", "an Anthropic API key (sk-ant-api...), or the token `claude setup-token` prints (sk-ant-oat...)")
	openAIKey := fs.String("openai-key", "", "an OpenAI API key, for a bot that speaks or draws")
	cfg, err := m.loadConfig(fs, args, settingsNamed("TELEGRAM_API_URL", "CLAUDE_CMD"))
	if err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	root, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	envFile := filepath.Join(root, "brainbot.env")
	if err := refuseExisting(envFile); err != nil {
		return err
	}
	q := newQuestions(m.Stdin, m.Stdout)

	if err := q.ask(token, "token", "The bot's token from @BotFather (send it /newbot)"); err != nil {
		return err
	}
	if err := brain.ValidToken(*token); err != nil {
		return usageError{fmt.Errorf("-token: %w", err)}
	}
	username, err := telegram.CheckToken(ctx, cfg.TelegramAPIURL, *token)
	if err != nil {
		return fmt.Errorf("telegram does not take the token (getMe): %w", err)
	}
	fmt.Fprintf(m.Stdout, "Telegram knows this bot as @%s.\n", username)

	if *id == "" {
		*id = idFrom(username)
	}
	if !brain.ValidID(*id) {
		return usageError{fmt.Errorf("-id %q: use lower-case letters, digits, - and _", *id)}
	}
	brainFile := filepath.Join(root, "brains", *id+".yaml")
	if err := refuseExisting(brainFile); err != nil {
		return err
	}
	if err := q.askDefault(kind, "kind", "What should it answer with: text, voice or pictures?", "text", false); err != nil {
		return err
	}
	tmpl, ok := brainTemplates[*kind]
	if !ok {
		return usageError{fmt.Errorf("-kind %q: want text, voice or pictures", *kind)}
	}
	if err := q.ask(credential, "model-credential", "The model's credential: an Anthropic API key, or the token `claude setup-token` prints"); err != nil {
		return err
	}
	if *kind != "text" {
		err = q.ask(openAIKey, "openai-key", "An OpenAI API key: "+map[string]string{
			"voice": "the bot's voice comes", "pictures": "the bot's pictures come"}[*kind]+" from OpenAI")
	} else {
		err = q.optional(openAIKey, "An OpenAI API key, to hear voice messages (empty: none, they get a polite no)")
	}
	if err != nil {
		return err
	}

	b := newBrainFile{Name: displayName(*id), TokenEnv: strings.ToUpper(strings.ReplaceAll(*id, "-", "_")) + "_TOKEN",
		Username: username, Listens: *openAIKey != ""}
	env := []string{
		"BRAINBOT_BRAINS=" + filepath.Join(root, "brains"),
		"BRAINBOT_DATA=" + filepath.Join(root, "data"),
		b.TokenEnv + "=" + *token,
		credentialVar(*credential) + "=" + *credential,
	}
	if *openAIKey != "" {
		env = append(env, "OPENAI_API_KEY="+*openAIKey)
	}
	// What init was told or found of these goes in the env file, so that
	// doctor, chat and run use it as init did.
	for _, v := range [][2]string{{"CLAUDE_CMD", claudeCmd(cfg.ClaudeCmd)}, {"TELEGRAM_API_URL", cfg.TelegramAPIURL}} {
		if v[1] != lookupSetting(v[0]).def {
			env = append(env, v[0]+"="+v[1])
		}
	}
	if err := writeBrain(brainFile, tmpl, b); err != nil {
		return err
	}
	if err := writeNew(envFile, 0o600, envFileHeader+strings.Join(env, "\n")+"\n"); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "Wrote %s (mode 0600: it holds the secrets) and %s.\n\nChecking them with brainbot doctor:\n", envFile, brainFile)
	doctorErr := m.doctor(ctx, []string{"-env-file", envFile})
	fmt.Fprintf(m.Stdout, "\nTry it here first, without Telegram:\n  brainbot chat -env-file %s %s\n", envFile, brainFile)
	fmt.Fprintf(m.Stdout, "Start it, then message @%s in Telegram:\n  brainbot run -env-file %s\n", username, envFile)
	if doctorErr != nil {
		fmt.Fprintln(m.Stdout, "\ndoctor found problems (see above): fix them first.")
	}
	return doctorErr
}

// claudeCmd is the CLI init writes down: the one given (-claude-cmd,
// CLAUDE_CMD), else the claude on the PATH, else the pinned one that
// `make claude-cli` installed in the checkout init runs in.
func claudeCmd(given string) string {
	def := lookupSetting("CLAUDE_CMD").def
	if given != def {
		return given
	}
	if _, err := exec.LookPath(def); err == nil {
		return def
	}
	found, _ := filepath.Glob(filepath.Join(".cache", "claude-code-"+testedClaudeVersion, "node_modules", "@anthropic-ai", "claude-code-*", "claude"))
	if len(found) == 0 {
		return def
	}
	abs, err := filepath.Abs(found[0]) // the env file is read from elsewhere
	if err != nil {
		return def
	}
	return abs
}

// envFileHeader opens the env file init writes.
const envFileHeader = `# brainbot's settings and secrets, written by brainbot init: keep it private.
# brainbot run -env-file <this file> reads it, as systemd's EnvironmentFile= does.
`

// questions asks for what the flags left out, a line each.
type questions struct {
	in  *bufio.Reader
	out io.Writer
	// typed: a person answers, whose Enter ends the question's line.
	typed bool
	// hidden reads a line from the terminal without showing it; nil
	// unless typed.
	hidden func() ([]byte, error)
}

func newQuestions(in io.Reader, out io.Writer) *questions {
	q := &questions{in: bufio.NewReader(in), out: out, typed: isTerminal(in)}
	if f, ok := in.(*os.File); ok && q.typed {
		// A terminal hands over a line a read: nothing typed after it
		// waits in q.in's buffer, so the two readers can take turns.
		q.hidden = func() ([]byte, error) { return term.ReadPassword(int(f.Fd())) }
	}
	return q
}

// ask sets *value from the next line of input unless a flag set it; no
// answer is a usage error naming the flag. The answer is a secret: a
// terminal does not show it as it is typed.
func (q *questions) ask(value *string, flag, question string) error {
	return q.askDefault(value, flag, question, "", true)
}

func (q *questions) askDefault(value *string, flag, question, def string, secret bool) error {
	if *value != "" {
		return nil
	}
	if def != "" {
		question += " [" + def + "]"
	}
	err := q.read(value, question, secret)
	if *value == "" {
		*value = def
	}
	if *value == "" {
		if err != nil {
			return err
		}
		return usageError{fmt.Errorf("no answer: give -%s", flag)}
	}
	return nil
}

// optional asks for a secret that may be left unanswered.
func (q *questions) optional(value *string, question string) error {
	if *value != "" {
		return nil
	}
	return q.read(value, question, true)
}

// read asks question and sets *value to the answer ("" at the end of the
// input).
func (q *questions) read(value *string, question string, secret bool) error {
	fmt.Fprintf(q.out, "%s: ", question)
	var line string
	var err error
	if secret && q.hidden != nil {
		var b []byte
		b, err = q.hidden()
		line = string(b)
		fmt.Fprintln(q.out) // the Enter typed was not shown either
	} else {
		line, err = q.in.ReadString('\n')
	}
	if !q.typed {
		fmt.Fprintln(q.out)
	}
	*value = strings.TrimSpace(line)
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// refuseExisting fails for a file that is there: init never overwrites.
func refuseExisting(path string) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s exists: init never overwrites a file (move it away, or choose another -dir or -id)", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, mode os.FileMode, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeBrain(path string, tmpl *template.Template, b newBrainFile) error {
	var sb strings.Builder
	if err := tmpl.Execute(&sb, b); err != nil {
		return err
	}
	return writeNew(path, 0o640, sb.String())
}

// credentialVar is the variable the model credential goes in: the
// subscription's token from `claude setup-token`, or an API key.
func credentialVar(credential string) string {
	if strings.HasPrefix(credential, "sk-ant-oat") {
		return "CLAUDE_CODE_OAUTH_TOKEN"
	}
	return "ANTHROPIC_API_KEY"
}

// idFrom makes a brain id of a bot's @username: "Lighthouse_Bot" gives
// "lighthouse".
func idFrom(username string) string {
	id := strings.ToLower(username)
	id = strings.TrimSuffix(strings.TrimSuffix(id, "bot"), "_")
	id = notIDChars.ReplaceAllString(id, "-")
	if id = strings.Trim(id, "-_"); id == "" {
		return "mybot"
	}
	return id
}

var notIDChars = regexp.MustCompile(`[^a-z0-9_-]+`)

// displayName is the brain's name: its id, capitalised.
func displayName(id string) string {
	words := strings.FieldsFunc(id, func(r rune) bool { return r == '-' || r == '_' })
	for i, w := range words {
		words[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	return strings.Join(words, " ")
}

// newBrainFile is what a brain template is filled with.
type newBrainFile struct {
	Name, TokenEnv, Username string
	// Listens: there is an OpenAI key to transcribe voice messages with.
	Listens bool
}

// brainTemplates are the first brains init writes, by -kind: the example
// brains (brains/) cut to what a first bot needs. Their fields are [[ ]]:
// {{ }} is the system prompt's own (sysprompt).
var brainTemplates = map[string]*template.Template{
	"text": template.Must(template.New("text").Delims("[[", "]]").Parse(brainHead + `
limits:
  per_user_per_day: 50          # 0 = unlimited
[[- if not .Listens]]

stt:
  enabled: false                # voice messages in need OPENAI_API_KEY
[[- end]]
`)),
	"voice": template.Must(template.New("voice").Delims("[[", "]]").Parse(brainHead + `  Your replies are read aloud: write plain spoken sentences, no lists,
  Markdown, emoji or URLs.

limits:
  per_user_per_day: 30

tts:
  enabled: true                 # every answer is a voice note...
  user_toggle: true             # ...unless the user switches to text with /voice
  voice: nova
  format: opus
`)),
	"pictures": template.Must(template.New("pictures").Delims("[[", "]]").Parse(brainHead + `  When the user asks for a picture, say in a sentence what you will draw.

limits:
  per_user_per_day: 20          # pictures cost money: keep this low

image:
  enabled: true                 # a message with a keyword gets a picture
  model: dall-e-2
  size: 256x256
`)),
}

// brainHead starts every template: who the bot is. Every field is
// explained in brains/README.md.
const brainHead = `# [[.Name]]: @[[.Username]] in Telegram. Written by brainbot init; every
# field is explained in brains/README.md of brainbot's repository. Edit it
# while brainbot runs: the next message uses it.
name: [[.Name]]
description: A friendly assistant.
greeting: "Hello! I am [[.Name]]. Ask me anything."

telegram:
  token_env: [[.TokenEnv]]

system_prompt: |
  You are [[.Name]], a friendly assistant talking with {{user_first_name}} in
  Telegram. Answer briefly and warmly.
`
