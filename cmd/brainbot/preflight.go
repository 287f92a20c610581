package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sashabaranov/go-openai"

	"brainbot/bot/brain"
	"brainbot/bot/telegram"
)

// The preflight checks what `run` needs before it starts, so that an
// admin learns of a wrong path, a missing credential or a bad token at
// start-up, not from the first user's error reply. `run` refuses to start
// on a fatal failure and logs the rest; `doctor` prints every check.

// status is a check's verdict.
type status int

const (
	statusOK status = iota
	statusWarn
	statusFail
)

func (s status) String() string { return [...]string{"ok", "warn", "fail"}[s] }

// finding is the outcome of one check.
type finding struct {
	status status
	check  string // what was checked: "claude CLI", "bot voice"
	detail string
	// fatal means no bot can work: run refuses to start. A problem of one
	// bot is never fatal, so that the others run.
	fatal bool
}

// botState says whether a brain's bot starts, and if not why.
type botState struct {
	name    string // the brain's id, or the file name of a brain that did not load
	running bool
	why     string   // why it does not start
	fix     string   // what makes it start, when it only waits for its token
	invalid []string // the file:line problems of a brain that did not load
}

// report is everything the preflight found.
type report struct {
	findings []finding
	bots     []botState
	// claudeVersion is the CLI's version, empty if it did not run.
	claudeVersion string
}

func (r *report) add(s status, check, detail string, fatal bool) {
	r.findings = append(r.findings, finding{status: s, check: check, detail: detail, fatal: fatal && s == statusFail})
}

func (r *report) ok(check, detail string)   { r.add(statusOK, check, detail, false) }
func (r *report) warn(check, detail string) { r.add(statusWarn, check, detail, false) }

// fail records a failure of one bot: the others still run.
func (r *report) fail(check, detail string) { r.add(statusFail, check, detail, false) }

// fatal records a failure that stops run.
func (r *report) fatal(check, detail string) { r.add(statusFail, check, detail, true) }

// failed reports whether any check failed (doctor's exit code).
func (r *report) failed() bool {
	return slices.ContainsFunc(r.findings, func(f finding) bool { return f.status == statusFail }) ||
		slices.ContainsFunc(r.bots, func(b botState) bool { return len(b.invalid) > 0 })
}

// refused reports whether run must not start.
func (r *report) refused() bool {
	return slices.ContainsFunc(r.findings, func(f finding) bool { return f.fatal })
}

// failedCheck reports whether the named check failed.
func (r *report) failedCheck(check string) bool {
	return slices.ContainsFunc(r.findings, func(f finding) bool { return f.check == check && f.status == statusFail })
}

// summary is the one line saying which bots run and why the others do
// not: "2 of 4 bots running (chat, voice); failing (see above): painter;
// skipped: limited (LIMITED_TOKEN not set)". A bot with a failed check
// starts but does not work as its brain says (Telegram refuses its token,
// it speaks without an OpenAI key), so it is not counted as running. verb
// is "running", or "would run" for doctor.
func (r *report) summary(verb string) string {
	var running, failing, skipped []string
	for _, b := range r.bots {
		switch {
		case !b.running:
			skipped = append(skipped, fmt.Sprintf("%s (%s)", b.name, b.why))
		case r.failedCheck(botCheck(b.name)):
			failing = append(failing, b.name)
		default:
			running = append(running, b.name)
		}
	}
	line := fmt.Sprintf("%d of %d bots %s", len(running), len(r.bots), verb)
	if len(running) > 0 {
		line += " (" + strings.Join(running, ", ") + ")"
	}
	if len(failing) > 0 {
		line += "; failing (see above): " + strings.Join(failing, ", ")
	}
	if len(skipped) > 0 {
		line += "; skipped: " + strings.Join(skipped, ", ")
	}
	return line
}

// botCheck names the check of the bot with this brain id.
func botCheck(id string) string { return "bot " + id }

// Check names that callers look for.
const (
	checkClaude = "claude CLI"
	checkLog    = "log file"
)

// preflightTimeout bounds each outside call: the CLI's answers, getMe.
const preflightTimeout = 10 * time.Second

// preflight runs every check. onToken receives each bot token as soon as
// it is resolved, before anything could log it.
func (m *Main) preflight(ctx context.Context, cfg Config, onToken func(string)) *report {
	r := &report{}
	m.checkClaude(ctx, cfg, r)
	checkDataDir(cfg, r)
	checkLogFile(cfg, r)
	checkSpares(cfg, r)
	checkNATS(ctx, cfg, r)
	openAI := checkOpenAI(ctx, cfg, r)
	if checkBrainsDir(cfg, r) {
		m.checkBots(ctx, cfg, openAI, onToken, r)
	}
	return r
}

