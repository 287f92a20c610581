// Package launch starts a brain's own stdio MCP servers with only the
// environment the brain gives them.
//
// The Claude CLI starts a stdio server with its own environment and the
// server's env on top (checked on CLI 2.1.328), the model's credentials
// (ANTHROPIC_API_KEY and the like) included, and a third-party server has
// no business with those. So brainbot names itself as every such server's
// command:
//
//	brainbot mcp exec -keep NAME ... -- COMMAND ARGS...
//
// which clears its environment down to a minimal base (Base) and the
// variables the brain's env sets (-keep), then starts the server with the
// same stdin and stdout (Run). It stays, as the server's parent, so that
// the server does not outlive the CLI: a server that does not exit when
// its input closes would otherwise live on, the brain's secrets in its
// environment, after the CLI (or brainbot) was killed.
package launch

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Subcommand is the launcher's place among brainbot's commands: the
// arguments that come before Args' own.
var Subcommand = []string{"mcp", "exec"}

// KeepFlag names a variable of the brain's env the server keeps.
const KeepFlag = "keep"

var (
	// baseNames are what any program needs to run where it runs: where
	// its programs and files are, who and where it is, its language, time
	// zone and temporary folder, and the network's proxy and certificate
	// settings. No credential of brainbot's or of the model's.
	baseNames = []string{
		"PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR",
		"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
		"http_proxy", "https_proxy", "no_proxy", "all_proxy",
		"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR",
	}
	basePrefixes = []string{"LC_"}
)

// Base reports whether a server keeps the variable name whatever its
// brain says.
func Base(name string) bool {
	return slices.Contains(baseNames, name) || slices.ContainsFunc(basePrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// Args are the launcher's arguments after brainbot's executable that start
// command with args, keeping the variables env sets (sorted, so the same
// server always gets the same line).
func Args(command string, args []string, env map[string]string) []string {
	out := slices.Clone(Subcommand)
	for _, name := range slices.Sorted(maps.Keys(env)) {
		out = append(out, "-"+KeepFlag, name)
	}
	out = append(out, "--", command)
	return append(out, args...)
}

// Env is environ cut down to the base and the names in keep.
func Env(environ, keep []string) []string {
	var env []string
	for _, kv := range environ {
		if name, _, _ := strings.Cut(kv, "="); Base(name) || slices.Contains(keep, name) {
			env = append(env, kv)
		}
	}
	return env
}

// Exec replaces this process with command and args, looked up in the PATH
// of environ, its environment environ cut down by Env. It returns only
// when that fails.
func Exec(environ []string, command string, args, keep []string) error {
	env := Env(environ, keep)
	path, err := LookPath(command, env)
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	err = syscall.Exec(path, append([]string{command}, args...), env)
	return fmt.Errorf("exec %s: %w", path, err)
}

// LookPath finds command as a shell would: a name with a slash as it is,
// any other in the PATH of env (not this process's).
func LookPath(command string, env []string) (string, error) {
	if strings.Contains(command, "/") {
		return command, nil
	}
	var path string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v // the last one wins, as in exec
		}
	}
	for _, dir := range filepath.SplitList(path) {
		candidate := filepath.Join(dir, command)
		if info, err := os.Stat(candidate); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("%q is not in PATH (%s)", command, path)
}
