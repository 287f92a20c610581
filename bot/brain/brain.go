// Package brain reads the brain files bot authors edit: one YAML file per
// bot, strictly decoded and validated, with every problem reported as
// file:line. It also loads a whole folder and watches it for edits.
package brain

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Brain is one bot's validated configuration. Field names in YAML are a
// contract with bot authors (see brains/README.md); defaults are applied by
// Parse, so every field here holds its effective value.
type Brain struct {
	// ID comes from the file name (narrator.yaml → "narrator").
	ID string `yaml:"-"`
	// Path is the file the brain was read from.
	Path string `yaml:"-"`

	Name         string   `yaml:"name"`
	Description  string   `yaml:"description"`
	Greeting     string   `yaml:"greeting"`
	Telegram     Telegram `yaml:"telegram"`
	SystemPrompt string   `yaml:"system_prompt"`
	// Timezone is the IANA time zone of the system prompt's {{date}},
	// {{weekday}} and {{time}} (default UTC).
	Timezone string `yaml:"timezone"`
	Access   Access `yaml:"access"`
	// Stream shows text replies while the model writes them (default
	// true).
	Stream bool `yaml:"stream"`
	// Rich says when a text reply goes as one rich message Telegram
	// formats itself: RichAuto (default), RichOff or RichAlways.
	Rich string `yaml:"rich"`
	// Groups says which group messages the bot answers: GroupsOff,
	// GroupsMention (default) or GroupsAll.
	Groups string `yaml:"groups"`
	Limits Limits `yaml:"limits"`
	Claude Claude `yaml:"claude"`
	// MCPServers are the brain's own MCP servers by name: the model sees
	// their tools as mcp__<name>__<tool> and may call those Tools.Allow
	// lists.
	MCPServers map[string]MCPServer `yaml:"mcp_servers"`
	Tools      Tools                `yaml:"tools"`
	TTS        TTS                  `yaml:"tts"`
	STT        STT                  `yaml:"stt"`
	Image      Image                `yaml:"image"`
	Buttons    Buttons              `yaml:"buttons"`
	Memory     Memory               `yaml:"memory"`
	Reminders  Reminders            `yaml:"reminders"`
	CheckIns   CheckIns             `yaml:"check_ins"`
	Messages   Messages             `yaml:"messages"`

	// lines locates the fields the file sets, for problems found after
	// parsing (conflicts between files).
	lines fieldLines
	// location is Timezone loaded.
	location *time.Location
}

// Location is the brain's time zone (Timezone).
func (b *Brain) Location() *time.Location {
	if b.location == nil {
		return time.UTC
	}
	return b.location
}

// The values of Brain.Groups.
const (
	// RichAuto: a reply goes as a rich message when it needs one: longer
	// than one Telegram message, or with a table. RichOff: never (some
	// clients showed rich messages as blank bubbles in 2026); RichAlways:
	// every text reply up to 32,768 characters.
	RichAuto   = "auto"
	RichOff    = "off"
	RichAlways = "always"
	// GroupsOff: the bot answers nothing in groups.
	GroupsOff = "off"
	// GroupsMention: only commands for the bot, messages that mention it
	// and replies to its messages.
	GroupsMention = "mention"
	// GroupsAll: every message the bot receives (with Telegram's privacy
	// mode on, that is still only the ones addressed to it).
	GroupsAll = "all"
)

// ErrNoToken is wrapped by ResolveToken when the brain's token source holds
// no token yet: its environment variable is unset or empty, or its token
// file does not exist or is empty. The bot waits for it; every other
// problem of a token file (unreadable, a folder) is an error of its own.
var ErrNoToken = errors.New("no telegram token")

// NoTokenError is ResolveToken's error for a token source that holds no
// token yet (errors.Is(err, ErrNoToken)).
type NoTokenError struct {
	// Source names where the token was looked for: "environment variable
	// VOICE_TOKEN", "token file /run/credentials/brainbot.service/voice".
	Source string
	// Field and File locate the brain's setting: "telegram.token_env" in
	// "brains/voice.yaml".
	Field, File string
	// Reason says what is missing: "is unset or empty", "does not exist".
	Reason string
	// Short says it in a few words, for a summary line: "VOICE_TOKEN not
	// set", "token file .../voice does not exist".
	Short string
	// Fix says what makes the bot start.
	Fix string
}

// noTokenFix is the fix of a token variable that is not set: the service
// reads its environment when it starts.
func noTokenFix(variable string) string {
	return "set " + variable + " in brainbot's environment and restart it, " +
		"or write the token to a file named by telegram.token_file instead: that needs no restart"
}

