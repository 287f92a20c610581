package main

import (
	"strings"
	"testing"
)

// doctor says how many spares this machine keeps: the memory setting's
// count, within max-warm.
func TestDoctorSpares(t *testing.T) {
	s := newSite(t, map[string]string{"chat.yaml": brainWith("CHAT_TOKEN", "")}, "CHAT_TOKEN="+chatToken)
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"BRAINBOT_SPARES_MEMORY=400MB"}, "ok    spares: up to 2 (400 MB at ~175 MB each)\n"},
		{[]string{"BRAINBOT_SPARES_MEMORY=2000MB", "BRAINBOT_MAX_WARM=3"}, "ok    spares: up to 3 (2000 MB at ~175 MB each)\n"},
		{[]string{"BRAINBOT_SPARES_MEMORY=100MB"}, "warn  spares: none: 100 MB holds not one at ~175 MB each; every new conversation starts its CLI\n"},
		{[]string{"BRAINBOT_SPARES=0"}, "ok    spares: off\n"},
		{nil, "% of "}, // the default: a share of the machine's memory
	} {
		_, stdout, _ := s.doctor(t, c.env...)
		if !strings.Contains(stdout, c.want) || !strings.Contains(stdout, "spares: ") {
			t.Errorf("%v: want %q in\n%s", c.env, c.want, stdout)
		}
	}
	if code, _, stderr := s.doctor(t, "BRAINBOT_SPARES_MEMORY=lots"); code == exitOK || !strings.Contains(stderr, "BRAINBOT_SPARES_MEMORY") {
		t.Errorf("a bad setting: exit %d, stderr %q; want it named", code, stderr)
	}
}

// A share counts the memory brainbot may use: on a 1.9 GiB server the
// default keeps two spares.
func TestSparesMemoryShare(t *testing.T) {
	mb, detail, err := sparesMemory(defaultSparesMemory, 1945<<20, "memory")
	if err != nil || mb != 486 || detail != "25% of 1.9 GiB memory" {
		t.Errorf("got %d MB, %q, %v; want 486 MB, 25%% of 1.9 GiB memory", mb, detail, err)
	}
	for _, bad := range []string{"150%", "-1MB", "lots", ""} {
		if _, _, err := sparesMemory(bad, 1<<30, "memory"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
