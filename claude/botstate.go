package claude

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"go.uber.org/zap"
)

// Each bot's CLI keeps its state apart: every process that shares a HOME
// (or a CLAUDE_CONFIG_DIR) shares the CLI's settings and reads every
// session stored there (CLI 2.1.328), and the operator's own ~/.claude is
// none of a bot's business. So a bot's CLI runs with
//
//	DataDir/claude/bot-<id>/           its working directory (unchanged: the
//	                                   CLI finds sessions by it)
//	DataDir/claude/home/bot-<id>/      its HOME
//	DataDir/claude/home/bot-<id>/.claude/
//	                                   its CLAUDE_CONFIG_DIR: settings.json
//	                                   (brainbot's, see botSettings) and
//	                                   projects/<slug>/<session>.jsonl
//
// The HOME is outside the working directory, which the CLI treats as its
// project. No credentials live there: a `claude` login stays the
// operator's; bots authenticate with what the environment gives them
// (ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN, a cloud provider).
type botDirs struct {
	work, home, config string
}

func (d *Driver) dirs(botID string) botDirs {
	home := filepath.Join(d.cfg.DataDir, "claude", "home", "bot-"+botID)
	return botDirs{work: d.workDir(botID), home: home, config: filepath.Join(home, ".claude")}
}

// env is what puts the CLI in the bot's folders.
func (b botDirs) env() []string {
	return []string{"HOME=" + b.home, "CLAUDE_CONFIG_DIR=" + b.config}
}

// prepareBots readies the folders of every bot whose CLI ran before (its
// working directory exists): its sessions move in from the shared folder
// of an earlier brainbot, and its settings are checked. At start-up, so
// that the log says at once what was found.
func (d *Driver) prepareBots() error {
	entries, err := os.ReadDir(filepath.Join(d.cfg.DataDir, "claude"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("claude: %w", err)
	}
	for _, e := range entries {
		if id, ok := strings.CutPrefix(e.Name(), "bot-"); ok && e.IsDir() && id != "" {
			if err := d.prepareBot(id); err != nil {
				return err
			}
		}
	}
	return nil
}

// prepareBot makes the bot's folders, moves its sessions in once per
// driver, and checks its settings (every time: it runs before each CLI
// starts).
func (d *Driver) prepareBot(botID string) error {
	b := d.dirs(botID)
	if err := os.MkdirAll(b.work, 0o750); err != nil {
		return fmt.Errorf("claude: working directory: %w", err)
	}
	for _, dir := range []string{b.home, b.config} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("claude: the bot's CLI folder: %w", err)
		}
	}
	log := d.log.With(zap.String("bot", botID))
	// One at a time: two CLIs of the bot may start at once.
	d.prepared.mu.Lock()
	defer d.prepared.mu.Unlock()
	if !d.prepared.bots[botID] {
		d.prepared.bots[botID] = true
		d.moveSessions(b, log)
		if err := removePromptFiles(b.home); err != nil {
			return fmt.Errorf("claude: an earlier system prompt file: %w", err)
		}
	}
	return ensureSettings(b.config, log)
}

// sharedConfigDir is where an earlier brainbot's CLIs kept every bot's
// sessions: CLAUDE_CONFIG_DIR, or ~/.claude, of the environment they got.
func (d *Driver) sharedConfigDir() string {
	var configDir, home string
	for _, kv := range slices.Concat(d.cfg.Environ, d.cfg.Env) {
		k, v, _ := strings.Cut(kv, "=")
		switch k { // the last one wins, as in exec
		case "CLAUDE_CONFIG_DIR":
			configDir = v
		case "HOME":
			home = v
		}
	}
	if configDir == "" && home != "" {
		configDir = filepath.Join(home, ".claude")
	}
	return configDir
}

