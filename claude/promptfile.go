package claude

// The system prompt reaches the CLI in a file (--system-prompt-file): on
// the command line, any local user reads it in /proc/PID/cmdline. The
// file is in the bot's own HOME (0700), readable by the service's user
// alone, one per prompt text, named by its hash: the command line, and
// so the fingerprint by which warm processes and spares are matched,
// still tells prompts apart.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// promptFilePrefix starts the name of every prompt file.
const promptFilePrefix = "system-prompt-"

// promptFile is where the bot whose HOME is home keeps prompt text.
func promptFile(home, text string) string {
	sum := sha256.Sum256([]byte(text))
	return filepath.Join(home, promptFilePrefix+hex.EncodeToString(sum[:16])+".txt")
}

// promptFiles counts the CLIs that use each prompt file: it is written
// for the first and removed after the last.
type promptFiles struct {
	mu   sync.Mutex
	uses map[string]int // by path
}

// acquire returns the file holding text in home, written unless a CLI
// uses it already; release it once the CLI is gone.
func (f *promptFiles) acquire(home, text string) (string, error) {
	path := promptFile(home, text)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.uses[path] == 0 {
		// Written afresh: a file left by a crash, or changed since, is
		// never trusted.
		if err := writePrivate(path, text); err != nil {
			return "", fmt.Errorf("claude: system prompt file: %w", err)
		}
	}
	if f.uses == nil {
		f.uses = map[string]int{}
	}
	f.uses[path]++
	return path, nil
}

// release says a CLI that used path is gone.
func (f *promptFiles) release(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.uses[path]--; f.uses[path] > 0 {
		return
	}
	delete(f.uses, path)
	os.Remove(path)
}

// writePrivate writes text to path, 0600, whole or not at all: a CLI
// starting meanwhile reads the old file or the new one.
func writePrivate(path, text string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".prompt-*") // 0600
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(text)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// removePromptFiles removes the prompt files in home: those of an earlier
// brainbot's CLIs, all gone before this driver starts the bot's first.
func removePromptFiles(home string) error {
	entries, err := os.ReadDir(home)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), promptFilePrefix) || strings.HasPrefix(e.Name(), ".prompt-") {
			if err := os.Remove(filepath.Join(home, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
