package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
)

// When the box runs short of memory, brainbot ends its idle processes
// before the kernel kills one (issue 48). brainbot runs in a cgroup of
// 1.5 GB with two conversations warm; a file in memory written from the
// cgroup then takes it up to 95%: brainbot says the box is short, ends
// the idle CLIs, the kernel kills none, and the conversations go on.
// Making the cgroup needs root; skipped otherwise (the pool's
// TestShortOfMemoryEndsIdleFirst covers the policy without).
func TestEndToEndShortOfMemoryEndsIdleFirst(t *testing.T) {
	if why := cgroupsMissing(); why != "" {
		t.Skip(why)
	}
	const limit = 3 << 29 // 1.5 GB
	cg := newBenchCgroup(t, cgroupLimits{name: "short", memory: limit})
	s := startStack(t, stack.Config{
		Brainbot:  cg.wrap(t, brainbotBinary(t)),
		ClaudeCmd: claudetest.RequireCLI(t),
		Dir:       t.TempDir(),
		Brains:    map[string]string{"clock.yaml": clockBrain},
		Env:       []string{"BRAINBOT_GRACE=20s", "BRAINBOT_HTTP_ADDR=127.0.0.1:0"},
		Logs:      testLogs(t),
	}, nil)
	users := []int64{841, 842}
	for _, user := range users {
		ask(t, s, "clock", user, "before")
	}
	// Settled first: a spare still starting grows after the use is read,
	// and would take the box past its limit before the pool looks.
	waitMetrics(t, s, "two conversations warm and no spare starting", func(get func(string) float64) bool {
		return get("brainbot_claude_warm") == 2 && get(`brainbot_claude_spares{state="starting"}`) == 0
	})

	// Memory the kernel cannot drop: a file in memory (tmpfs) written by
	// a program in the cgroup is the cgroup's, and there is no swap. To
	// 93%: past the pool's 90%, with room for dd itself and what the
	// processes kept move until the pool's next look (up to a second).
	hog := filepath.Join("/dev/shm", fmt.Sprintf("brainbot-test-%d", os.Getpid()))
	t.Cleanup(func() { _ = os.Remove(hog) })
	mark := s.Logs().Len()
	fill := exec.Command(cg.wrap(t, "dd"), "if=/dev/zero", "of="+hog, "bs=1M",
		"count="+strconv.FormatInt((limit*93/100-cgroupUsed(t, cg))>>20, 10))
	if out, err := fill.CombinedOutput(); err != nil {
		t.Fatalf("filling the memory: %v: %s", err, out)
	}
	short := waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "claude: kept CLIs ended: the box is short of memory" })
	waitMetrics(t, s, "the idle processes ended", func(get func(string) float64) bool { return get("brainbot_claude_warm") == 0 })
	if n := cg.oomKills(t); n != 0 {
		t.Errorf("the kernel killed %d processes for memory; brainbot said %s", n, short.Raw)
	}
	if err := os.Remove(hog); err != nil {
		t.Fatal(err)
	}
	for _, user := range users {
		if got := wantText(t, ask(t, s, "clock", user, "after")); got != "You said: after (message 2)" {
			t.Errorf("user %d after the pressure: %q", user, got)
		}
	}
}

// cgroupUsed is what cg's processes hold now, as brainbot reads it
// (sysmem): its usage but the page cache the kernel can drop at once.
func cgroupUsed(t *testing.T, cg *benchCgroup) int64 {
	if cg.version == 2 {
		return cgroupNumber(t, cg.memory+"/memory.current") - cgroupKey(t, cg.memory+"/memory.stat", "inactive_file")
	}
	return cgroupNumber(t, cg.memory+"/memory.usage_in_bytes") - cgroupKey(t, cg.memory+"/memory.stat", "total_inactive_file")
}
