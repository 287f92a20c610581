package cliproc

import (
	"bufio"
	"context"
	"errors"
	"strings"
	"testing"

	"brainbot/reaper"
)

// run starts sh -c script as the CLI and returns the lines it handed
// out, in order, once its stdout ended.
func run(t *testing.T, script string, maxLine int) []Line {
	t.Helper()
	procs, err := reaper.New(false)
	if err != nil {
		t.Fatal(err)
	}
	defer procs.Close()
	p, err := Start(context.Background(), procs, procs.Start, Command{Path: "/bin/sh", Args: []string{"-c", script}, MaxLine: maxLine})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	var lines []Line
	for l := range p.Lines() {
		lines = append(lines, l)
	}
	<-p.Exited()
	return lines
}

// Stdout's lines, "\r\n" or "\n" ended, the last one without; blank ones
// are skipped but counted, so a line's number is where it is.
func TestLines(t *testing.T) {
	got := run(t, `printf 'first\r\n\r\n  \nsecond\nlast'`, 1<<10)
	want := []Line{{N: 1, Text: []byte("first")}, {N: 4, Text: []byte("second")}, {N: 5, Text: []byte("last")}}
	if len(got) != len(want) {
		t.Fatalf("lines %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].N != want[i].N || string(got[i].Text) != string(want[i].Text) || got[i].Err != nil {
			t.Errorf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// A line longer than the longest taken ends the lines with
// bufio.ErrTooLong, numbered; the rest of stdout is discarded, so the CLI
// never blocks on a full pipe.
func TestLineTooLong(t *testing.T) {
	got := run(t, `printf 'ok\n%070000d\nnever\n' 0`, 1<<10)
	if len(got) != 2 || string(got[0].Text) != "ok" || !errors.Is(got[1].Err, bufio.ErrTooLong) || got[1].N != 2 {
		t.Errorf("lines %+v, want ok, then ErrTooLong on line 2", got)
	}
}

// The end of stderr is kept; the exit status read, and the exit told,
// once it exited.
func TestStderrTailAndExitCode(t *testing.T) {
	procs, err := reaper.New(false)
	if err != nil {
		t.Fatal(err)
	}
	defer procs.Close()
	p, err := Start(context.Background(), procs, procs.Start, Command{Path: "/bin/sh", Args: []string{"-c", "echo boom >&2; exit 3"}, MaxLine: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for range p.Lines() {
	}
	<-p.Exited()
	p.Shutdown()
	if p.ExitCode() != 3 || !strings.Contains(p.StderrTail(), "boom") || !p.HasExited() {
		t.Errorf("exit %d, stderr %q, exited %v", p.ExitCode(), p.StderrTail(), p.HasExited())
	}
	if _, err := Start(context.Background(), procs, procs.Start, Command{Path: "/nonexistent/claude"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing CLI: %v, want ErrNotFound", err)
	}
}
