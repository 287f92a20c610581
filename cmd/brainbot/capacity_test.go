package main

import (
	"regexp"
	"strconv"
	"testing"

	"brainbot/claude/claudetest"
	"brainbot/syscpu"
)

// doctor starts an idle CLI, reads what it holds of its own, and says how
// many kept CLIs the box holds from it and the box's memory.
func TestDoctorKeptCLIsMeasured(t *testing.T) {
	cli := claudetest.RequireCLI(t)
	s := newSite(t, map[string]string{"chat.yaml": brainWith("CHAT_TOKEN", "")}, "CHAT_TOKEN="+chatToken,
		"CLAUDE_CMD="+cli, "HOME="+t.TempDir(), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	code, stdout, stderr := s.doctor(t)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !regexp.MustCompile(`(?m)^ok    memory: \d+\.\d GiB \((MemTotal, /proc/meminfo|the cgroup's memory limit, /sys/fs/cgroup/\S+)\); \d+\.\d GiB in use`).MatchString(stdout) {
		t.Errorf("no memory line in\n%s", stdout)
	}
	m := regexp.MustCompile(`(?m)^(ok  |warn)  kept CLIs: an idle CLI holds (\d+) MB of its own, and took \d\.\d\d CPU-s to start \(measured now; \d+ MB resident, .*\); ` +
		`\d+\.\d GiB holds about (\d+) kept CLIs, warm or spare \(80% of it at 2 times an idle CLI's own each\); brainbot keeps up to \d+ \(BRAINBOT_MAX_WARM \(-max-warm\)\), as the memory in use allows\n`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no measured kept CLIs line in\n%s", stdout)
	}
	// An idle CLI 2.1.328 holds 82-87 MB of its own beside others, and
	// 65 MB more alone (its executable's pages are then its alone).
	if own, _ := strconv.Atoi(m[2]); own < 40 || own > 250 {
		t.Errorf("an idle CLI holds %d MB of its own: not a CLI's", own)
	}
}

// Where no CLI can be started, doctor counts with the measured
// constants, beside the count BRAINBOT_MAX_WARM allows.
func TestDoctorKeptCLIsConstants(t *testing.T) {
	s := newSite(t, map[string]string{"chat.yaml": brainWith("CHAT_TOKEN", "")}, "CHAT_TOKEN="+chatToken)
	_, stdout, _ := s.doctor(t, "BRAINBOT_MAX_WARM=3")
	wantLines(t, stdout, "ok    kept CLIs: an idle CLI holds ~85 MB of its own (measured on Claude Code 2.1.328; none started here: it exited at once); ",
		"; brainbot keeps up to 3 (BRAINBOT_MAX_WARM (-max-warm)), as the memory in use allows\n")
	if !regexp.MustCompile(`(?m)^ok    CPUs: \d+ CPUs? \((this machine|a quota of [\d.]+ CPUs?, /sys/fs/cgroup/\S+)\); spares start \d+ at a time at most$`).MatchString(stdout) {
		t.Errorf("no CPUs line in\n%s", stdout)
	}
}

// doctor says how many CPUs brainbot may use and where the number comes
// from: a container's quota on a bigger host, or the machine.
func TestDescribeCPUs(t *testing.T) {
	for _, c := range []struct {
		cpus syscpu.CPUs
		want string
	}{
		{syscpu.CPUs{N: 1, Quota: 1, File: "/sys/fs/cgroup/system.slice/brainbot.service/cpu.max"},
			"1 CPU (a quota of 1 CPU, /sys/fs/cgroup/system.slice/brainbot.service/cpu.max); spares start 1 at a time at most"},
		{syscpu.CPUs{N: 2, Quota: 1.5, File: "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us"},
			"2 CPUs (a quota of 1.5 CPUs, /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us); spares start 2 at a time at most"},
		{syscpu.CPUs{N: 8}, "8 CPUs (this machine); spares start 8 at a time at most"},
	} {
		if got := describeCPUs(c.cpus); got != c.want {
			t.Errorf("describeCPUs(%+v) = %q, want %q", c.cpus, got, c.want)
		}
	}
}

// A 2 GB server holds 9 kept CLIs: 8 peaked at 1,530 MB there, 14 ran it
// out of memory (issue 48), and the pool keeps them within the memory as
// it is used.
func TestKeptCLIs(t *testing.T) {
	for _, c := range []struct {
		memory int64
		want   int
	}{
		{2 << 30, 9},
		{1 << 30, 4},
		{512 << 20, 2},
		{100 << 20, 0},
		{24 << 30, 115},
	} {
		if got := keptCLIs(c.memory, idleCLIOwnMB, cliSharedMB); got != c.want {
			t.Errorf("keptCLIs(%d MB) = %d, want %d", c.memory>>20, got, c.want)
		}
	}
}

// A 1 GB server holds 3 CLIs answering at once: with 4 the kernel killed
// CLIs in the middle of answers there (issue 48); 2 GB and more run the
// 4 of before.
func TestAnsweringCLIs(t *testing.T) {
	for _, c := range []struct {
		memory int64
		want   int
	}{
		{24 << 30, 4},
		{2 << 30, 4},
		{1 << 30, 3},
		{512 << 20, 1},
		{100 << 20, 1},
	} {
		if got := answeringCLIs(c.memory, idleCLIOwnMB, cliSharedMB); got != c.want {
			t.Errorf("%d MB holds %d answering, want %d", c.memory>>20, got, c.want)
		}
	}
}

// doctor warns where BRAINBOT_MAX_CLAUDE runs more CLIs at once than the
// memory holds answering, and says so plainly where it fits.
func TestDoctorAnswering(t *testing.T) {
	const holds3 = "1.0 GiB holds 3 CLIs answering at once (90% of it, less brainbot's own, at 2.5 times an idle CLI's own each; at most 4); "
	for _, c := range []struct {
		memory    int64
		maxClaude int
		want      finding
	}{
		{1 << 30, 4, finding{status: statusWarn, check: "answering", detail: holds3 + "brainbot runs up to 4 (BRAINBOT_MAX_CLAUDE (-max-claude)): " +
			"the box may run out of memory while they answer, the kernel killing one; set it lower, or give the box more memory"}},
		{1 << 30, 3, finding{status: statusOK, check: "answering", detail: holds3 + "brainbot runs up to 3 (BRAINBOT_MAX_CLAUDE (-max-claude))"}},
		{8 << 30, 8, finding{status: statusOK, check: "answering", detail: "8.0 GiB holds 4 CLIs answering at once (90% of it, less brainbot's own, at 2.5 times an idle CLI's own each; at most 4); " +
			"brainbot runs up to 8 (BRAINBOT_MAX_CLAUDE (-max-claude))"}},
	} {
		var r report
		checkAnswering(Config{MaxClaude: c.maxClaude}, &r, c.memory, idleCLIOwnMB, cliSharedMB)
		if len(r.findings) != 1 || r.findings[0] != c.want {
			t.Errorf("%d MB, max claude %d:\n%+v\nwant\n%+v", c.memory>>20, c.maxClaude, r.findings, c.want)
		}
	}
}