func checkDataDir(cfg Config, r *report) {
	if err := writableDir(cfg.DataDir); err != nil {
		r.fatal("data folder", fmt.Sprintf("%s %q: cannot write there: %v", lookupSetting("BRAINBOT_DATA").name(), cfg.DataDir, err))
		return
	}
	r.ok("data folder", cfg.DataDir+" is writable")
}

// checkLogFile fails for a log file brainbot could not write: the logger
// opens it only at the first line, and would report nothing but
// write errors on stderr.
func checkLogFile(cfg Config, r *report) {
	if cfg.LogFile == "" {
		return
	}
	if err := writableFile(cfg.LogFile); err != nil {
		r.fatal(checkLog, fmt.Sprintf("%s %q: cannot write it: %v", lookupSetting("BRAINBOT_LOG_FILE").name(), cfg.LogFile, err))
		return
	}
	r.ok(checkLog, cfg.LogFile+" is writable")
}

func checkBrainsDir(cfg Config, r *report) bool {
	name := lookupSetting("BRAINBOT_BRAINS").name()
	info, err := os.Stat(cfg.BrainsDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.fatal("brains folder", fmt.Sprintf("%s %q: no such folder", name, cfg.BrainsDir))
	case err != nil:
		r.fatal("brains folder", fmt.Sprintf("%s %q: %v", name, cfg.BrainsDir, err))
	case !info.IsDir():
		r.fatal("brains folder", fmt.Sprintf("%s %q: not a folder", name, cfg.BrainsDir))
	default:
		return true
	}
	return false
}

// writableDir reports whether brainbot can write in dir, or create it: it
// writes a file in the nearest folder that exists and removes it. It
// creates nothing else, so that `doctor` run by another user leaves no
// folder that user owns behind.
func writableDir(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		info, err := os.Stat(d)
		switch {
		case err == nil && !info.IsDir():
			return fmt.Errorf("%s is not a folder", d)
		case err == nil:
			f, err := os.CreateTemp(d, ".brainbot-probe-*")
			if err != nil {
				return err
			}
			f.Close()
			return os.Remove(f.Name())
		case !errors.Is(err, fs.ErrNotExist) || d == filepath.Dir(d):
			return err
		}
	}
}