// moveSessions moves the bot's transcripts (each <session>.jsonl with
// the <session>/ folder the CLI keeps beside it) from the shared config
// folder into the bot's own. A transcript already in the bot's folder is
// the newer one and stays.
func (d *Driver) moveSessions(b botDirs, log *zap.Logger) {
	shared := d.sharedConfigDir()
	if shared == "" || filepath.Clean(shared) == b.config {
		return
	}
	slug := filepath.Base(filepath.Dir(SessionFile(b.config, "", b.work, "x")))
	from, to := filepath.Join(shared, "projects", slug), filepath.Join(b.config, "projects", slug)
	entries, err := os.ReadDir(from)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			log.Warn("could not look for the bot's sessions in the shared Claude config folder", zap.String("folder", from), zap.Error(err))
		}
		return
	}
	if err := os.MkdirAll(to, 0o700); err != nil {
		log.Warn("could not move the bot's Claude sessions", zap.Error(err))
		return
	}
	sessions := 0
	for _, e := range entries {
		src, dst := filepath.Join(from, e.Name()), filepath.Join(to, e.Name())
		if _, err := os.Lstat(dst); err == nil {
			log.Warn("a session transcript is in both config folders; the bot's own is kept", zap.String("left", src))
			continue
		}
		if err := move(src, dst); err != nil {
			log.Warn("could not move a Claude session into the bot's config folder", zap.String("from", src), zap.Error(err))
			continue
		}
		if strings.HasSuffix(e.Name(), ".jsonl") {
			sessions++
		}
	}
	_ = os.Remove(from) // only if empty: what stayed behind is logged above
	if sessions > 0 {
		log.Info("moved the bot's Claude sessions into its own config folder", zap.Int("sessions", sessions),
			zap.String("from", from), zap.String("to", to))
	}
}

// move renames src to dst, copying across file systems (the operator's
// HOME and BRAINBOT_DATA may be on different ones).
func move(src, dst string) error {
	err := os.Rename(src, dst)
	if !errors.Is(err, syscall.EXDEV) {
		return err
	}
	info, err := os.Lstat(src)
	if err != nil {
		return err
	}
	tmp := dst + ".moving"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if info.IsDir() {
		err = os.CopyFS(tmp, os.DirFS(src))
	} else {
		err = copyFile(src, tmp)
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		return errors.Join(err, os.RemoveAll(tmp))
	}
	return os.RemoveAll(src)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// botSettings is the settings file of every bot's CLI, which reads no
// other (--setting-sources user; the operator's managed policy aside).
// Read is denied because the CLI reads a file a message names with "@"
// (CLI 2.1.328, checked: "what is in @/etc/passwd" sent the file to the
// model, --tools "" or not); the other built-in tools are off (--tools
// "") and denied too, should that ever change. Hooks, which run
// commands, are off.
const botSettings = `{
  "permissions": {
    "deny": ["Read", "Edit", "Write", "NotebookEdit", "Glob", "Grep", "Bash", "WebFetch", "WebSearch"]
  },
  "disableAllHooks": true
}
`

// ensureSettings makes the config folder's settings.json botSettings. A
// different file (an attacker's /config before slash commands were
// disabled, a hand edit) is logged and kept aside as settings.json.rejected.
func ensureSettings(configDir string, log *zap.Logger) error {
	path := filepath.Join(configDir, "settings.json")
	old, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(old, []byte(botSettings)):
		return nil
	case err == nil:
		if err := os.WriteFile(path+".rejected", old, 0o600); err != nil {
			return fmt.Errorf("claude: keep the changed settings aside: %w", err)
		}
		log.Warn("the Claude settings of a bot had been changed; restored", zap.String("file", path),
			zap.String("kept_as", path+".rejected"), zap.Int("bytes", len(old)))
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("claude: the bot's settings: %w", err)
	}
	if err := writeAtomic(path, []byte(botSettings)); err != nil {
		return fmt.Errorf("claude: the bot's settings: %w", err)
	}
	return nil
}

// writeAtomic replaces path with data (a new file of mode 0600 renamed
// over it), so a CLI starting meanwhile reads either file whole, and one
// still writing the old file writes into the old one.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, werr := io.Copy(f, bytes.NewReader(data))
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
