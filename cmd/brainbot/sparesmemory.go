package main

import (
	"brainbot/claude/pool"
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// defaultSparesMemory is the share of the machine's memory spares take
// by default: on a 2 GB server, the usual home of a Telegram bot, two
// spares, and room for brainbot, the conversations' own CLIs and the
// system; on a big machine the other bounds (max-warm, spares a bot)
// bind first.
const defaultSparesMemory = "25%"

// machineMemory is the memory brainbot may use, in bytes, and what says
// so: its cgroup's limit (memory.max, cgroup v2, as systemd's MemoryMax
// sets it; memory.limit_in_bytes, v1) when there is one below the
// machine's, else MemTotal.
func machineMemory() (int64, string) {
	total, where := int64(0), "memory"
	if meminfo, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range bytes.Lines(meminfo) {
			if rest, ok := strings.CutPrefix(string(line), "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				total = kb << 10
			}
		}
	}
	if limit := cgroupMemoryLimit(); limit > 0 && (total == 0 || limit < total) {
		total, where = limit, "the cgroup's memory limit"
	}
	return total, where
}

// cgroupMemoryLimit is the memory limit of this process's cgroup in
// bytes, 0 for none.
func cgroupMemoryLimit() int64 {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		// hierarchy-id:controllers:path; v2's is "0::/path".
		parts := strings.SplitN(lines.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			file = filepath.Join("/sys/fs/cgroup", parts[2], "memory.max")
		case strings.Contains(","+parts[1]+",", ",memory,"):
			file = filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes")
		default:
			continue
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		// "max" (v2) or a huge number (v1) is no limit.
		if n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64); err == nil && n < 1<<60 {
			return n
		}
	}
	return 0
}

// sparesMemory is the memory spares may hold, in MB, for the setting
// (BRAINBOT_SPARES_MEMORY: a share of memory, "25%", or a size, "400MB"),
// and how an admin reads it.
func sparesMemory(setting string, memory int64, where string) (mb int, detail string, err error) {
	if pct, ok := strings.CutSuffix(setting, "%"); ok {
		n, err := strconv.ParseFloat(pct, 64)
		if err != nil || n < 0 || n > 100 {
			return 0, "", fmt.Errorf("%q: a share is 0%% to 100%%", setting)
		}
		mb = int(float64(memory>>20) * n / 100)
		return mb, fmt.Sprintf("%s%% of %.1f GiB %s", pct, float64(memory)/(1<<30), where), nil
	}
	n, err := strconv.Atoi(strings.TrimSuffix(strings.ToUpper(setting), "MB"))
	if err != nil || n < 0 {
		return 0, "", fmt.Errorf("%q: a share of memory (25%%) or a size in MB (400MB)", setting)
	}
	return n, fmt.Sprintf("%d MB", n), nil
}

// sparesMemoryMB is the memory spares may hold on this machine, in MB
// (the setting was checked with the config).
func sparesMemoryMB(cfg Config) int {
	memory, where := machineMemory()
	mb, _, _ := sparesMemory(cfg.SparesMemory, memory, where)
	return max(mb, 1) // 0 would be no bound
}

// gaugeCount reads g's value, a count.
func gaugeCount(g prometheus.Gauge) func() int {
	return func() int {
		var m dto.Metric
		if g.Write(&m) != nil {
			return 0
		}
		return int(m.GetGauge().GetValue())
	}
}

// checkSpares says how many spares this machine keeps at most.
func checkSpares(cfg Config, r *report) {
	if cfg.Spares == 0 || cfg.MaxWarm == 0 {
		r.ok("spares", "off")
		return
	}
	memory, where := machineMemory()
	mb, detail, err := sparesMemory(cfg.SparesMemory, memory, where)
	if err != nil {
		r.fatal("spares", lookupSetting("BRAINBOT_SPARES_MEMORY").name()+" "+err.Error())
		return
	}
	n := min(pool.SparesIn(mb), cfg.MaxWarm)
	if n == 0 {
		r.warn("spares", fmt.Sprintf("none: %s holds not one at ~%d MB each; every new conversation starts its CLI", detail, pool.SpareMB))
		return
	}
	r.ok("spares", fmt.Sprintf("up to %d (%s at ~%d MB each)", n, detail, pool.SpareMB))
}
