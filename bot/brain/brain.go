// Package brain reads the brain files bot authors edit: one YAML file per
// bot, strictly decoded and validated, with every problem reported as
// file:line. It also loads a whole folder and watches it for edits.
package brain

import (
	"time"
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
	Access       Access   `yaml:"access"`
	Limits       Limits   `yaml:"limits"`
	Claude       Claude   `yaml:"claude"`
	TTS          TTS      `yaml:"tts"`
	Image        Image    `yaml:"image"`
	Messages     Messages `yaml:"messages"`
}

// Telegram says where the bot's BotFather token comes from: the
// environment variable TokenEnv, or Token inline. Exactly one is set.
type Telegram struct {
	TokenEnv string `yaml:"token_env"`
	Token    string `yaml:"token"`
}

// Access restricts who may talk to the bot. Empty AllowedUsers: anyone.
type Access struct {
	AllowedUsers []int64 `yaml:"allowed_users"`
}

// Limits caps use per Telegram user. PerUserPerDay 0 means unlimited.
type Limits struct {
	PerUserPerDay int `yaml:"per_user_per_day"`
}

// Claude holds settings passed through to the Claude Code CLI.
type Claude struct {
	Model string `yaml:"model"`
	// Timeout is the inactivity limit for one request (default 120s).
	Timeout Duration `yaml:"timeout"`
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

// Messages are what users are told in the bot's own words. Parse fills in
// defaults for any left empty.
type Messages struct {
	Error   string `yaml:"error"`
	Busy    string `yaml:"busy"`
	Denied  string `yaml:"denied"`
	Limit   string `yaml:"limit"`
	Reset   string `yaml:"reset"`   // confirmation after /reset
	Expired string `yaml:"expired"` // told once when a lost session had to be restarted
}

// Duration is a time.Duration written in YAML as "120s", "2m".
type Duration time.Duration
