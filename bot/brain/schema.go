package brain

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"brainbot/sysprompt"
	"brainbot/toolspec"
)

const (
	defaultTimeout = 120 * time.Second
	minTimeout     = time.Second
	maxTimeout     = time.Hour
	// A button works this long by default, at least minButtonsAge and at
	// most maxButtonsAge (state.MaxButtonsAge: the store keeps buttons as
	// long).
	defaultButtonsAge = 48 * time.Hour
	minButtonsAge     = time.Minute
	maxButtonsAge     = 30 * 24 * time.Hour
	// A turn of our two-turn flow takes the model one round trip, or two
	// with a tool call (the call, then the answer to its result); one more
	// leaves room for a model that tries a tool on its own.
	defaultMaxTurns = 3
	maxMaxTurns     = 100
	toolMinTurns    = 2
)

var defaultKeywords = []string{"image", "picture", "photo", "draw", "generate", "create a"}

// LimitPlaceholder in messages.limit and messages.spending_cap is replaced
// by when the daily limit resets, e.g. "in 5h 20m" (see
// Messages.LimitText).
const LimitPlaceholder = "{reset}"

// MaxPlaceholder in messages.too_big is replaced by the limit the file
// broke (see Messages.TooBigText).
const MaxPlaceholder = "{max}"

// messagePlaceholders lists, per messages field, the placeholders brainbot
// replaces in that text. Any other {word} in a message is a typo that users
// would read as written.
var messagePlaceholders = map[string][]string{
	"limit": {LimitPlaceholder}, "spending_cap": {LimitPlaceholder}, "too_big": {MaxPlaceholder},
}

// placeholder is what looks like one: a word in braces. Other braces, as in
// "{^_^}", are text.
var placeholder = regexp.MustCompile(`\{[A-Za-z_][A-Za-z0-9_]*\}`)

// defaultMessages are what users are told when a brain does not say.
var defaultMessages = Messages{
	Error:  "Sorry, something went wrong. Please try again.",
	Busy:   "I'm still working on your earlier messages. Please wait a moment and send this one again.",
	Denied: "Sorry, this bot is private.",
	Limit:  "You have reached today's message limit. It resets " + LimitPlaceholder + ".",
	// Not the user's doing when the bot's own cap is reached: no "you".
	SpendingCap: "I can't answer any more messages today: today's budget is spent. It resets " + LimitPlaceholder + ".",
	Reset:       "Done: we start a new conversation. What shall we talk about?",
	Expired:     "I had to start a new conversation, so I don't remember what we said before.",

	Unreadable: "Sorry, I couldn't read that message. Could you send it as plain text?",

	Unsupported: "Sorry, I can't open this kind of message. Send me text, a photo or a file, and I'll have a look.",
	TextOnly:    "Sorry, I can't listen to voice messages here. Please write to me instead.",
	TooBig:      "Sorry, that's too big for me: I can take up to " + MaxPlaceholder + ".",
}