// writableFile reports whether brainbot can append to path, or create it.
func writableFile(path string) error {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return writableDir(filepath.Dir(path))
	case err != nil:
		return err
	case info.IsDir():
		return errors.New("it is a folder")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// checkBots loads the brains as run will and checks each bot that will
// start: its token is well formed, its own, and answered by getMe; the
// OpenAI key is there, and taken by OpenAI (openAI says why not), if it
// speaks or paints (and a warning if it should listen).
func (m *Main) checkBots(ctx context.Context, cfg Config, openAI string, onToken func(string), r *report) {
	held := heldBrains(ctx, cfg)
	brains, err := brain.LoadDirHeld(cfg.BrainsDir, held)
	var problems brain.Errors
	if err != nil && !errors.As(err, &problems) {
		r.fatal("brains folder", err.Error())
		return
	}
	r.bots = invalidBrains(problems)
	if len(brains)+len(r.bots) == 0 {
		r.warn("brains folder", fmt.Sprintf("no brain files (*.yaml, *.yml) in %s: bots start as they are added", cfg.BrainsDir))
	} else {
		r.ok("brains folder", fmt.Sprintf("%d brain files in %s", len(brains)+len(r.bots), cfg.BrainsDir))
	}

	tokens := brain.ResolveTokens(brains, m.lookupEnv)
	refused := tokenProblems(brain.HeldFirst(brains, held), tokens)
	var asks []telegramCheck
	var deaf []string
	for _, b := range brains {
		token, err := b.ResolveToken(m.lookupEnv)
		var noToken *brain.NoTokenError
		switch {
		case errors.As(err, &noToken):
			r.bots = append(r.bots, botState{name: b.ID, why: noToken.Short, fix: noToken.Fix})
			continue
		case err != nil:
			// A token file brainbot cannot read: the admin's to fix.
			r.fail(botCheck(b.ID), err.Error())
			r.bots = append(r.bots, botState{name: b.ID, why: "token file not readable"})
			continue
		}
		onToken(token)
		if exposed := b.TokenFileWarning(m.lookupEnv); exposed != "" {
			r.warn(botCheck(b.ID), exposed)
		}
		r.bots = append(r.bots, botState{name: b.ID, running: true})
		checkOpenAIKey(b, cfg, openAI, r)
		if cfg.OpenAIKey == "" && b.STT.Enabled {
			deaf = append(deaf, b.ID)
		}
		if problem, bad := refused[b.ID]; bad {
			r.fail(botCheck(b.ID), problem)
			continue
		}
		asks = append(asks, telegramCheck{brain: b, token: token})
	}
	if len(deaf) > 0 {
		slices.Sort(deaf)
		r.warn("voice messages in", fmt.Sprintf("OPENAI_API_KEY is not set: %s answer voice messages with messages.text_only (stt.enabled: false says it is meant)",
			strings.Join(deaf, ", ")))
	}
	askTelegram(ctx, cfg.TelegramAPIURL, asks)
	for _, a := range asks {
		if a.err != nil {
			r.fail(botCheck(a.brain.ID), a.err.Error())
		} else {
			r.ok(botCheck(a.brain.ID), fmt.Sprintf("@%s (%s)", a.username, a.brain.Telegram))
		}
	}
	slices.SortFunc(r.bots, func(a, b botState) int { return cmp.Compare(a.name, b.name) })
}

// tokenProblems are what is wrong with the resolved tokens, by brain id: a
// variable that holds no BotFather token (clearer than Telegram's 404), or
// one token behind two brains (Telegram lets one client poll a token).
func tokenProblems(brains []*brain.Brain, tokens map[string]string) map[string]string {
	var errs brain.Errors
	if !errors.As(brain.CheckTokens(brains, tokens), &errs) {
		return nil
	}
	byPath := map[string]string{}
	for _, e := range errs {
		byPath[e.File] = e.Error()
	}
	problems := map[string]string{}
	for _, b := range brains {
		if p, ok := byPath[b.Path]; ok {
			problems[b.ID] = p
		}
	}
	return problems
}

// invalidBrains turns the problems of the brain files that did not load
// into one skipped bot per file.
func invalidBrains(problems brain.Errors) []botState {
	var bots []botState
	for _, p := range problems {
		name := filepath.Base(p.File)
		if len(bots) == 0 || bots[len(bots)-1].name != name {
			bots = append(bots, botState{name: name, why: "invalid brain file"})
		}
		last := &bots[len(bots)-1]
		last.invalid = append(last.invalid, p.Error())
	}
	return bots
}

// checkOpenAIKey fails a bot that speaks or paints without an OpenAI key
// that works: unset, or refused (openAI says why, "" when it works).
func checkOpenAIKey(b *brain.Brain, cfg Config, openAI string, r *report) {
	problem := openAI
	if cfg.OpenAIKey == "" {
		problem = "OPENAI_API_KEY is not set"
	}
	switch {
	case problem == "":
	case b.TTS.Enabled:
		r.fail(botCheck(b.ID), "it speaks (tts.enabled) but "+problem+": its voice replies will fail")
	case b.Image.Enabled:
		r.fail(botCheck(b.ID), "it paints (image.enabled) but "+problem+": its image replies will fail")
	}
}

// checkOpenAIName names the check of the OpenAI key.
const checkOpenAIName = "OpenAI key"

// checkOpenAI asks OpenAI whether it takes OPENAI_API_KEY, with one cheap
// authenticated call (GET /v1/models: it costs nothing), as getMe checks a
// bot token. It returns what is wrong for the bots that need the key, ""
// when OpenAI took it or no key is set (the bots say so themselves).
func checkOpenAI(ctx context.Context, cfg Config, r *report) string {
	if cfg.OpenAIKey == "" {
		return ""
	}
	c := openAIConfig(cfg)
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	_, err := openai.NewClientWithConfig(c).ListModels(ctx)
	var apiErr *openai.APIError
	switch {
	case errors.As(err, &apiErr) && (apiErr.HTTPStatusCode == 401 || apiErr.HTTPStatusCode == 403):
		r.fail(checkOpenAIName, fmt.Sprintf("OPENAI_API_KEY refused by OpenAI (%d %s: %s): copy a key again from https://platform.openai.com/api-keys; "+
			"until then voice and image replies and voice messages in fail", apiErr.HTTPStatusCode, apiErr.Code, apiErr.Message))
		return "OpenAI refuses OPENAI_API_KEY"
	case err != nil:
		r.fail(checkOpenAIName, fmt.Sprintf("no answer to GET /models from %s: %v", c.BaseURL, err))
		return "OpenAI does not answer"
	}
	r.ok(checkOpenAIName, "OPENAI_API_KEY accepted by "+c.BaseURL)
	return ""
}

// telegramCheck is one getMe call and its answer.
type telegramCheck struct {
	brain    *brain.Brain
	token    string
	username string
	err      error
}

// askTelegram calls getMe for every check at once.
func askTelegram(ctx context.Context, apiURL string, checks []telegramCheck) {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i := range checks {
		wg.Go(func() {
			c := &checks[i]
			c.username, c.err = telegram.CheckToken(ctx, apiURL, c.token)
		})
	}
	wg.Wait()
}