func (e *NoTokenError) Error() string {
	return fmt.Sprintf("%v: %s (%s in %s) %s", ErrNoToken, e.Source, e.Field, e.File, e.Reason)
}

// Is makes errors.Is(err, ErrNoToken) hold.
func (e *NoTokenError) Is(target error) bool { return target == ErrNoToken }

// ResolveToken returns the BotFather token: the inline token, the content
// of the token file, or the value of the token_env variable found by
// lookup (os.LookupEnv in production). A token file is read on every call,
// so a bot added while brainbot runs finds a token written after it
// started. Errors name the variable or the file, never a token.
func (b *Brain) ResolveToken(lookup func(string) (string, bool)) (string, error) {
	switch t := b.Telegram; {
	case t.Token != "":
		return t.Token, nil
	case t.TokenFile != "":
		return b.readTokenFile(lookup)
	}
	value, _ := lookup(b.Telegram.TokenEnv)
	// A trailing newline from `$(cat token.txt)` would make every call fail.
	if value = strings.TrimSpace(value); value == "" {
		return "", &NoTokenError{Source: "environment variable " + b.Telegram.TokenEnv, Field: "telegram.token_env", File: b.Path,
			Reason: "is unset or empty", Short: b.Telegram.TokenEnv + " not set", Fix: noTokenFix(b.Telegram.TokenEnv)}
	}
	return value, nil
}

// Telegram says where the bot's BotFather token comes from: the
// environment variable TokenEnv, the file TokenFile, or Token inline.
// Exactly one is set.
type Telegram struct {
	TokenEnv string `yaml:"token_env"`
	// TokenFile is a path: absolute, relative to the brain file's folder,
	// or starting with $CREDENTIALS_DIRECTORY (systemd's LoadCredential=).
	TokenFile string `yaml:"token_file"`
	Token     string `yaml:"token"`
}

// String says where the token comes from without showing an inline token,
// so that printing a Brain (%v, %+v) never leaks it.
func (t Telegram) String() string {
	switch {
	case t.TokenEnv != "":
		return "token from $" + t.TokenEnv
	case t.TokenFile != "":
		return "token from file " + t.TokenFile
	case t.Token != "":
		return "inline token (redacted)"
	}
	return "no token"
}

// GoString keeps %#v from printing an inline token too.
func (t Telegram) GoString() string { return "brain.Telegram{" + t.String() + "}" }

// source identifies the token for conflict checks: two bots polling one
// token make Telegram answer 409 Conflict to both.
func (t Telegram) source() string {
	switch {
	case t.TokenEnv != "":
		return "env:" + t.TokenEnv
	case t.TokenFile != "":
		return "file:" + t.TokenFile
	}
	return "inline:" + t.Token
}

// Access restricts who may talk to the bot. Empty AllowedUsers: anyone.
// A negative id is a group's or channel's, for the messages sent as that
// chat (a group's anonymous admins, a channel posting in a group).
type Access struct {
	AllowedUsers []int64 `yaml:"allowed_users"`
}

// Limits caps use per Telegram user. PerUserPerDay 0 means unlimited.
type Limits struct {
	PerUserPerDay int `yaml:"per_user_per_day" json:"per_user_per_day"`
	// DailyUSD caps what the whole bot may spend per UTC day, and
	// PerUserDailyUSD what one user's messages may (0: no cap). Claude's
	// reported cost and OpenAI's (package pricing) count together.
	DailyUSD        float64 `yaml:"daily_usd" json:"daily_usd"`
	PerUserDailyUSD float64 `yaml:"per_user_daily_usd" json:"per_user_daily_usd"`
}

// Claude holds settings passed through to the Claude Code CLI.
type Claude struct {
	Model string `yaml:"model"`
	// Timeout is the inactivity limit for one request (default 120s).
	Timeout Duration `yaml:"timeout"`
	// MaxTurns bounds the model's round trips in each turn of a request
	// (default 3; a voice or picture reply's second turn needs 2).
	MaxTurns int `yaml:"max_turns"`
	// MaxBudgetUSD bounds what one request may cost the Claude account
	// (0, the default: no limit).
	MaxBudgetUSD float64 `yaml:"max_budget_usd"`
}

