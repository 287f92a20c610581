// Package sysprompt fills the variables of a brain's system prompt:
// {{bot_name}}, {{user_first_name}}, {{user_language}}, {{chat_type}},
// {{date}}, {{weekday}} and {{time}}. Package brain rejects any other
// variable (Unknown), the bot computes the values of a conversation's
// message (Facts.Vars) and the Claude driver fills them in (Fill) when it
// starts the conversation's CLI process: the system prompt is part of the
// process's command line, so it holds the values of the message that
// started the process for as long as the process lives.
package sysprompt

import (
	"regexp"
	"slices"
	"strings"
	"time"
)

// The variables, as written between {{ and }}.
const (
	BotName       = "bot_name"
	UserFirstName = "user_first_name"
	UserLanguage  = "user_language"
	ChatType      = "chat_type"
	Date          = "date"
	Weekday       = "weekday"
	Time          = "time"
)

// Names lists the variables in the order brains/README.md documents them.
func Names() []string {
	return []string{BotName, UserFirstName, UserLanguage, ChatType, Date, Weekday, Time}
}

// variable is one use of a variable: a name in double braces, spaces
// allowed around it ({{ date }}).
var variable = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// Unknown lists, once each and in order, the variables text uses that are
// not among Names.
func Unknown(text string) []string {
	var unknown []string
	for _, m := range variable.FindAllStringSubmatch(text, -1) {
		if name := m[1]; !slices.Contains(Names(), name) && !slices.Contains(unknown, name) {
			unknown = append(unknown, name)
		}
	}
	return unknown
}

// Vars are the values of the variables, by name.
type Vars map[string]string

// Fill replaces each variable of text that vars has a value for; any other
// stays as written.
func Fill(text string, vars Vars) string {
	if len(vars) == 0 {
		return text
	}
	return variable.ReplaceAllStringFunc(text, func(use string) string {
		name := variable.FindStringSubmatch(use)[1]
		if value, ok := vars[name]; ok {
			return value
		}
		return use
	})
}

// Facts are what the bot knows when a message arrives.
type Facts struct {
	BotName string
	// UserFirstName and UserLanguage are the sender's, as Telegram gives
	// them (language: an IETF tag such as "en" or "pt-br"); either may
	// be empty.
	UserFirstName, UserLanguage string
	// ChatType is Telegram's: private, group or supergroup.
	ChatType string
	Now      time.Time
	// Location is the brain's timezone (UTC when nil).
	Location *time.Location
}

// Vars are the variables' values for these facts: date as 2006-01-02,
// weekday in English, time as 15:04 with the zone's abbreviation.
func (f Facts) Vars() Vars {
	loc := f.Location
	if loc == nil {
		loc = time.UTC
	}
	now := f.Now.In(loc)
	return Vars{
		BotName:       f.BotName,
		UserFirstName: strings.TrimSpace(f.UserFirstName),
		UserLanguage:  f.UserLanguage,
		ChatType:      f.ChatType,
		Date:          now.Format(time.DateOnly),
		Weekday:       now.Weekday().String(),
		Time:          now.Format("15:04 MST"),
	}
}
