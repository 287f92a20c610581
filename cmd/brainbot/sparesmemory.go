package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"brainbot/claude/pool"
	"brainbot/sysmem"
)

// machineMemory is the memory brainbot may use, in bytes, and what says
// so: its cgroup's limit (memory.max, cgroup v2, as systemd's MemoryMax
// sets it; memory.limit_in_bytes, v1) when there is one below the
// machine's, else MemTotal; 0 where it cannot be read.
func machineMemory() (int64, string) {
	l, err := sysmem.Host().Limit()
	if err != nil {
		return 0, "memory"
	}
	return l.Bytes, l.Where()
}

// boxMemory is the box's memory now, for the pool's memory budget: the
// memory brainbot has (the cgroup's limit where lower), what is in use
// of it and the stalls for it. A box whose memory cannot be read has no
// budget of memory (the zero Memory): max-warm alone bounds.
func boxMemory() pool.Memory {
	box := sysmem.Host()
	l, err := box.Limit()
	if err != nil {
		return pool.Memory{}
	}
	used, err := box.Usage(l)
	if err != nil {
		return pool.Memory{}
	}
	stalled, ok := box.Pressure(l)
	if !ok {
		stalled = -1
	}
	return pool.Memory{Limit: l.Bytes, Used: used, Stalled: stalled}
}

// sparesMemory is the memory spares may hold, in MB, for the setting
// (BRAINBOT_SPARES_MEMORY: a share of memory, "25%", or a size, "400MB"),
// and how an admin reads it; 0 for the setting unset, the default: spares
// then count in the one budget of kept CLIs alone (issue 48). Installs
// that set it keep it as a cap beside that budget.
func sparesMemory(setting string, memory int64, where string) (mb int, detail string, err error) {
	if setting == "" {
		return 0, "", nil
	}
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

// sparesMemoryMB is the memory spares may hold on this machine, in MB,
// for the pool (the setting was checked with the config): 0, no cap of
// their own, when it is unset.
func sparesMemoryMB(cfg Config) int {
	if cfg.SparesMemory == "" {
		return 0
	}
	memory, where := machineMemory()
	mb, _, _ := sparesMemory(cfg.SparesMemory, memory, where)
	return max(mb, 1) // 0 would be no cap
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

// checkSpares says what bounds the spares: the one budget of kept CLIs,
// or how many BRAINBOT_SPARES_MEMORY's cap holds where it is set.
func checkSpares(cfg Config, r *report) {
	if cfg.Spares == 0 || cfg.MaxWarm == 0 {
		r.ok("spares", "off")
		return
	}
	if cfg.SparesMemory == "" {
		r.ok("spares", fmt.Sprintf("%d a bot, in one budget with the warm CLIs: the memory in use and %s %d; when it is full the kept CLIs worth least end first",
			cfg.Spares, lookupSetting("BRAINBOT_MAX_WARM").name(), cfg.MaxWarm))
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
	r.ok("spares", fmt.Sprintf("up to %d (%s at ~%d MB each: %s, a cap beside the budget of kept CLIs; unset, spares count in that budget alone)",
		n, detail, pool.SpareMB, lookupSetting("BRAINBOT_SPARES_MEMORY").name()))
}