// TTS configures voice replies (the tts MCP tool).
type TTS struct {
	Enabled     bool    `yaml:"enabled"`
	Voice       string  `yaml:"voice"`  // default nova
	Speed       float64 `yaml:"speed"`  // 0.25-4.0, default 1.0
	Model       string  `yaml:"model"`  // default tts-1
	Format      string  `yaml:"format"` // mp3 (default) or opus
	SendTextToo bool    `yaml:"send_text_too"`
	UserToggle  bool    `yaml:"user_toggle"`
	// ReplyToVoice answers a voice message with a voice message when the
	// brain can speak (Enabled or UserToggle), whatever /voice chose for
	// text messages (default true).
	ReplyToVoice bool `yaml:"reply_to_voice"`
	// MaxChars bounds what one spoken answer may cost: no more of an
	// answer (or of a text read aloud) is spoken than this many characters
	// (default DefaultMaxSpokenChars; 0: no bound).
	MaxChars int `yaml:"max_chars"`
}

// DefaultMaxSpokenChars is tts.max_chars when a brain leaves it out: about
// three minutes of speech at speed 1 (OpenAI's voices speak about 900
// characters a minute), the long end of a voice note people listen to to
// the end; $0.04 with tts-1, $0.08 with tts-1-hd.
const DefaultMaxSpokenChars = 2700

// STT configures voice messages in (speech to text): they are
// transcribed and the model answers the words. It needs brainbot's
// OpenAI key.
type STT struct {
	Enabled bool   `yaml:"enabled"` // default true
	Model   string `yaml:"model"`   // default toolspec.DefaultTranscriptionModel
}

// Image configures image replies (the image-gen MCP tool).
type Image struct {
	Enabled     bool     `yaml:"enabled"`
	Model       string   `yaml:"model"` // default dall-e-2
	Size        string   `yaml:"size"`  // default 256x256 (dall-e-2), 1024x1024 otherwise
	Quality     string   `yaml:"quality"`
	Style       string   `yaml:"style"`
	Keywords    []string `yaml:"keywords"` // default: image, picture, photo, draw, generate, "create a"
	SendTextToo bool     `yaml:"send_text_too"`
}

// Buttons configures the buttons under the bot's messages.
type Buttons struct {
	// Questions lets the model ask the user a question with options, shown
	// as buttons (default true).
	Questions bool `yaml:"questions"`
	// ReadAloud puts a 🔊 button under text answers: a tap sends the answer
	// as a voice message (default true when the brain can speak:
	// tts.enabled or tts.user_toggle). It needs brainbot's OpenAI key.
	ReadAloud bool `yaml:"read_aloud"`
	// MaxAge is how long a button works; a tap on an older one is told it
	// expired (default 48h, at most 720h).
	MaxAge Duration `yaml:"max_age"`
}

// Memory lets the persona keep short notes about each user, which every
// new conversation with them starts with (off by default): the model
// writes them through brainbot's memory tools, users read and drop them
// with /memory, and /forget deletes them.
type Memory struct {
	Enabled bool `yaml:"enabled"`
	// MaxNotes bounds the notes kept per user (default 30, at most 50);
	// MaxNoteChars each note's length in characters (default 200, at
	// most 1000). The tool refuses a note past either, telling the model
	// why.
	MaxNotes     int `yaml:"max_notes"`
	MaxNoteChars int `yaml:"max_note_chars"`
	// Groups keeps and uses notes in groups too: a sender's notes come
	// with each of their messages there, where the whole group may read
	// what the answer makes of them (default false: private chats only).
	Groups bool `yaml:"groups"`
}

// Reminders lets users ask the persona, in their private chat, to remind
// them of something at a time (off by default): the model keeps one
// through brainbot's reminder tools, and at its time writes the reminder
// in its own words, as text or a voice note by the user's mode. Users
// list and cancel theirs with /reminders. Times are the user's: their
// time zone (set by telling the persona), else the brain's timezone.
type Reminders struct {
	Enabled bool `yaml:"enabled"`
	// MaxPending bounds the reminders a user may have waiting (default
	// 20, at most 100); MaxAhead how far ahead one may be (default
	// 8760h, a year; from 1m to 87600h).
	MaxPending int      `yaml:"max_pending"`
	MaxAhead   Duration `yaml:"max_ahead"`
}

// CheckIns lets the persona write first to a user who has been quiet
// (off by default): only to users who wrote to it privately, never to
// one who said no (the button under each check-in, /checkins off) or
// blocked the bot.
type CheckIns struct {
	Enabled bool `yaml:"enabled"`
	// QuietFor is how long the user has been silent, and not checked in
	// with, before a check-in (default 72h; at least 1s).
	QuietFor Duration `yaml:"quiet_for"`
	// QuietHours are the hours of the user's day no check-in is written
	// in (default 22:00-08:00; "none" for none).
	QuietHours DayHours `yaml:"quiet_hours"`
	// PerWeek bounds the check-ins written to one user in any 7 days
	// (default 2, from 1 to 14).
	PerWeek int `yaml:"per_week"`
}