// applyDefaults fills in every field the file left out. present holds the
// paths of the fields the file sets: an explicit `speed: 0` stays 0 and
// fails validation, while an absent speed becomes 1.0.
func applyDefaults(b *Brain, present fieldLines) {
	isSet := func(path string) bool { _, ok := present[path]; return ok }
	if !isSet("claude.timeout") {
		b.Claude.Timeout = Duration(defaultTimeout)
	}
	if !isSet("claude.max_turns") {
		b.Claude.MaxTurns = defaultMaxTurns
		if len(b.Tools.Allow) > 0 {
			b.Claude.MaxTurns = defaultToolMaxTurns
		}
	}
	if !isSet("tools.timeout") {
		b.Tools.Timeout = Duration(defaultToolTimeout)
	}
	for name, s := range b.MCPServers {
		if s.Type == "" {
			s.Type = ServerStdio
			b.MCPServers[name] = s
		}
	}
	orDefault(&b.Timezone, "UTC")
	if !isSet("tts.speed") {
		b.TTS.Speed = toolspec.DefaultSpeed
	}
	if !isSet("stream") {
		b.Stream = true
	}
	// On unless the file says false: a bot that speaks should listen.
	if !isSet("tts.reply_to_voice") {
		b.TTS.ReplyToVoice = true
	}
	if !isSet("tts.max_chars") {
		b.TTS.MaxChars = DefaultMaxSpokenChars
	}
	if !isSet("buttons.questions") {
		b.Buttons.Questions = true
	}
	if !isSet("buttons.read_aloud") {
		b.Buttons.ReadAloud = b.TTS.Enabled || b.TTS.UserToggle
	}
	if !isSet("buttons.max_age") {
		b.Buttons.MaxAge = Duration(defaultButtonsAge)
	}
	if !isSet("memory.max_notes") {
		b.Memory.MaxNotes = toolspec.DefaultMaxNotes
	}
	if !isSet("memory.max_note_chars") {
		b.Memory.MaxNoteChars = toolspec.DefaultMaxNoteChars
	}
	applyScheduleDefaults(b, isSet)
	if !isSet("stt.enabled") {
		b.STT.Enabled = true
	}
	orDefault(&b.Groups, GroupsMention)
	orDefault(&b.Rich, RichAuto)
	// The tools' own defaults (package toolspec), so that what a brain
	// leaves out is what the tool would choose.
	orDefault(&b.TTS.Voice, toolspec.DefaultVoice)
	orDefault(&b.TTS.Model, toolspec.DefaultSpeechModel)
	orDefault(&b.TTS.Format, toolspec.DefaultFormat)
	orDefault(&b.STT.Model, toolspec.DefaultTranscriptionModel)
	orDefault(&b.Image.Model, toolspec.DefaultImageModel)
	if model, ok := toolspec.LookupImageModel(b.Image.Model); ok {
		orDefault(&b.Image.Size, model.DefaultSize)
	}
	// An explicit empty list stays empty and fails validation: it would
	// silently turn picture replies off.
	if !isSet("image.keywords") {
		b.Image.Keywords = slices.Clone(defaultKeywords)
	}
	m := &b.Messages
	orDefault(&m.Error, defaultMessages.Error)
	orDefault(&m.Busy, defaultMessages.Busy)
	orDefault(&m.Denied, defaultMessages.Denied)
	orDefault(&m.Limit, defaultMessages.Limit)
	orDefault(&m.SpendingCap, defaultMessages.SpendingCap)
	orDefault(&m.Reset, defaultMessages.Reset)
	orDefault(&m.Expired, defaultMessages.Expired)
	orDefault(&m.Unreadable, defaultMessages.Unreadable)
	orDefault(&m.Unsupported, defaultMessages.Unsupported)
	orDefault(&m.TextOnly, defaultMessages.TextOnly)
	orDefault(&m.TooBig, defaultMessages.TooBig)
}

// validateMemory checks the bounds of the notes kept per user: every
// note reaches the model at the start of each new conversation.
func (d *decoder) validateMemory(m Memory) {
	if n := m.MaxNotes; n < 1 || n > toolspec.MaxMaxNotes {
		d.reject("memory.max_notes", "must be between 1 and %d (the notes kept per user; default %d), got %d",
			toolspec.MaxMaxNotes, toolspec.DefaultMaxNotes, n)
	}
	if n := m.MaxNoteChars; n < 1 || n > toolspec.MaxMaxNoteChars {
		d.reject("memory.max_note_chars", "must be between 1 and %d (the characters of one note; default %d), got %d",
			toolspec.MaxMaxNoteChars, toolspec.DefaultMaxNoteChars, n)
	}
}

func orDefault(s *string, def string) {
	if strings.TrimSpace(*s) == "" {
		*s = def
	}
}

