// Package panel reads panel files: a panel is several brains that answer
// one question in a group, comment on each other's answers and reply to the
// comments (see panels/README.md). A file <id>.yaml in the panels folder
// declares one; it is read with the same rules as brain files (problems as
// file:line: field: message).
package panel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"brainbot/bot/brain"
)

// Defaults and bounds of a panel file's fields.
const (
	MinMembers        = 2
	MaxMembers        = 6
	DefaultCommentCap = 3
	DefaultAnswer     = 600
	DefaultComment    = 300
	DefaultReply      = 300
	// MaxChars bounds every turn's length (a Telegram message's 4096).
	MaxChars = 4000
	minChars = 50
)

// Panel is one panel file.
type Panel struct {
	// ID is the file name without .yaml; Path the file.
	ID   string `yaml:"-"`
	Path string `yaml:"-"`
	// Name is how the panel is shown (default: its id).
	Name string `yaml:"name"`
	// Members are brain ids, 2 to 6, in the order they speak.
	Members []string `yaml:"members"`
	// Access says who may start the panel; every member brain's own
	// access.allowed_users applies too.
	Access Access `yaml:"access"`
	// Speak: members answer with voice notes in their brain's voice
	// (tts settings) instead of text.
	Speak bool `yaml:"speak"`
	// MaxChars bounds each turn's text, in characters.
	MaxChars Lengths `yaml:"max_chars"`
	// CommentCap is how many comments on one answer are forwarded to its
	// member in turn 3 (default 3); more are chosen at random.
	CommentCap int `yaml:"comment_cap"`

	// memberLines are the members' lines in the file.
	memberLines []int
}

// Access lists the users who may start a panel (empty: anyone the member
// brains allow).
type Access struct {
	AllowedUsers []int64 `yaml:"allowed_users"`
}

// Lengths are the length limits of the three turns.
type Lengths struct {
	Answer  int `yaml:"answer"`
	Comment int `yaml:"comment"`
	Reply   int `yaml:"reply"`
}

// Allowed reports whether user may start the panel.
func (p *Panel) Allowed(user int64) bool {
	return len(p.Access.AllowedUsers) == 0 || slices.Contains(p.Access.AllowedUsers, user)
}

// Parse reads and validates one panel file.
func Parse(path string) (*Panel, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read panel file: %w", err)
	}
	return ParseBytes(path, data)
}

// ParseBytes is Parse for a file already read.
func ParseBytes(path string, data []byte) (*Panel, error) {
	id, _ := brain.FileID(filepath.Base(path))
	p := &Panel{ID: id, Path: path}
	f := brain.DecodeYAML("panel", "members", "members: [...]", path, data, p)
	if f.Failed() {
		return nil, f.Err()
	}
	if !brain.ValidID(id) {
		f.Reject("", "panel id %q (the file name) may use only a-z, 0-9, _ and -", id)
	}
	validate(p, f)
	for i := range p.Members {
		p.memberLines = append(p.memberLines, f.Line(fmt.Sprintf("members[%d]", i)))
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

func validate(p *Panel, f *brain.YAMLFile) {
	if p.Name == "" {
		p.Name = p.ID
	}
	switch n := len(p.Members); {
	case !f.Has("members"):
		f.Reject("members", "is required: the brain ids of the panel, %d to %d", MinMembers, MaxMembers)
	case n < MinMembers || n > MaxMembers:
		f.Reject("members", "must list %d to %d brain ids, got %d", MinMembers, MaxMembers, n)
	}
	for i, m := range p.Members {
		field := fmt.Sprintf("members[%d]", i)
		switch {
		case !brain.ValidID(m):
			f.Reject(field, "%q is not a brain id (a-z, 0-9, _ and -: a brain's file name)", m)
		case slices.Index(p.Members, m) < i:
			f.Reject(field, "%q is listed twice", m)
		}
	}
	for i, u := range p.Access.AllowedUsers {
		if u == 0 {
			f.Reject(fmt.Sprintf("access.allowed_users[%d]", i), "must be a Telegram user id, or a group's or channel's id (negative) for the messages sent as that chat, got %d", u)
		}
	}
	for _, l := range []struct {
		field string
		v     *int
		def   int
	}{{"max_chars.answer", &p.MaxChars.Answer, DefaultAnswer}, {"max_chars.comment", &p.MaxChars.Comment, DefaultComment},
		{"max_chars.reply", &p.MaxChars.Reply, DefaultReply}} {
		if !f.Has(l.field) {
			*l.v = l.def
		} else if *l.v < minChars || *l.v > MaxChars {
			f.Reject(l.field, "must be between %d and %d characters, got %d", minChars, MaxChars, *l.v)
		}
	}
	if !f.Has("comment_cap") {
		p.CommentCap = DefaultCommentCap
	} else if p.CommentCap < 1 || p.CommentCap > MaxMembers-1 {
		f.Reject("comment_cap", "must be between 1 and %d, got %d", MaxMembers-1, p.CommentCap)
	}
}

// LoadDir parses every panel file in dir and returns the valid panels
// sorted by id, with the problems of the others as brain.Errors. A folder
// that does not exist holds no panels.
func LoadDir(dir string) ([]*Panel, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read panels folder: %w", err)
	}
	var (
		panels []*Panel
		errs   brain.Errors
	)
	seen := map[string]string{}
	for _, e := range entries {
		id, ok := brain.FileID(e.Name())
		if e.IsDir() || !ok {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if first, dup := seen[id]; dup {
			errs = append(errs, &brain.Error{File: path, Line: 1, Msg: fmt.Sprintf("panel id %q is taken by %s", id, first)})
			continue
		}
		seen[id] = path
		p, err := Parse(path)
		if err != nil {
			errs = append(errs, asErrors(path, err)...)
			continue
		}
		panels = append(panels, p)
	}
	slices.SortFunc(panels, func(a, b *Panel) int { return strings.Compare(a.ID, b.ID) })
	if len(errs) > 0 {
		return panels, errs
	}
	return panels, nil
}

func asErrors(path string, err error) brain.Errors {
	var errs brain.Errors
	if errors.As(err, &errs) {
		return errs
	}
	return brain.Errors{{File: path, Line: 1, Msg: err.Error()}}
}

// CheckMembers reports the members of p that name no brain in brains (the
// ids of the brains folder), each at its line in the file.
func CheckMembers(p *Panel, brains []string) error {
	var errs brain.Errors
	for i, m := range p.Members {
		if !slices.Contains(brains, m) {
			errs = append(errs, &brain.Error{File: p.Path, Line: p.memberLines[i], Field: fmt.Sprintf("members[%d]", i),
				Msg: fmt.Sprintf("no brain %q in the brains folder", m)})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// For picks the panel a /panel command sent to bot starts: the one named
// by the question's first word if it is the id of a panel bot belongs to,
// else the first panel (by id) bot belongs to. question comes back without
// the name. ok is false when bot belongs to no panel.
func For(panels []*Panel, bot, question string) (p *Panel, rest string, ok bool) {
	first, after, _ := strings.Cut(strings.TrimSpace(question), " ")
	for _, c := range panels {
		if c.ID == first && slices.Contains(c.Members, bot) {
			return c, strings.TrimSpace(after), true
		}
	}
	for _, c := range panels {
		if slices.Contains(c.Members, bot) {
			return c, strings.TrimSpace(question), true
		}
	}
	return nil, question, false
}