// DayHours are hours of a day, "22:00-08:00" in YAML: from From to To,
// past midnight when To is earlier; none when From equals To ("none").
type DayHours struct {
	From, To time.Duration // since midnight
}

// UnmarshalYAML reads "HH:MM-HH:MM", or "none".
func (h *DayHours) UnmarshalYAML(n *yaml.Node) error {
	const form = `must be hours such as "22:00-08:00" (from-to, in the user's time zone) or none`
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("%s, got %s", form, describe(n))
	}
	if strings.TrimSpace(n.Value) == "none" {
		*h = DayHours{}
		return nil
	}
	from, to, ok := strings.Cut(n.Value, "-")
	var err1, err2 error
	if ok {
		h.From, err1 = clockTime(from)
		h.To, err2 = clockTime(to)
	}
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("%s, got %q", form, n.Value)
	}
	return nil
}

// clockTime reads "HH:MM" as the time since midnight.
func clockTime(s string) (time.Duration, error) {
	t, err := time.Parse("15:04", strings.TrimSpace(s))
	if err != nil {
		return 0, err
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

// None reports whether h holds no hour.
func (h DayHours) None() bool { return h.From == h.To }

// Holds reports whether t, read in its own location, falls in h.
func (h DayHours) Holds(t time.Time) bool {
	day := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second
	switch {
	case h.None():
		return false
	case h.From < h.To:
		return day >= h.From && day < h.To
	}
	return day >= h.From || day < h.To // past midnight
}

// String writes h as in YAML.
func (h DayHours) String() string {
	if h.None() {
		return "none"
	}
	clock := func(d time.Duration) string { return fmt.Sprintf("%02d:%02d", int(d.Hours()), int(d.Minutes())%60) }
	return clock(h.From) + "-" + clock(h.To)
}

// Messages are what users are told in the bot's own words. Parse fills in
// defaults for any left empty.
type Messages struct {
	Error  string `yaml:"error"`
	Busy   string `yaml:"busy"`
	Denied string `yaml:"denied"`
	Limit  string `yaml:"limit"`
	// SpendingCap answers a message once the bot, or the user, has spent
	// today's limits.daily_usd or limits.per_user_daily_usd.
	SpendingCap string `yaml:"spending_cap"`
	Reset       string `yaml:"reset"`   // confirmation after /reset
	Expired     string `yaml:"expired"` // told once when a lost session had to be restarted
	// Unreadable answers a message Telegram sent in a form brainbot cannot
	// decode (a kind of content newer than its Telegram library).
	Unreadable string `yaml:"unreadable"`
	// Unsupported answers what the bot cannot read (a sticker, a video, a
	// location...); TextOnly a voice message when speech to text is off;
	// TooBig a file over brainbot's size limit for its kind
	// (MaxPlaceholder says the limit).
	Unsupported string `yaml:"unsupported"`
	TextOnly    string `yaml:"text_only"`
	TooBig      string `yaml:"too_big"`
}

// LimitText is the limit message with LimitPlaceholder replaced by when the
// limit resets, untilReset from now: "in 5h 20m", "in 1m".
func (m Messages) LimitText(untilReset time.Duration) string {
	return withReset(m.Limit, untilReset)
}

// SpendingCapText is the spending_cap message with LimitPlaceholder
// replaced as in LimitText.
func (m Messages) SpendingCapText(untilReset time.Duration) string {
	return withReset(m.SpendingCap, untilReset)
}

// withReset replaces LimitPlaceholder in text by when a daily limit
// resets, untilReset from now, rounded up to the minute: never promise
// too early.
func withReset(text string, untilReset time.Duration) string {
	minutes := int((untilReset + time.Minute - 1) / time.Minute)
	minutes = max(minutes, 1)
	when := fmt.Sprintf("in %dm", minutes%60)
	if hours := minutes / 60; hours > 0 {
		when = fmt.Sprintf("in %dh %dm", hours, minutes%60)
	}
	return strings.ReplaceAll(text, LimitPlaceholder, when)
}

// TooBigText is the too_big message with MaxPlaceholder replaced by the
// limit the file broke, as users read it ("10 MB", "10 minutes").
func (m Messages) TooBigText(limit string) string {
	return strings.ReplaceAll(m.TooBig, MaxPlaceholder, limit)
}

// Duration is a time.Duration written in YAML as "120s", "2m".
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return d.D().String() }

// UnmarshalYAML reads Go duration syntax ("90s", "2m", "1h30m"). A bare
// number is an error: its unit would be a guess.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("must be a duration such as 120s or 2m, got %s", describe(n))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("must be a duration such as 120s or 2m, got %q", n.Value)
	}
	*d = Duration(v)
	return nil
}