// envName is what a shell accepts as a variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validate records every rule b breaks, after defaults.
func (d *decoder) validate(b *Brain) {
	if strings.TrimSpace(b.Name) == "" {
		d.reject("name", "is required (the bot's display name)")
	}
	if strings.TrimSpace(b.SystemPrompt) == "" {
		d.reject("system_prompt", "is required (who the bot is and how it answers)")
	}
	d.checkVariables(b.SystemPrompt)
	d.checkTimezone(b)

	d.validateTelegram(b.Telegram)
	for i, id := range b.Access.AllowedUsers {
		if id == 0 {
			path := fmt.Sprintf("access.allowed_users[%d]", i)
			d.reject(path, "must be a Telegram user id, or a group's or channel's id (negative) for the messages sent as that chat, got %d", id)
		}
	}
	for field, usd := range map[string]float64{"limits.daily_usd": b.Limits.DailyUSD, "limits.per_user_daily_usd": b.Limits.PerUserDailyUSD} {
		if !(usd >= 0) || math.IsInf(usd, 0) { // also refuses NaN
			d.reject(field, "must be 0 (no cap) or a positive amount of USD, got %v", usd)
		}
	}
	if n := b.Limits.PerUserPerDay; n < 0 {
		d.reject("limits.per_user_per_day", "must be 0 (unlimited) or more, got %d", n)
	}
	if t := b.Claude.Timeout.D(); t < minTimeout || t > maxTimeout {
		d.reject("claude.timeout", "must be between 1s and 1h, got %v", t)
	}
	switch n := b.Claude.MaxTurns; {
	case n < 1 || n > maxMaxTurns:
		d.reject("claude.max_turns", "must be between 1 and %d, got %d", maxMaxTurns, n)
	case n < toolMinTurns && (b.TTS.Enabled || b.TTS.UserToggle || b.Image.Enabled):
		d.reject("claude.max_turns", "must be at least %d when voice or picture replies are on (the tool call and the answer to its result), got %d", toolMinTurns, n)
	case n < toolMinTurns && len(b.Tools.Allow) > 0:
		d.reject("claude.max_turns", "must be at least %d when tools.allow lets the model call tools (a call and the answer to its result), got %d", toolMinTurns, n)
	case n < toolMinTurns && b.Memory.Enabled:
		d.reject("claude.max_turns", "must be at least %d when memory is on (the model keeps a note with a tool call, then answers), got %d", toolMinTurns, n)
	case n < toolMinTurns && b.Reminders.Enabled:
		d.reject("claude.max_turns", "must be at least %d when reminders are on (the model keeps one with a tool call, then answers), got %d", toolMinTurns, n)
	}
	d.validateMemory(b.Memory)
	d.validateSchedule(b)
	d.validateTools(b)
	if a := b.Buttons.MaxAge.D(); a < minButtonsAge || a > maxButtonsAge {
		d.reject("buttons.max_age", "must be between 1m and 720h, got %v", a)
	}
	if usd := b.Claude.MaxBudgetUSD; !(usd >= 0) { // NaN fails too
		d.reject("claude.max_budget_usd", "must be 0 (no limit) or more, got %g", usd)
	}

	d.oneOf("groups", b.Groups, []string{GroupsOff, GroupsMention, GroupsAll}, "")
	d.oneOf("rich", b.Rich, []string{RichAuto, RichOff, RichAlways}, "")
	// The values the tools accept (package toolspec).
	d.oneOf("tts.voice", b.TTS.Voice, toolspec.Voices(), "")
	if s := b.TTS.Speed; !(s >= toolspec.MinSpeed && s <= toolspec.MaxSpeed) { // NaN (`.nan`) fails too
		d.reject("tts.speed", "must be between 0.25 and 4.0, got %g", s)
	}
	d.oneOf("tts.model", b.TTS.Model, toolspec.SpeechModels(), "")
	d.oneOf("tts.format", b.TTS.Format, toolspec.SpeechFormats(), "")
	if n := b.TTS.MaxChars; n < 0 {
		d.reject("tts.max_chars", "must be 0 (no bound) or a number of characters, got %d; leave the field out for %d (about three minutes of speech)", n, DefaultMaxSpokenChars)
	}
	d.oneOf("stt.model", b.STT.Model, toolspec.TranscriptionModels(), "")

	img := b.Image
	if d.oneOf("image.model", img.Model, toolspec.ImageModelNames(), "") {
		model, _ := toolspec.LookupImageModel(img.Model)
		forModel := " for " + img.Model
		d.oneOf("image.size", img.Size, model.Sizes, forModel)
		switch qualities := model.Qualities; {
		case len(qualities) > 0 && img.Quality != "":
			d.oneOf("image.quality", img.Quality, qualities, forModel)
		case len(qualities) == 0 && img.Quality != "":
			d.reject("image.quality", "must be left out for %s (it has one quality)", img.Model)
		}
		switch styles := model.Styles; {
		case len(styles) > 0 && img.Style != "":
			d.oneOf("image.style", img.Style, styles, forModel)
		case len(styles) == 0 && img.Style != "":
			d.reject("image.style", "must be left out for %s (only dall-e-3 has styles)", img.Model)
		}
	}
	if len(img.Keywords) == 0 {
		d.reject("image.keywords", "must list at least one word or phrase; leave the field out for the defaults (%s)", quoteList(defaultKeywords))
	}
	for i, k := range img.Keywords {
		if strings.TrimSpace(k) == "" {
			path := fmt.Sprintf("image.keywords[%d]", i)
			d.reject(path, "must not be empty")
		}
	}
	d.checkPlaceholders(b.Messages)
}

