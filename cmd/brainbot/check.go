package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"brainbot/bot/brain"
	"brainbot/bot/panel"
	"brainbot/toolspec"
)

// check validates a brain file, or the brain files in a folder, prints
// each problem as file:line: field: message, and fails when there is any.
// Bot authors run it before committing a brain; CI runs it on the
// examples. With -connect it also starts the brains' own MCP servers.
func (m *Main) check(ctx context.Context, args []string) error {
	fs := m.newFlagSet("check", "check [-connect] [-panels DIR] [-env-file FILE] [DIR|FILE]\n\nValidates the brain FILE, or every *.yaml/*.yml brain in DIR (default $BRAINBOT_BRAINS, else ./brains) and then the panel files (default $BRAINBOT_PANELS, else ./panels), whose members must be brains of DIR.")
	panelsDir := fs.String("panels", "", "folder of panel files to check (default $BRAINBOT_PANELS, else ./panels); not checked for a single brain FILE")
	connect := fs.Bool("connect", false, "also start each brain's own MCP servers (mcp_servers) as the Claude CLI would, list their tools, and report a server that does not start or a tools.allow entry no server offers")
	cfg, err := m.loadConfig(fs, args, settingsNamed())
	if err != nil {
		return usageError{err}
	}
	if fs.NArg() > 1 {
		return usageError{fmt.Errorf("want at most one folder or file, got %d arguments", fs.NArg())}
	}
	dir := cfg.BrainsDir
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	var held func(id string) bool
	if dir == cfg.BrainsDir {
		held = heldBrains(ctx, cfg) // the service's brains: its memory of who has which token applies
	}
	brains, err := loadBrains(dir, held)
	if err == nil && len(brains) == 0 {
		fmt.Fprintf(m.Stderr, "no brain files (*.yaml, *.yml) in %s\n", dir)
		return errReported
	}
	var problems brain.Errors
	if err != nil && !errors.As(err, &problems) {
		return err
	}
	for _, b := range brains {
		fmt.Fprintf(m.Stdout, "ok  %s  %s\n", b.Path, describe(b))
		if _, unset := b.ResolveMCPServers(m.lookupEnv); len(unset) > 0 {
			fmt.Fprintf(m.Stdout, "    note: not set, so the MCP servers would get them empty: %s\n", strings.Join(unset, ", "))
		}
		if exposed := b.TokenFileWarning(m.lookupEnv); exposed != "" {
			fmt.Fprintf(m.Stdout, "    warning: %s\n", exposed)
		}
		if *connect {
			problems = append(problems, m.connect(ctx, b)...)
		}
	}
	problems = append(problems, m.checkTokens(brain.HeldFirst(brains, held))...)
	panels := cmp.Or(*panelsDir, cfg.PanelsDir)
	var panelProblems brain.Errors
	if info, err := os.Stat(dir); err == nil && info.IsDir() {
		panelProblems = m.checkPanels(panels, dir)
	}
	if len(problems)+len(panelProblems) == 0 {
		return nil
	}
	for _, p := range append(problems, panelProblems...) {
		fmt.Fprintln(m.Stderr, p)
	}
	fmt.Fprintln(m.Stderr, problemsSummary(len(problems), dir, len(panelProblems), panels))
	return errReported
}

// problemsSummary counts the problems where they are: in the brains'
// folder (or file) and in the panels'.
func problemsSummary(brains int, brainsDir string, panels int, panelsDir string) string {
	switch {
	case panels == 0:
		return fmt.Sprintf("%d problem(s) in %s", brains, brainsDir)
	case brains == 0:
		return fmt.Sprintf("%d problem(s) in %s", panels, panelsDir)
	}
	return fmt.Sprintf("%d problem(s) in %s, %d in %s", brains, brainsDir, panels, panelsDir)
}

// checkTokens resolves the brains' tokens where check runs: the tokens
// that resolve are checked as run checks them (a BotFather token's form,
// one brain per token: each conflict names both files), and the brains
// without one are noted on one line, since CI checks brains without
// secrets.
func (m *Main) checkTokens(brains []*brain.Brain) brain.Errors {
	tokens := brain.ResolveTokens(brains, m.lookupEnv)
	var missing []string
	for _, b := range brains {
		if _, ok := tokens[b.ID]; !ok {
			missing = append(missing, fmt.Sprintf("%s (%s)", b.ID, tokenMissing(b, m.lookupEnv)))
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(m.Stdout, "note: no token here for %d of %d brains: %s; brainbot run needs them, check does not\n",
			len(missing), len(brains), strings.Join(missing, ", "))
	}
	var problems brain.Errors
	errors.As(brain.CheckTokens(brains, tokens), &problems)
	return problems
}

// tokenMissing says in a few words why b's token does not resolve.
func tokenMissing(b *brain.Brain, lookup func(string) (string, bool)) string {
	_, err := b.ResolveToken(lookup)
	var noToken *brain.NoTokenError
	if errors.As(err, &noToken) {
		return noToken.Short
	}
	return err.Error()
}

// checkPanels validates the panel files of dir, their members against the
// brain files of brainsDir; it prints each valid panel.
func (m *Main) checkPanels(dir, brainsDir string) brain.Errors {
	panels, err := panel.LoadDir(dir)
	var problems brain.Errors
	if err != nil && !errors.As(err, &problems) {
		return brain.Errors{{File: dir, Line: 1, Msg: err.Error()}}
	}
	var ids []string
	entries, _ := os.ReadDir(brainsDir) // read already by the brain check
	for _, e := range entries {
		if id, ok := brain.FileID(e.Name()); ok && !e.IsDir() {
			ids = append(ids, id)
		}
	}
	for _, p := range panels {
		if err := panel.CheckMembers(p, ids); err != nil {
			var errs brain.Errors
			errors.As(err, &errs)
			problems = append(problems, errs...)
			continue
		}
		mode := "writes"
		if p.Speak {
			mode = "speaks"
		}
		fmt.Fprintf(m.Stdout, "ok  %s  panel %q: %s (%s)\n", p.Path, p.Name, strings.Join(p.Members, ", "), mode)
	}
	return problems
}

// loadBrains loads the brain file at path, or the brains of the folder
// (where of two brains with one token the one held keeps it).
func loadBrains(path string, held func(id string) bool) ([]*brain.Brain, error) {
	if info, err := os.Stat(path); err != nil || info.IsDir() {
		return brain.LoadDirHeld(path, held)
	}
	b, err := brain.LoadFile(path)
	if err != nil {
		return nil, err
	}
	return []*brain.Brain{b}, nil
}

// describe says in a few words what a brain's bot does.
func describe(b *brain.Brain) string {
	mode := "text"
	if b.TTS.Enabled {
		mode += ", voice"
	}
	if b.Image.Enabled {
		mode += ", images"
	}
	if len(b.Tools.Allow) > 0 {
		mode += ", tools"
	}
	if m := b.Memory; m.Enabled {
		mode += fmt.Sprintf(", memory: %d notes of %d characters per user", m.MaxNotes, m.MaxNoteChars)
		if m.Groups {
			mode += ", in groups too"
		}
	}
	if r := b.Reminders; r.Enabled {
		mode += fmt.Sprintf(", reminders: %d per user, up to %s ahead", r.MaxPending, toolspec.Span(r.MaxAhead.D()))
	}
	if c := b.CheckIns; c.Enabled {
		mode += fmt.Sprintf(", check-ins: after %s quiet, at most %d a week, not in %s", toolspec.Span(c.QuietFor.D()), c.PerWeek, c.QuietHours)
	}
	return fmt.Sprintf("%q (%s)", b.Name, mode)
}
