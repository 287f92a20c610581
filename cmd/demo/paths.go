package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// complete fills in the paths the command line left empty, from the
// repository the demo runs in, so that `go run ./cmd/demo` works from a
// fresh checkout once `make claude-cli` has installed the CLI.
func (o *options) complete(ctx context.Context, out io.Writer, runDir string) error {
	if o.brainbot != "" && o.claudeCmd != "" && o.brains != "" && o.panels != "" {
		return nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := repoRoot(wd)
	if err != nil {
		return fmt.Errorf("%w; pass -brainbot, -claude, -brains and -panels", err)
	}
	if o.brains == "" {
		o.brains = filepath.Join(root, "brains")
	}
	if o.panels == "" {
		o.panels = filepath.Join(root, "panels")
	}
	if o.claudeCmd == "" {
		if o.claudeCmd, err = pinnedClaude(root); err != nil {
			return err
		}
	}
	if o.brainbot == "" {
		// Built afresh: a bin/brainbot left from an older checkout would
		// demonstrate old code.
		fmt.Fprintln(out, "building brainbot...")
		o.brainbot = filepath.Join(runDir, "brainbot")
		return buildBrainbot(ctx, root, o.brainbot)
	}
	return nil
}

// repoRoot is the folder above dir (or dir) holding brainbot's go.mod.
func repoRoot(dir string) (string, error) {
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(mod, []byte("module brainbot\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the brainbot repository")
		}
		dir = parent
	}
}

// pinnedClaude finds the CLI `make claude-cli` installs under
// .cache/claude-code-<version>/ (in the package of this platform).
func pinnedClaude(root string) (string, error) {
	found, err := filepath.Glob(filepath.Join(root, ".cache", "claude-code-*", "node_modules", "@anthropic-ai", "claude-code-*", "claude"))
	if err != nil {
		return "", err
	}
	switch len(found) {
	case 0:
		return "", errors.New("no Claude Code CLI: run `make claude-cli` (it installs the pinned one under .cache/), set CLAUDE_CMD or pass -claude")
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("several Claude Code CLIs under .cache/ (%s): choose one with -claude", strings.Join(found, ", "))
}

// buildBrainbot builds ./cmd/brainbot of the repository at root into exe.
func buildBrainbot(ctx context.Context, root, exe string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", exe, "./cmd/brainbot")
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/brainbot: %w\n%s", err, output)
	}
	return nil
}
