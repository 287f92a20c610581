package brain

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// minimal is the smallest valid brain; rows below extend it from line 5.
const minimal = `name: Narrator
telegram:
  token_env: NARRATOR_TOKEN
system_prompt: You tell stories.
`

// TestParseRules has one row per validation rule: a broken snippet and the
// exact problems `brainbot check` prints for it.
func TestParseRules(t *testing.T) {
	tests := []struct {
		name string
		file string // defaults to t.yaml
		yaml string
		want []string
	}{
		// The file as a whole.
		{name: "empty file", yaml: "", want: []string{
			"t.yaml:1: empty file; a brain needs at least name, telegram and system_prompt"}},
		{name: "comments only", yaml: "# nothing yet\n", want: []string{
			"t.yaml:1: empty file; a brain needs at least name, telegram and system_prompt"}},
		{name: "not a mapping", yaml: "# a list\n- name: Narrator\n", want: []string{
			"t.yaml:2: a brain file must be a mapping of fields (name: ..., system_prompt: ...), got a list"}},
		{name: "a bare string", yaml: "hello\n", want: []string{
			`t.yaml:1: a brain file must be a mapping of fields (name: ..., system_prompt: ...), got "hello"`}},
		{name: "syntax error", yaml: minimal + "tts:\n  voice: nova\n   speed: 1\n", want: []string{
			"t.yaml:7: YAML syntax: mapping values are not allowed in this context (is this line indented more than the field above it? A value holding \": \" needs quotes)"}},
		// yaml.v3 reports some syntax errors on the line where the
		// enclosing block starts, or the one before it; these are the
		// lines the author must fix.
		{name: "field indented less than the one above", yaml: minimal + "tts:\n  enabled: true\n voice: nova\n  speed: 1.0\n", want: []string{
			"t.yaml:7: YAML syntax: did not find expected key (is this line indented like the fields beside it?)"}},
		{name: "field indented less after a deeper one", yaml: minimal + "tts:\n    enabled: true\n  voice: nova\n", want: []string{
			"t.yaml:7: YAML syntax: did not find expected key (is this line indented like the fields beside it?)"}},
		{name: "list item indented less", yaml: minimal + "access:\n  allowed_users:\n    - 11111\n   - 22222\n", want: []string{
			"t.yaml:8: YAML syntax: did not find expected key (is this line indented like the fields beside it?)"}},
		{name: "unclosed list", yaml: minimal + "image:\n  enabled: true\n  keywords: [draw, paint\n  model: dall-e-3\n", want: []string{
			"t.yaml:7: YAML syntax: did not find expected ',' or ']'"}},
		{name: "unclosed quote", yaml: minimal + "messages:\n  error: \"Oops, try again.\n  busy: Wait.\n", want: []string{
			"t.yaml:6: YAML syntax: found unexpected end of stream (a quote opened on this line is never closed: end the value with the same quote, \" or ')"}},
		{name: "unclosed single quote", yaml: minimal + "greeting: 'Hello there\ndescription: A bot.\n", want: []string{
			"t.yaml:5: YAML syntax: found unexpected end of stream (a quote opened on this line is never closed: end the value with the same quote, \" or ')"}},
		// A tab in the indentation gets the same words wherever it is,
		// however yaml.v3 words it.
		{name: "tab indentation", yaml: minimal + "tts:\n\tvoice: nova\n", want: []string{
			"t.yaml:6: YAML syntax: this line is indented with a tab: indent with spaces, not tabs"}},
		{name: "tab indentation in a block of text", yaml: "name: Narrator\ntelegram:\n  token_env: NARRATOR_TOKEN\nsystem_prompt: |\n\tYou tell stories.\n", want: []string{
			"t.yaml:5: YAML syntax: this line is indented with a tab: indent with spaces, not tabs"}},
		{name: "tab indentation after spaces", yaml: minimal + "tts:\n  enabled: true\n\tvoice: nova\n", want: []string{
			"t.yaml:7: YAML syntax: this line is indented with a tab: indent with spaces, not tabs"}},
		{name: "a value starting with @", yaml: minimal + "greeting: @everyone hello\n", want: []string{
			"t.yaml:5: YAML syntax: found character that cannot start any token (a value starting with @ or ` needs quotes)"}},
		{name: "two documents", yaml: minimal + "---\nname: Other\n", want: []string{
			"t.yaml:5: more than one YAML document (---); a brain file holds one"}},
		{name: "bad id", file: "Story Teller.yaml", yaml: minimal, want: []string{
			`Story Teller.yaml:1: bot id "Story Teller" (the file name) may use only a-z, 0-9, _ and -`}},
		{name: "not a yaml name", file: "narrator.json", yaml: minimal, want: []string{
			"narrator.json:1: a brain file name must end in .yaml or .yml"}},

		// Decoding.
		{name: "unknown field", yaml: minimal + "colour: blue\n", want: []string{
			"t.yaml:5: colour: unknown field; want one of name, description, greeting, telegram, system_prompt, timezone, access, stream, rich, groups, limits, claude, mcp_servers, tools, tts, stt, image, buttons, memory, reminders, check_ins, messages"}},
		// A misspelt field: the field it is closest to.
		{name: "misspelt field", yaml: "name: Narrator\ntelegram:\n  token_env: NARRATOR_TOKEN\nsytem_prompt: You tell stories.\n", want: []string{
			"t.yaml:1: system_prompt: is required (who the bot is and how it answers)",
			"t.yaml:4: sytem_prompt: unknown field; did you mean system_prompt?"}},
		{name: "misspelt section", yaml: minimal + "limts:\n  per_user_per_day: 5\n", want: []string{
			"t.yaml:5: limts: unknown field; did you mean limits?"}},
		{name: "misspelt nested field", yaml: minimal + "tts:\n  enabeld: true\n", want: []string{
			"t.yaml:6: tts.enabeld: unknown field; did you mean enabled?"}},
		{name: "rich setting", yaml: minimal + "rich: sometimes\n", want: []string{
			`t.yaml:5: rich: must be one of auto, off, always; got "sometimes"`}},
		{name: "unknown nested field", yaml: minimal + "tts:\n  pitch: 2\n", want: []string{
			"t.yaml:6: tts.pitch: unknown field; want one of enabled, voice, speed, model, format, send_text_too, user_toggle, reply_to_voice, max_chars"}},
		// A field of a section written at the wrong level: where it goes.
		{name: "section field indented one level too little", yaml: minimal + "limits:\n  daily_usd: 5\nper_user_per_day: 50\n", want: []string{
			"t.yaml:7: per_user_per_day: unknown field here; did you mean limits.per_user_per_day? Write it indented under limits:"}},
		{name: "field of another section", yaml: minimal + "tts:\n  enabled: true\n  daily_usd: 5\n", want: []string{
			"t.yaml:7: tts.daily_usd: unknown field here; did you mean limits.daily_usd? Write it indented under limits:"}},
		{name: "field of several sections", yaml: minimal + "timeout: 30s\n", want: []string{
			"t.yaml:5: timeout: unknown field here; did you mean claude.timeout or tools.timeout? Write it indented under its section"}},
		{name: "top-level field indented", yaml: minimal + "tts:\n  enabled: true\n  greeting: Hi\n", want: []string{
			"t.yaml:7: tts.greeting: unknown field here; it is a field of the whole file: write it at the top level, not indented"}},
		{name: "field of an MCP server", yaml: minimal + "command: python3\n", want: []string{
			"t.yaml:5: command: unknown field here; did you mean mcp_servers.<name>.command? Write it indented under mcp_servers.<name>:"}},
		{name: "field twice", yaml: minimal + "name: Other\n", want: []string{
			"t.yaml:5: name: defined twice (first at line 1)"}},
		{name: "wrong type: number", yaml: minimal + "limits:\n  per_user_per_day: many\n", want: []string{
			`t.yaml:6: limits.per_user_per_day: must be a whole number, got "many"`}},
		{name: "wrong type: bool", yaml: minimal + "tts:\n  enabled: yes\n", want: []string{
			`t.yaml:6: tts.enabled: must be true or false, got "yes"`}},
		{name: "wrong type: float", yaml: minimal + "tts:\n  speed: fast\n", want: []string{
			`t.yaml:6: tts.speed: must be a number, got "fast"`}},
		{name: "wrong type: text", yaml: minimal + "description: [a, b]\n", want: []string{
			"t.yaml:5: description: must be text, got a list"}},
		{name: "wrong type: list", yaml: minimal + "access:\n  allowed_users: 11111\n", want: []string{
			`t.yaml:6: access.allowed_users: must be a list, got "11111"`}},
		{name: "wrong type: section", yaml: minimal + "tts: on\n", want: []string{
			`t.yaml:5: tts: must be a mapping of fields, got "on"`}},

		// Required fields.
		{name: "name missing", yaml: "telegram:\n  token_env: T\nsystem_prompt: p\n", want: []string{
			"t.yaml:1: name: is required (the bot's display name)"}},
		{name: "name blank", yaml: "name: \"  \"\ntelegram:\n  token_env: T\nsystem_prompt: p\n", want: []string{
			"t.yaml:1: name: is required (the bot's display name)"}},
		{name: "system_prompt missing", yaml: "name: N\ntelegram:\n  token_env: T\n", want: []string{
			"t.yaml:1: system_prompt: is required (who the bot is and how it answers)"}},
		{name: "system_prompt empty", yaml: "name: N\ntelegram:\n  token_env: T\nsystem_prompt: \"\"\n", want: []string{
			"t.yaml:4: system_prompt: is required (who the bot is and how it answers)"}},

		// Telegram token source.
		{name: "no telegram section", yaml: "name: N\nsystem_prompt: p\n", want: []string{
			"t.yaml:1: telegram: needs token_env (the environment variable holding the BotFather token), token_file (a file holding it) or token"}},
		{name: "telegram without token", yaml: "name: N\ntelegram: {}\nsystem_prompt: p\n", want: []string{
			"t.yaml:2: telegram: needs token_env (the environment variable holding the BotFather token), token_file (a file holding it) or token"}},
		{name: "token_env and token", yaml: "name: N\ntelegram:\n  token_env: T\n  token: \"123:abc\"\nsystem_prompt: p\n", want: []string{
			"t.yaml:3: telegram: set only one of token_env, token_file and token"}},
		{name: "token_env and token_file", yaml: "name: N\ntelegram:\n  token_env: T\n  token_file: /etc/brainbot/tokens/n\nsystem_prompt: p\n", want: []string{
			"t.yaml:3: telegram: set only one of token_env, token_file and token"}},
		{name: "token_file with another variable", yaml: "name: N\ntelegram:\n  token_file: $HOME/token\nsystem_prompt: p\n", want: []string{
			`t.yaml:3: telegram.token_file: may name only $CREDENTIALS_DIRECTORY (systemd's LoadCredential=), at its start: $CREDENTIALS_DIRECTORY/NAME; got "$HOME/token"`}},
		{name: "token_file holding a token", yaml: "name: N\ntelegram:\n  token_file: \"" + secretToken + "\"\nsystem_prompt: p\n", want: []string{
			"t.yaml:3: telegram.token_file: holds a BotFather token, not the path of a file holding one; the token itself goes in token"}},
		{name: "token_env not a name", yaml: "name: N\ntelegram:\n  token_env: \"123456:AAH-secret\"\nsystem_prompt: p\n", want: []string{
			"t.yaml:3: telegram.token_env: must be an environment variable name such as NARRATOR_TOKEN (letters, digits, _); a token itself goes in token"}},

		{name: "token too short", yaml: "name: N\ntelegram:\n  token: \"123456789:AAHsecret\"\nsystem_prompt: p\n", want: []string{
			"t.yaml:3: telegram.token: is not a BotFather token (<bot id>:<35 letters, digits, _ or ->): the part after the colon has 9 characters, want 35"}},
		{name: "token without bot id", yaml: "name: N\ntelegram:\n  token: \"AAHsecret-token-value_0123456789abc\"\nsystem_prompt: p\n", want: []string{
			"t.yaml:3: telegram.token: is not a BotFather token (<bot id>:<35 letters, digits, _ or ->): it has no colon"}},
		{name: "token with a space", yaml: "name: N\ntelegram:\n  token: \"123456789: AAHsecret-token-value_0123456789ab\"\nsystem_prompt: p\n", want: []string{
			"t.yaml:3: telegram.token: is not a BotFather token (<bot id>:<35 letters, digits, _ or ->): it holds a space or line break"}},

		// Access and limits.
		{name: "allowed user zero", yaml: minimal + "access:\n  allowed_users:\n    - 0\n", want: []string{
			"t.yaml:7: access.allowed_users[0]: must be a Telegram user id, or a group's or channel's id (negative) for the messages sent as that chat, got 0"}},
		{name: "limit negative", yaml: minimal + "limits:\n  per_user_per_day: -1\n", want: []string{
			"t.yaml:6: limits.per_user_per_day: must be 0 (unlimited) or more, got -1"}},

		// Claude.
		{name: "timeout not a duration", yaml: minimal + "claude:\n  timeout: soon\n", want: []string{
			`t.yaml:6: claude.timeout: must be a duration such as 120s or 2m, got "soon"`}},
		{name: "timeout without unit", yaml: minimal + "claude:\n  timeout: 120\n", want: []string{
			`t.yaml:6: claude.timeout: must be a duration such as 120s or 2m, got "120"`}},
		{name: "timeout too short", yaml: minimal + "claude:\n  timeout: 0s\n", want: []string{
			"t.yaml:6: claude.timeout: must be between 1s and 1h, got 0s"}},
		{name: "timeout too long", yaml: minimal + "claude:\n  timeout: 2h\n", want: []string{
			"t.yaml:6: claude.timeout: must be between 1s and 1h, got 2h0m0s"}},
		{name: "buttons expire too soon", yaml: minimal + "buttons:\n  max_age: 30s\n", want: []string{
			"t.yaml:6: buttons.max_age: must be between 1m and 720h, got 30s"}},
		{name: "buttons kept too long", yaml: minimal + "buttons:\n  max_age: 721h\n", want: []string{
			"t.yaml:6: buttons.max_age: must be between 1m and 720h, got 721h0m0s"}},
		{name: "memory with too few turns", yaml: minimal + "claude:\n  max_turns: 1\nmemory:\n  enabled: true\n", want: []string{
			"t.yaml:6: claude.max_turns: must be at least 2 when memory is on (the model keeps a note with a tool call, then answers), got 1"}},
		{name: "memory bounds out of range", yaml: minimal + "memory:\n  enabled: true\n  max_notes: 0\n  max_note_chars: 1001\n", want: []string{
			"t.yaml:7: memory.max_notes: must be between 1 and 50 (the notes kept per user; default 30), got 0",
			"t.yaml:8: memory.max_note_chars: must be between 1 and 1000 (the characters of one note; default 200), got 1001"}},
		{name: "reminders with too few turns", yaml: minimal + "claude:\n  max_turns: 1\nreminders:\n  enabled: true\n", want: []string{
			"t.yaml:6: claude.max_turns: must be at least 2 when reminders are on (the model keeps one with a tool call, then answers), got 1"}},
		{name: "schedule bounds out of range", yaml: minimal + "reminders:\n  max_pending: 51\n  max_ahead: 30s\ncheck_ins:\n  quiet_for: 0s\n  per_week: 15\n", want: []string{
			"t.yaml:6: reminders.max_pending: must be between 1 and 50 (the reminders a user may have waiting; default 20), got 51",
			"t.yaml:7: reminders.max_ahead: must be between 1m and 87600h (how far ahead a reminder may be; default 8760h, a year), got 30s",
			"t.yaml:9: check_ins.quiet_for: must be at least 1s (how long a user is quiet before the persona writes first; default 72h), got 0s",
			"t.yaml:10: check_ins.per_week: must be between 1 and 14 (the check-ins one user gets in any 7 days; default 2), got 15"}},
		{name: "quiet hours not hours", yaml: minimal + "check_ins:\n  quiet_hours: 22-8\n", want: []string{
			`t.yaml:6: check_ins.quiet_hours: must be hours such as "22:00-08:00" (from-to, in the user's time zone) or none, got "22-8"`}},
		{name: "max turns zero", yaml: minimal + "claude:\n  max_turns: 0\n", want: []string{
			"t.yaml:6: claude.max_turns: must be between 1 and 100, got 0"}},
		{name: "max turns too few for voice", yaml: minimal + "claude:\n  max_turns: 1\ntts:\n  enabled: true\n", want: []string{
			"t.yaml:6: claude.max_turns: must be at least 2 when voice or picture replies are on (the tool call and the answer to its result), got 1"}},
		{name: "max budget negative", yaml: minimal + "claude:\n  max_budget_usd: -1\n", want: []string{
			"t.yaml:6: claude.max_budget_usd: must be 0 (no limit) or more, got -1"}},

		// TTS.
		{name: "tts voice", yaml: minimal + "tts:\n  voice: bob\n", want: []string{
			`t.yaml:6: tts.voice: must be one of alloy, ash, ballad, coral, echo, fable, onyx, nova, sage, shimmer, verse; got "bob"`}},
		{name: "tts max_chars negative", yaml: minimal + "tts:\n  max_chars: -1\n", want: []string{
			"t.yaml:6: tts.max_chars: must be 0 (no bound) or a number of characters, got -1; leave the field out for 2700 (about three minutes of speech)"}},
		{name: "tts speed too fast", yaml: minimal + "tts:\n  speed: 4.5\n", want: []string{
			"t.yaml:6: tts.speed: must be between 0.25 and 4.0, got 4.5"}},
		{name: "tts speed too slow", yaml: minimal + "tts:\n  speed: 0.1\n", want: []string{
			"t.yaml:6: tts.speed: must be between 0.25 and 4.0, got 0.1"}},
		{name: "tts speed explicit zero", yaml: minimal + "tts:\n  speed: 0\n", want: []string{
			"t.yaml:6: tts.speed: must be between 0.25 and 4.0, got 0"}},
		{name: "tts speed not a number", yaml: minimal + "tts:\n  speed: .nan\n", want: []string{
			"t.yaml:6: tts.speed: must be between 0.25 and 4.0, got NaN"}},
		{name: "tts model", yaml: minimal + "tts:\n  model: tts-2\n", want: []string{
			`t.yaml:6: tts.model: must be one of tts-1, tts-1-hd, gpt-4o-mini-tts; got "tts-2"`}},
		{name: "stt model", yaml: minimal + "stt:\n  model: whisper-2\n", want: []string{
			`t.yaml:6: stt.model: must be one of gpt-4o-mini-transcribe, gpt-4o-transcribe, whisper-1; got "whisper-2"`}},
		{name: "stt enabled is true or false", yaml: minimal + "stt:\n  enabled: no\n", want: []string{
			`t.yaml:6: stt.enabled: must be true or false, got "no"`}},
		{name: "too_big has {max}, not {reset}", yaml: minimal + "messages:\n  too_big: Too big until {reset}.\n", want: []string{
			`t.yaml:6: messages.too_big: unknown placeholder {reset}; this text may use {max}`}},
		{name: "tts format", yaml: minimal + "tts:\n  format: wav\n", want: []string{
			`t.yaml:6: tts.format: must be one of mp3, opus; got "wav"`}},

		// Image.
		{name: "image model", yaml: minimal + "image:\n  model: dall-e-4\n", want: []string{
			`t.yaml:6: image.model: must be one of dall-e-2, dall-e-3, gpt-image-1; got "dall-e-4"`}},
		{name: "image size for dall-e-2", yaml: minimal + "image:\n  size: 1024x1792\n", want: []string{
			`t.yaml:6: image.size: must be one of 256x256, 512x512, 1024x1024 for dall-e-2; got "1024x1792"`}},
		{name: "image size for dall-e-3", yaml: minimal + "image:\n  model: dall-e-3\n  size: 256x256\n", want: []string{
			`t.yaml:7: image.size: must be one of 1024x1024, 1792x1024, 1024x1792 for dall-e-3; got "256x256"`}},
		{name: "image size for gpt-image-1", yaml: minimal + "image:\n  model: gpt-image-1\n  size: 1792x1024\n", want: []string{
			`t.yaml:7: image.size: must be one of 1024x1024, 1536x1024, 1024x1536, auto for gpt-image-1; got "1792x1024"`}},
		{name: "image quality for dall-e-2", yaml: minimal + "image:\n  quality: hd\n", want: []string{
			"t.yaml:6: image.quality: must be left out for dall-e-2 (it has one quality)"}},
		{name: "image quality for dall-e-3", yaml: minimal + "image:\n  model: dall-e-3\n  quality: high\n", want: []string{
			`t.yaml:7: image.quality: must be one of standard, hd for dall-e-3; got "high"`}},
		{name: "image quality for gpt-image-1", yaml: minimal + "image:\n  model: gpt-image-1\n  quality: hd\n", want: []string{
			`t.yaml:7: image.quality: must be one of low, medium, high, auto for gpt-image-1; got "hd"`}},
		{name: "image style for dall-e-2", yaml: minimal + "image:\n  style: vivid\n", want: []string{
			"t.yaml:6: image.style: must be left out for dall-e-2 (only dall-e-3 has styles)"}},
		{name: "image style for dall-e-3", yaml: minimal + "image:\n  model: dall-e-3\n  style: cartoon\n", want: []string{
			`t.yaml:7: image.style: must be one of vivid, natural for dall-e-3; got "cartoon"`}},
		{name: "image keywords an empty list", yaml: minimal + "image:\n  enabled: true\n  keywords: []\n", want: []string{
			"t.yaml:7: image.keywords: must list at least one word or phrase; leave the field out for the defaults (image, picture, photo, draw, generate, \"create a\")"}},
		// Messages.
		{name: "misspelt placeholder", yaml: minimal + "messages:\n  limit: |\n    That's all for today.\n    Come back {rest}.\n", want: []string{
			"t.yaml:6: messages.limit: unknown placeholder {rest}; this text may use {reset}"}},
		{name: "placeholder of another message", yaml: minimal + "messages:\n  busy: \"Still busy; try again {reset}.\"\n", want: []string{
			"t.yaml:6: messages.busy: unknown placeholder {reset}; this text has no placeholders (only messages.limit has {reset}; messages.spending_cap has {reset}; messages.too_big has {max})"}},
		{name: "placeholders nobody replaces", yaml: minimal + "messages:\n  denied: \"Sorry {name}, ask {owner} for access.\"\n", want: []string{
			"t.yaml:6: messages.denied: unknown placeholders {name}, {owner}; this text has no placeholders (only messages.limit has {reset}; messages.spending_cap has {reset}; messages.too_big has {max})"}},
		{name: "image keyword empty", yaml: minimal + "image:\n  keywords: [draw, \" \"]\n", want: []string{
			"t.yaml:6: image.keywords[1]: must not be empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := cmpOr(tt.file, "t.yaml")
			b, err := ParseBytes(file, []byte(tt.yaml))
			if b != nil {
				t.Errorf("ParseBytes returned a brain along with errors: %+v", b)
			}
			if got := problems(t, err); !slices.Equal(got, tt.want) {
				t.Errorf("problems:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// problems returns err's problems as brainbot check prints them, failing
// unless err is an Errors.
func problems(t *testing.T, err error) []string {
	t.Helper()
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v (%T) is not Errors", err, err)
	}
	var lines []string
	for _, e := range errs {
		lines = append(lines, e.Error())
	}
	return lines
}

func TestParseReportsEveryProblem(t *testing.T) {
	src := `name: Narrator
telegram:
  token_env: NARRATOR_TOKEN
tts:
  voice: bob
  speed: 9
image:
  model: dall-e-3
  size: 256x256
claude:
  timeout: soon
`
	_, err := ParseBytes("brains/narrator.yaml", []byte(src))
	want := []string{
		"brains/narrator.yaml:1: system_prompt: is required (who the bot is and how it answers)",
		`brains/narrator.yaml:5: tts.voice: must be one of alloy, ash, ballad, coral, echo, fable, onyx, nova, sage, shimmer, verse; got "bob"`,
		"brains/narrator.yaml:6: tts.speed: must be between 0.25 and 4.0, got 9",
		`brains/narrator.yaml:9: image.size: must be one of 1024x1024, 1792x1024, 1024x1792 for dall-e-3; got "256x256"`,
		`brains/narrator.yaml:11: claude.timeout: must be a duration such as 120s or 2m, got "soon"`,
	}
	if got := problems(t, err); !slices.Equal(got, want) {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
	if err.Error() != strings.Join(want, "\n") {
		t.Errorf("Error() = %q, want the problems one per line", err.Error())
	}
	var first *Error
	if !errors.As(err, &first) || first.Line != 1 || first.Field != "system_prompt" {
		t.Errorf("errors.As(*Error) = %+v, want the first problem", first)
	}
}

func TestParseDefaults(t *testing.T) {
	b, err := ParseBytes("brains/narrator.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	want := Brain{
		ID:           "narrator",
		Path:         "brains/narrator.yaml",
		Name:         "Narrator",
		Telegram:     Telegram{TokenEnv: "NARRATOR_TOKEN"},
		SystemPrompt: "You tell stories.",
		Timezone:     "UTC",
		Stream:       true,
		Rich:         "auto",
		Groups:       GroupsMention,
		Claude:       Claude{Timeout: Duration(120 * time.Second), MaxTurns: 3},
		Tools:        Tools{Timeout: Duration(30 * time.Second)},
		TTS:          TTS{Voice: "nova", Speed: 1.0, Model: "tts-1", Format: "mp3", ReplyToVoice: true, MaxChars: DefaultMaxSpokenChars},
		STT:          STT{Enabled: true, Model: "gpt-4o-mini-transcribe"},
		Image: Image{Model: "dall-e-2", Size: "256x256",
			Keywords: []string{"image", "picture", "photo", "draw", "generate", "create a"}},
		Buttons:   Buttons{Questions: true, MaxAge: Duration(48 * time.Hour)},
		Memory:    Memory{MaxNotes: 30, MaxNoteChars: 200},
		Reminders: Reminders{MaxPending: 20, MaxAhead: Duration(365 * 24 * time.Hour)},
		CheckIns:  CheckIns{QuietFor: Duration(72 * time.Hour), QuietHours: DayHours{From: 22 * time.Hour, To: 8 * time.Hour}, PerWeek: 2},
		Messages: Messages{
			Error:       "Sorry, something went wrong. Please try again.",
			Busy:        "I'm still working on your earlier messages. Please wait a moment and send this one again.",
			Denied:      "Sorry, this bot is private.",
			Limit:       "You have reached today's message limit. It resets {reset}.",
			SpendingCap: "I can't answer any more messages today: today's budget is spent. It resets {reset}.",
			Reset:       "Done: we start a new conversation. What shall we talk about?",
			Expired:     "I had to start a new conversation, so I don't remember what we said before.",

			Unreadable:  "Sorry, I couldn't read that message. Could you send it as plain text?",
			Unsupported: "Sorry, I can't open this kind of message. Send me text, a photo or a file, and I'll have a look.",
			TextOnly:    "Sorry, I can't listen to voice messages here. Please write to me instead.",
			TooBig:      "Sorry, that's too big for me: I can take up to {max}.",
		},
	}
	assertBrain(t, b, want)
}

func TestParseKeepsWhatTheFileSays(t *testing.T) {
	src := minimal + `description: Reads you stories
greeting: Hi!
timezone: Europe/Berlin
access:
  allowed_users: [11111, 22222, -1001234567890]
limits:
  per_user_per_day: 0
claude:
  model: sonnet
  timeout: 90s
  max_turns: 5
  max_budget_usd: 0.25
mcp_servers:
  clock:
    command: python3
    args: [/srv/tools/clock.py]
    env: {TZ: "${TZ}"}
  search:
    type: http
    url: https://search.example/mcp
    headers:
      Authorization: "Bearer ${SEARCH_TOKEN}"
tools:
  allow: [mcp__clock__now, mcp__search]
  timeout: 10s
tts:
  enabled: true
  voice: onyx
  speed: 0.25
  model: gpt-4o-mini-tts
  format: opus
  send_text_too: true
  user_toggle: true
  reply_to_voice: false
  max_chars: 1500
stt:
  enabled: false
  model: whisper-1
image:
  enabled: true
  model: dall-e-3
  size: 1792x1024
  quality: hd
  style: natural
  keywords: [sketch]
  send_text_too: true
buttons:
  questions: false
  read_aloud: false
  max_age: 90m
memory:
  enabled: true
  max_notes: 5
  max_note_chars: 80
  groups: true
reminders:
  enabled: true
  max_pending: 3
  max_ahead: 720h
check_ins:
  enabled: true
  quiet_for: 48h
  quiet_hours: "23:30-07:00"
  per_week: 1
messages:
  error: Oops.
  busy: Busy.
  denied: No.
  limit: Enough for today; back {reset}.
  spending_cap: Budget spent; back {reset}.
  reset: Fresh start.
  expired: I forgot.
  unsupported: Can't open that.
  text_only: Write, please.
  too_big: Over {max}!
`
	b, err := ParseBytes("narrator.yml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := Brain{
		ID: "narrator", Path: "narrator.yml",
		Name: "Narrator", Description: "Reads you stories", Greeting: "Hi!",
		Telegram:     Telegram{TokenEnv: "NARRATOR_TOKEN"},
		SystemPrompt: "You tell stories.",
		Timezone:     "Europe/Berlin",
		Access:       Access{AllowedUsers: []int64{11111, 22222, -1001234567890}},
		Stream:       true,
		Rich:         "auto",
		Groups:       GroupsMention,
		Claude:       Claude{Model: "sonnet", Timeout: Duration(90 * time.Second), MaxTurns: 5, MaxBudgetUSD: 0.25},
		MCPServers: map[string]MCPServer{
			"clock":  {Type: "stdio", Command: "python3", Args: []string{"/srv/tools/clock.py"}, Env: map[string]string{"TZ": "${TZ}"}},
			"search": {Type: "http", URL: "https://search.example/mcp", Headers: map[string]string{"Authorization": "Bearer ${SEARCH_TOKEN}"}},
		},
		Tools: Tools{Allow: []string{"mcp__clock__now", "mcp__search"}, Timeout: Duration(10 * time.Second)},
		TTS:   TTS{Enabled: true, Voice: "onyx", Speed: 0.25, Model: "gpt-4o-mini-tts", Format: "opus", SendTextToo: true, UserToggle: true, MaxChars: 1500},
		STT:   STT{Model: "whisper-1"},
		Image: Image{Enabled: true, Model: "dall-e-3", Size: "1792x1024", Quality: "hd", Style: "natural",
			Keywords: []string{"sketch"}, SendTextToo: true},
		Buttons:   Buttons{MaxAge: Duration(90 * time.Minute)},
		Memory:    Memory{Enabled: true, MaxNotes: 5, MaxNoteChars: 80, Groups: true},
		Reminders: Reminders{Enabled: true, MaxPending: 3, MaxAhead: Duration(720 * time.Hour)},
		CheckIns:  CheckIns{Enabled: true, QuietFor: Duration(48 * time.Hour), QuietHours: DayHours{From: 23*time.Hour + 30*time.Minute, To: 7 * time.Hour}, PerWeek: 1},
		Messages: Messages{Error: "Oops.", Busy: "Busy.", Denied: "No.", Limit: "Enough for today; back {reset}.", SpendingCap: "Budget spent; back {reset}.",
			Reset: "Fresh start.", Expired: "I forgot.", Unreadable: defaultMessages.Unreadable,
			Unsupported: "Can't open that.", TextOnly: "Write, please.", TooBig: "Over {max}!"},
	}
	assertBrain(t, b, want)
}

func TestParseImageSizeDefaultFollowsModel(t *testing.T) {
	for model, size := range map[string]string{"dall-e-2": "256x256", "dall-e-3": "1024x1024", "gpt-image-1": "1024x1024"} {
		b, err := ParseBytes("t.yaml", []byte(minimal+"image:\n  model: "+model+"\n"))
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if b.Image.Size != size {
			t.Errorf("%s: default size %q, want %q", model, b.Image.Size, size)
		}
	}
}

// assertBrain compares everything but the unexported line index.
func assertBrain(t *testing.T, got *Brain, want Brain) {
	t.Helper()
	g := *got
	g.lines, g.location = nil, nil
	if fmt.Sprintf("%#v", g) != fmt.Sprintf("%#v", want) {
		t.Errorf("brain:\n got %#v\nwant %#v", g, want)
	}
}

func TestParseFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "narrator.yaml")
	if err := os.WriteFile(path, []byte(minimal), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.ID != "narrator" || b.Path != path {
		t.Errorf("ID, Path = %q, %q; want narrator, %q", b.ID, b.Path, path)
	}
	if _, err := Parse(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Parse(missing) = %v, want fs.ErrNotExist", err)
	}
}

const secretToken = "123456789:AAHsecret-token-value_0123456789abc"

func TestResolveToken(t *testing.T) {
	env := map[string]string{"NARRATOR_TOKEN": secretToken + "\n", "BLANK": "  "}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	b := &Brain{Path: "brains/narrator.yaml", Telegram: Telegram{TokenEnv: "NARRATOR_TOKEN"}}
	if got, err := b.ResolveToken(lookup); err != nil || got != secretToken {
		t.Errorf("from env: %q, %v; want the trimmed value", got, err)
	}
	inline := &Brain{Telegram: Telegram{Token: secretToken}}
	if got, err := inline.ResolveToken(lookup); err != nil || got != secretToken {
		t.Errorf("inline: %q, %v", got, err)
	}
	for _, name := range []string{"UNSET", "BLANK"} {
		b := &Brain{Path: "brains/narrator.yaml", Telegram: Telegram{TokenEnv: name}}
		_, err := b.ResolveToken(lookup)
		if !errors.Is(err, ErrNoToken) {
			t.Fatalf("%s: error %v, want ErrNoToken", name, err)
		}
		if want := "no telegram token: environment variable " + name + " (telegram.token_env in brains/narrator.yaml) is unset or empty"; err.Error() != want {
			t.Errorf("%s: error %q, want %q", name, err, want)
		}
	}
}

// TestPrintingHidesToken guards against a brain printed in a log line or
// an error leaking its inline token.
func TestPrintingHidesToken(t *testing.T) {
	b, err := ParseBytes("t.yaml", []byte("name: N\ntelegram:\n  token: \""+secretToken+"\"\nsystem_prompt: p\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(format, b); strings.Contains(out, "secret") {
			t.Errorf("%s of a brain shows the token: %s", format, out)
		}
	}
	if got := b.Telegram.String(); got != "inline token (redacted)" {
		t.Errorf("Telegram.String() = %q", got)
	}
	// A token pasted into token_env must not be echoed by the error either.
	_, err = ParseBytes("t.yaml", []byte("name: N\ntelegram:\n  token_env: \""+secretToken+"\"\nsystem_prompt: p\n"))
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("error for a token in token_env: %v", err)
	}
}

func TestTooBigText(t *testing.T) {
	m := Messages{TooBig: "Max {max}, and again {max}."}
	if got := m.TooBigText("3 MB"); got != "Max 3 MB, and again 3 MB." {
		t.Errorf("TooBigText = %q", got)
	}
}

func TestLimitText(t *testing.T) {
	m := Messages{Limit: "Come back {reset}."}
	for until, want := range map[time.Duration]string{
		5*time.Hour + 20*time.Minute:               "Come back in 5h 20m.",
		5*time.Hour + 19*time.Minute + time.Second: "Come back in 5h 20m.",
		30 * time.Second:                           "Come back in 1m.",
		0:                                          "Come back in 1m.",
		59 * time.Minute:                           "Come back in 59m.",
	} {
		if got := m.LimitText(until); got != want {
			t.Errorf("LimitText(%v) = %q, want %q", until, got, want)
		}
	}
}

// The spending cap has its own words, so that users are not told they
// sent too many messages when the bot's budget is spent.
func TestSpendingCapText(t *testing.T) {
	b, err := ParseBytes("t.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	want := "I can't answer any more messages today: today's budget is spent. It resets in 2h 0m."
	if got := b.Messages.SpendingCapText(2 * time.Hour); got != want {
		t.Errorf("default SpendingCapText = %q, want %q", got, want)
	}
	if b.Messages.SpendingCapText(time.Hour) == b.Messages.LimitText(time.Hour) {
		t.Error("the spending cap's default text is the message limit's")
	}
	b, err = ParseBytes("t.yaml", []byte(minimal+"messages:\n  spending_cap: \"Budget gone, back {reset}.\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Messages.SpendingCapText(90 * time.Second); got != "Budget gone, back in 2m." {
		t.Errorf("SpendingCapText = %q", got)
	}
}

// A brain that can speak reads its text answers aloud unless it says not
// to; one that cannot, only when it says so.
func TestReadAloudFollowsVoice(t *testing.T) {
	for _, c := range []struct {
		extra string
		want  bool
	}{
		{"", false},
		{"tts:\n  user_toggle: true\n", true},
		{"tts:\n  enabled: true\n", true},
		{"tts:\n  enabled: true\nbuttons:\n  read_aloud: false\n", false},
		{"buttons:\n  read_aloud: true\n", true},
	} {
		path := filepath.Join(t.TempDir(), "narrator.yaml")
		if err := os.WriteFile(path, []byte(minimal+c.extra), 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := Parse(path)
		if err != nil {
			t.Fatal(err)
		}
		if b.Buttons.ReadAloud != c.want {
			t.Errorf("%q: read_aloud %v, want %v", c.extra, b.Buttons.ReadAloud, c.want)
		}
	}
}