// validateTelegram checks the token source: exactly one of token_env,
// token_file and token, each in its form.
func (d *decoder) validateTelegram(t Telegram) {
	set := 0
	for _, v := range []string{t.TokenEnv, t.TokenFile, t.Token} {
		if v != "" {
			set++
		}
	}
	switch {
	case set == 0:
		d.reject("telegram", "needs token_env (the environment variable holding the BotFather token), token_file (a file holding it) or token")
	case set > 1:
		d.reject("telegram", "set only one of token_env, token_file and token")
	case t.Token != "":
		if err := ValidToken(t.Token); err != nil {
			d.reject("telegram.token", "is %v", err)
		}
	case t.TokenFile != "" && ValidToken(t.TokenFile) == nil:
		// Not quoted back, as below.
		d.reject("telegram.token_file", "holds a BotFather token, not the path of a file holding one; the token itself goes in token")
	case t.TokenFile != "":
		if strings.Contains(t.TokenFile, "$") && !slices.ContainsFunc(credentialsPrefixes, func(p string) bool { return strings.HasPrefix(t.TokenFile, p) }) {
			d.reject("telegram.token_file", "may name only $%s (systemd's LoadCredential=), at its start: $%s/NAME; got %q",
				CredentialsDirectory, CredentialsDirectory, t.TokenFile)
		}
	case !envName.MatchString(t.TokenEnv):
		// The value is not quoted back: it may be a token pasted in the
		// wrong field, and errors end up in logs and CI output.
		d.reject("telegram.token_env",
			"must be an environment variable name such as NARRATOR_TOKEN (letters, digits, _); a token itself goes in token")
	}
}

// checkVariables records each unknown {{variable}} of the system prompt,
// on the line of the file that holds it.
func (d *decoder) checkVariables(prompt string) {
	for _, name := range sysprompt.Unknown(prompt) {
		d.addf(d.lineOf(regexp.MustCompile(`\{\{\s*`+name+`\s*\}\}`), d.lines.line("system_prompt")), "system_prompt",
			"unknown variable {{%s}}; the system prompt may use {{%s}}", name, strings.Join(sysprompt.Names(), "}}, {{"))
	}
}

// lineOf is the first line from line on where the file matches re (line
// itself when none does, as when YAML escapes changed the text).
func (d *decoder) lineOf(re *regexp.Regexp, line int) int {
	lines := strings.Split(string(d.data), "\n")
	for i := line - 1; i >= 0 && i < len(lines); i++ {
		if re.MatchString(lines[i]) {
			return i + 1
		}
	}
	return line
}

// checkTimezone loads the brain's time zone, an IANA name such as
// Europe/Berlin. "Local" is refused: it would depend on the machine.
func (d *decoder) checkTimezone(b *Brain) {
	loc, err := time.LoadLocation(b.Timezone)
	if err != nil || b.Timezone == "Local" {
		d.reject("timezone", "must be an IANA time zone name such as Europe/Berlin, America/New_York or UTC, got %q", b.Timezone)
		return
	}
	b.location = loc
}

// checkPlaceholders records, per message text, the placeholders brainbot
// does not replace there.
func (d *decoder) checkPlaceholders(m Messages) {
	v := reflect.ValueOf(m)
	for i := range v.NumField() {
		name := yamlName(v.Type().Field(i))
		allowed := messagePlaceholders[name]
		var unknown []string
		for _, p := range placeholder.FindAllString(v.Field(i).String(), -1) {
			if !slices.Contains(allowed, p) && !slices.Contains(unknown, p) {
				unknown = append(unknown, p)
			}
		}
		if len(unknown) == 0 {
			continue
		}
		noun := "placeholder"
		if len(unknown) > 1 {
			noun += "s"
		}
		d.reject("messages."+name, "unknown %s %s; %s", noun, strings.Join(unknown, ", "), placeholdersOf(name))
	}
}

// placeholdersOf says which placeholders the messages field name may use.
func placeholdersOf(name string) string {
	if allowed := messagePlaceholders[name]; len(allowed) > 0 {
		return "this text may use " + strings.Join(allowed, ", ")
	}
	var others []string
	for field, allowed := range messagePlaceholders {
		others = append(others, fmt.Sprintf("messages.%s has %s", field, strings.Join(allowed, ", ")))
	}
	slices.Sort(others)
	return fmt.Sprintf("this text has no placeholders (only %s)", strings.Join(others, "; "))
}

// oneOf records an error unless value is in allowed, and reports whether it
// was. context qualifies the list, as in "for dall-e-3".
func (d *decoder) oneOf(path, value string, allowed []string, context string) bool {
	if slices.Contains(allowed, value) {
		return true
	}
	d.reject(path, "must be one of %s%s; got %q", strings.Join(allowed, ", "), context, value)
	return false
}

// fieldLines maps the path of every field a file sets ("" for the whole
// mapping) to the line of its value.
type fieldLines map[string]int

// line is the line of the field at path or, when the file leaves it out,
// of its nearest enclosing section that is there.
func (fl fieldLines) line(path string) int {
	for {
		if line, ok := fl[path]; ok {
			return line
		}
		if path == "" {
			return 1
		}
		path = parentPath(path)
	}
}

// quoteList writes words as brains/README.md does: bare, or quoted when
// they hold a space.
func quoteList(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = w
		if strings.Contains(w, " ") {
			out[i] = strconv.Quote(w)
		}
	}
	return strings.Join(out, ", ")
}
