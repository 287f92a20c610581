//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"brainbot/bot/telegramtest"
	"brainbot/cmd/internal/stack"
)

// openPTY opens a pseudo-terminal: what the test writes to master is
// typed at the terminal, whose end is tty.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return master, tty
}

// waitEcho waits until the terminal echoes what is typed, or does not.
func waitEcho(t *testing.T, master *os.File, on bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tios, err := unix.IoctlGetTermios(int(master.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		if tios.Lflag&unix.ECHO != 0 == on {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal's echo did not turn %v", map[bool]string{true: "on", false: "off"}[on])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// At a terminal, init does not show the token and keys typed into it; the
// other answers show as typed.
func TestInitHidesTypedSecrets(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	master, tty := openPTY(t)
	var screen syncBuffer
	go func() { _, _ = io.Copy(&screen, master) }()
	dir := t.TempDir()
	token, credential := stack.Token("typed"), "sk-ant-oat01-typed-credential"
	m := &Main{Stdin: tty, Stdout: tty, Stderr: tty,
		Environ: []string{"TELEGRAM_API_URL=" + tg.URL, "CLAUDE_CMD=/nonexistent/claude"}}
	done := make(chan int, 1)
	go func() { done <- m.Run(context.Background(), []string{"init", "-dir", dir, "-id", "typed"}) }()

	for _, answer := range []struct {
		question, text string
		secret         bool
	}{
		{"The bot's token from @BotFather", token, true},
		{"What should it answer with", "text", false},
		{"The model's credential", credential, true},
		{"An OpenAI API key", "", true},
	} {
		waitForLog(t, &screen, answer.question)
		waitEcho(t, master, !answer.secret)
		if _, err := io.WriteString(master, answer.text+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done: // doctor fails on the missing CLI, after the files are written
	case <-time.After(waitLong):
		t.Fatal("init did not end")
	}
	waitForLog(t, &screen, "doctor found problems")
	t.Logf("the terminal showed:\n%s", screen.String())
	for _, secret := range []string{token, credential} {
		if strings.Contains(screen.String(), secret) {
			t.Errorf("the terminal showed %q as it was typed", secret)
		}
	}
	if !strings.Contains(screen.String(), "[text]: text") {
		t.Error("the terminal did not show the kind as it was typed")
	}
	assertEnvFile(t, filepath.Join(dir, "brainbot.env"), "TYPED_TOKEN="+token, "CLAUDE_CODE_OAUTH_TOKEN="+credential)
}
