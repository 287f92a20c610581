// Command offlinechat is `make chat`: `brainbot chat` with the offline
// stand-ins of `make demo` beside it, so that a bot author sees how a
// brain's flow works (streamed text, voice notes, pictures, questions)
// before paying for anything. The scripted model (claude/claudetest)
// stands in for Anthropic's API and the OpenAI stand-in
// (mcp/openaitest) for speech and images; the Claude Code CLI and all of
// brainbot are real. The stand-ins are test support, which is why they
// live here and not in the brainbot binary.
//
//	offlinechat -brainbot bin/brainbot -claude CLI -- [chat flags] BRAIN_FILE
//
// The scripted model answers "You said: ..." and obeys the directives its
// documentation lists: "#ask" asks a question with options, for one.
// brains/README.md lists them for bot authors (a test keeps the list
// whole), and offlinechat says where as it starts.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"brainbot/claude/claudetest"
	"brainbot/mcp/openaitest"
)

// openAIKey is what brainbot is given: the stand-in takes any key.
const openAIKey = "sk-offline-chat"

func main() {
	brainbot := flag.String("brainbot", "bin/brainbot", "the brainbot executable")
	claudeCmd := flag.String("claude", os.Getenv("CLAUDE_CMD"), "the Claude Code CLI (default: $CLAUDE_CMD)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "Usage: offlinechat [-brainbot FILE] [-claude CLI] -- [brainbot chat flags] BRAIN_FILE")
		flag.PrintDefaults()
	}
	flag.Parse()
	code, err := run(*brainbot, *claudeCmd, flag.Args())
	if err != nil {
		fmt.Fprintf(os.Stderr, "offlinechat: %v\n", err)
	}
	os.Exit(code)
}

// run runs `brainbot chat args` against the stand-ins and returns its
// exit code.
func run(brainbot, claudeCmd string, args []string) (int, error) {
	if claudeCmd == "" {
		return 2, errors.New("no Claude Code CLI: pass -claude or set CLAUDE_CMD (make chat does)")
	}
	// The CLI's home, so that it reads none of this account's Claude
	// settings and writes nothing there.
	home, err := os.MkdirTemp("", "brainbot-offline-home-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(home)
	model := claudetest.NewModel()
	defer model.Close()
	openAI := openaitest.NewServer()
	defer openAI.Close()

	cmd := exec.Command(brainbot, append([]string{"chat"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "HOME="+home, "CLAUDE_CMD="+claudeCmd,
		"OPENAI_API_KEY="+openAIKey, "OPENAI_BASE_URL="+openAI.URL)
	cmd.Env = append(cmd.Env, model.Env()...)
	// Ctrl-C reaches brainbot from the terminal (it stops the answer being
	// written); here it only must not end the stand-ins under it. SIGTERM
	// is passed on.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	fmt.Fprintln(os.Stderr, "Offline: the stand-in model answers \"You said: ...\"; #ask, #long, #fail, #call and more show the rest of the flow (brains/README.md, \"Rehearsing offline\").")
	if err := cmd.Start(); err != nil {
		return 1, err
	}
	go func() {
		for sig := range signals {
			if sig == syscall.SIGTERM {
				_ = cmd.Process.Signal(sig)
			}
		}
	}()
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}
