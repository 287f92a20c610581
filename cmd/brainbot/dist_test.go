package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// distFiles are what a release tarball holds besides its folders, in
// order: what docs/install.md installs from it.
var distFiles = []string{
	"CONTRIBUTING.md", "README.md", "SHA256SUMS", "brainbot",
	"brains/README.md", "brains/clock.yaml", "brains/narrator.yaml", "brains/painter.yaml", "brains/voice.yaml",
	"deploy/brainbot-alerts.yml", "deploy/brainbot-dashboard.json", "deploy/brainbot.env.example", "deploy/brainbot.service",
	"docs/architecture.md", "docs/backup.md", "docs/configure.md", "docs/install.md", "docs/observe.md", "docs/operations.md",
	"docs/performance.md", "docs/scaling.md", "docs/security.md", "docs/troubleshoot.md",
	"panels/README.md", "panels/cities.yaml",
}

// make dist builds what an admin installs: the tarball checks against its
// .sha256 and its SHA256SUMS, holds the files the docs install (the deploy
// files as they are in deploy/), and its brainbot says what it is and
// where to get the Claude CLI without a Makefile.
func TestMakeDist(t *testing.T) {
	dir := t.TempDir()
	const version = "v9.9.9-disttest"
	build := exec.Command("make", "-s", "dist", "VERSION="+version, "REVISION=0123abcd", "DIST_DIR="+dir)
	build.Dir = "../.."
	// Not a sub-make of `make test`: its jobserver is not ours.
	build.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
	})
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make dist: %v\n%s", err, out)
	}
	name := "brainbot-" + version + "-" + runtime.GOOS + "-" + runtime.GOARCH
	runIn(t, dir, "sha256sum", "-c", name+".tar.gz.sha256")
	runIn(t, dir, "tar", "xzf", name+".tar.gz")
	release := filepath.Join(dir, name)
	runIn(t, release, "sha256sum", "--quiet", "-c", "SHA256SUMS")

	var got []string
	err := filepath.WalkDir(release, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(release, path)
			got = append(got, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, distFiles) {
		t.Errorf("the tarball holds\n%q\nwant\n%q", got, distFiles)
	}
	for _, f := range got {
		if f == "brainbot" || f == "SHA256SUMS" {
			continue
		}
		shipped, _ := os.ReadFile(filepath.Join(release, f))
		source, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil || !bytes.Equal(shipped, source) {
			t.Errorf("%s in the tarball is not the checkout's %s (%v)", f, f, err)
		}
	}
	for _, broken := range brokenLinks(t, release) {
		t.Errorf("a link in the tarball leads nowhere in it: %s", broken)
	}

	// As the docs' upgrade step has it: ./brainbot version, here without
	// the CLI installed yet.
	out := runIn(t, release, "./brainbot", "version", "-env-file", "/dev/null")
	if !strings.HasPrefix(out, "brainbot "+version+" (revision 0123abcd)\n") || strings.Contains(out, "make ") ||
		!strings.Contains(out, "npm install --prefix /opt/claude-code @anthropic-ai/claude-code@"+testedClaudeVersion) {
		t.Errorf("./brainbot version:\n%s\nwant the version, and the npm command to install the CLI (no make: a release has no Makefile)", out)
	}
	out = runIn(t, release, "./brainbot", "check", "brains")
	if !strings.Contains(out, "ok  brains/voice.yaml") {
		t.Errorf("./brainbot check brains:\n%s", out)
	}
}

// runIn runs a command in dir with a bare environment and returns its
// output; it fails the test if the command fails.
func runIn(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "CLAUDE_CMD=/nonexistent/claude"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// markdownLink is a link of a Markdown file: [text](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// brokenLinks lists the relative links of the Markdown files under root
// whose file is not under root, as "file: target".
func brokenLinks(t *testing.T, root string) []string {
	t.Helper()
	var broken []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range markdownLink.FindAllStringSubmatch(string(text), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), target)); err != nil {
				rel, _ := filepath.Rel(root, path)
				broken = append(broken, rel+": "+m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return broken
}

// make deb versions successive builds so that each sorts after the one
// before (dpkg --compare-versions), or dpkg takes it for a downgrade: in a
// scratch repository, builds before any tag, at tags (a release
// candidate's before its release), between them, and with uncommitted
// changes, whatever their commits' ids start with.
func TestDebVersionsSortInBuildOrder(t *testing.T) {
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		t.Skip("dpkg is not installed: Debian's versions are its to compare")
	}
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@localhost", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@localhost", "GIT_AUTHOR_DATE=2026-11-29T00:00:00Z", "GIT_COMMITTER_DATE=2026-11-29T00:00:00Z")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	git("init", "-q")
	n := 0
	change := func() {
		n++
		if err := os.WriteFile(filepath.Join(repo, "file"), []byte(strconv.Itoa(n)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commit := func() { change(); git("add", "file"); git("commit", "-qm", strconv.Itoa(n)) }
	var versions []string
	build := func() string {
		t.Helper()
		cmd := exec.Command("make", "-s", "--no-print-directory", "deb-version")
		cmd.Dir = "../.."
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
		}), "GIT_DIR="+filepath.Join(repo, ".git"), "GIT_WORK_TREE="+repo)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make deb-version: %v\n%s", err, out)
		}
		v := strings.TrimSpace(string(out))
		versions = append(versions, v)
		return v
	}

	for range 3 {
		commit()
		build()
	}
	change()
	build() // uncommitted changes
	for _, tag := range []string{"v0.1.0", "v0.2.0-rc1", "v0.2.0"} {
		commit()
		git("tag", tag)
		if v, want := build(), strings.ReplaceAll(strings.TrimPrefix(tag, "v"), "-", "~"); v != want {
			t.Errorf("the build at tag %s is version %q, want %q", tag, v, want)
		}
		change()
		build()
		for range 2 {
			commit()
			build()
		}
	}
	for i := 1; i < len(versions); i++ {
		if err := exec.Command(dpkg, "--compare-versions", versions[i-1], "lt", versions[i]).Run(); err != nil {
			t.Errorf("build %d's version %q does not sort after build %d's %q", i+1, versions[i], i, versions[i-1])
		}
	}
	if t.Failed() {
		t.Logf("versions: %q", versions)
	}
}
