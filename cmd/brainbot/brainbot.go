package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/mattn/go-isatty"
)

// version and revision are stamped at build time by make build and make
// dist: -ldflags "-X main.version=v1.2.3 -X main.revision=<commit>".
// Without them they come from what Go recorded in the binary, if anything.
var version, revision string

// Main is the whole program behind main(), with its environment made
// explicit so that tests can run it in-process.
type Main struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Environ is the process environment (os.Environ in production) and,
	// once a command read them (-env-file), its env file's variables.
	Environ []string
	// Terminal says whether Stderr is a terminal (console logs by default).
	Terminal bool
	// Executable is brainbot's own program (os.Executable in production):
	// brains' stdio MCP servers start through its `mcp exec`.
	Executable string
}

func newMain() *Main {
	m := &Main{
		Stdin:    os.Stdin,
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Environ:  os.Environ(),
		Terminal: isatty.IsTerminal(os.Stderr.Fd()),
	}
	// Only fails where /proc is missing; a brain's stdio MCP server then
	// reports that it does not start.
	m.Executable, _ = os.Executable()
	return m
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed (or found invalid brains)
	exitUsage = 2 // bad command line or configuration
)

const usage = `brainbot runs Telegram persona bots on the Claude Code CLI.

Usage:
  brainbot run [flags]              run every bot in the brains folder
  brainbot doctor [flags]           check what run needs (CLI, credentials, folders, tokens) and print each check
  brainbot init [flags]             set up a first bot: env file, brain, doctor (asks what it needs)
  brainbot chat [flags] BRAIN_FILE  talk to one brain in the terminal (no Telegram token needed)
  brainbot check [-connect] [PATH]  validate brain files (default: $BRAINBOT_BRAINS or ./brains); -connect tries their MCP servers
  brainbot backup FILE              copy the state database to FILE while brainbot runs
  brainbot usage [-since 7d]        what the bots cost: requests, tokens and USD per brain
  brainbot conversations [show]     list the running service's conversations, or show one (-bot, -chat)
  brainbot forget [-bot B] -user U  have the running service forget a user, as their /forget does
  brainbot status [-json]           what each bot of the running service does (its admin address's /status)
  brainbot carry -to sqlite|cluster carry the conversations from a cluster into one instance's SQLite file, or back
  brainbot mcp tts|image-gen|clock  serve an MCP server on stdio: our tools for other MCP clients, a clock for brains
  brainbot mcp exec -- COMMAND      run a brain's MCP server with only its own environment (brainbot's MCP configs use it)
  brainbot version                  print the versions of brainbot and of the Claude Code CLI (also --version)

Every command but mcp takes -env-file FILE: settings, tokens and keys from a
file of KEY=value lines, such as the service's /etc/brainbot/brainbot.env.
Run "brainbot <command> -h" for a command's flags.
`

// Run runs the command named by args[0] and returns the exit code.
func (m *Main) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "run":
		err = m.run(ctx, rest)
	case "check":
		err = m.check(ctx, rest)
	case "chat":
		err = m.chat(ctx, rest)
	case "init":
		err = m.initBot(ctx, rest)
	case "mcp":
		err = m.mcp(ctx, rest)
	case "doctor":
		err = m.doctor(ctx, rest)
	case "backup":
		err = m.backup(ctx, rest)
	case "usage":
		err = m.usage(ctx, rest)
	case "conversations":
		err = m.conversations(ctx, rest)
	case "forget":
		err = m.forget(ctx, rest)
	case "status":
		err = m.status(ctx, rest)
	case "carry":
		err = m.carryConversations(ctx, rest)
	case "version", "-version", "--version":
		err = m.version(ctx, rest)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(m.Stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(m.Stderr, "brainbot: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	var usageErr usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &usageErr):
		fmt.Fprintf(m.Stderr, "brainbot %s: %v\n", cmd, usageErr.err)
		return exitUsage
	case errors.Is(err, errReported):
		return exitError
	case errors.Is(err, errNotStarted):
		return exitUsage
	default:
		fmt.Fprintf(m.Stderr, "brainbot %s: %v\n", cmd, err)
		return exitError
	}
}

// usageError is a mistake on the command line or in the configuration:
// exit code 2, and the message names the flag or variable.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// errReported means the command already told the user what went wrong.
var errReported = errors.New("failure already reported")

// errNotStarted means run refused to start for a problem of its
// configuration or installation, already logged: exit code 2, which the
// systemd unit does not restart on (RestartPreventExitStatus).
var errNotStarted = errors.New("not started: configuration problem already reported")

// newFlagSet returns a flag set whose -h output explains the command.
func (m *Main) newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("brainbot "+name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: brainbot %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// getenv looks a variable up in m.Environ (the last assignment wins, as
// in the C library).
func (m *Main) getenv(name string) string {
	v, _ := m.lookupEnv(name)
	return v
}

func (m *Main) lookupEnv(name string) (string, bool) { return lookupIn(m.Environ, name) }

// version prints brainbot's version and revision, and the version of the
// Claude Code CLI that CLAUDE_CMD finds: the three things a bug report needs.
func (m *Main) version(ctx context.Context, args []string) error {
	fs := m.newFlagSet("version", "version [-env-file FILE]\n\nPrints brainbot's version and revision, and the Claude Code CLI's (CLAUDE_CMD).")
	cfg, err := m.loadConfig(fs, args, settingsNamed())
	if err != nil {
		return usageError{err}
	}
	v, rev := buildVersion()
	fmt.Fprintf(m.Stdout, "brainbot %s (revision %s)\n", v, rev)
	cli, err := m.claudeVersion(ctx, cfg.ClaudeCmd)
	if err != nil {
		fmt.Fprintf(m.Stdout, "Claude Code: %s %q: %v\n", lookupSetting("CLAUDE_CMD").name(), cfg.ClaudeCmd, err)
		return nil
	}
	fmt.Fprintf(m.Stdout, "Claude Code %s (%s)\n", cli, cfg.ClaudeCmd)
	return nil
}

// buildVersion returns the stamped version and revision, else what Go
// recorded: the module version ("(devel)" in a checkout) and the VCS
// revision when the build had one.
func buildVersion() (v, rev string) {
	v, rev = version, revision
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && rev == "" {
				rev = s.Value
			}
			if s.Key == "vcs.modified" && s.Value == "true" && revision == "" {
				rev += "+dirty"
			}
		}
	}
	if v == "" {
		v = "(unknown)"
	}
	if rev == "" {
		rev = "unknown"
	}
	return v, rev
}
