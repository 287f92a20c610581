package main

import (
	"strings"
	"testing"
)

// doctor says where spares are bounded: by default in the one budget of
// kept CLIs, warm or spare; an install that sets BRAINBOT_SPARES_MEMORY
// keeps it as a cap beside that budget, the count it holds within
// max-warm.
func TestDoctorSpares(t *testing.T) {
	s := newSite(t, map[string]string{"chat.yaml": brainWith("CHAT_TOKEN", "")}, "CHAT_TOKEN="+chatToken)
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"BRAINBOT_SPARES_MEMORY=400MB"}, "ok    spares: up to 2 (400 MB at ~175 MB each: BRAINBOT_SPARES_MEMORY (-spares-memory), a cap beside the budget of kept CLIs; unset, spares count in that budget alone)\n"},
		{[]string{"BRAINBOT_SPARES_MEMORY=2000MB", "BRAINBOT_MAX_WARM=3"}, "ok    spares: up to 3 (2000 MB at ~175 MB each: BRAINBOT_SPARES_MEMORY (-spares-memory), a cap beside"},
		{[]string{"BRAINBOT_SPARES_MEMORY=25%"}, "% of "},
		{[]string{"BRAINBOT_SPARES_MEMORY=100MB"}, "warn  spares: none: 100 MB holds not one at ~175 MB each; every new conversation starts its CLI\n"},
		{[]string{"BRAINBOT_SPARES=0"}, "ok    spares: off\n"},
		{[]string{"BRAINBOT_SPARES=2", "BRAINBOT_MAX_WARM=6"}, "ok    spares: 2 a bot, in one budget with the warm CLIs: the memory in use and BRAINBOT_MAX_WARM (-max-warm) 6; when it is full the kept CLIs worth least end first\n"},
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

// A share counts the memory brainbot may use: on a 1.9 GiB server 25%
// keeps two spares. Unset is no cap.
func TestSparesMemoryShare(t *testing.T) {
	mb, detail, err := sparesMemory("25%", 1945<<20, "memory")
	if err != nil || mb != 486 || detail != "25% of 1.9 GiB memory" {
		t.Errorf("got %d MB, %q, %v; want 486 MB, 25%% of 1.9 GiB memory", mb, detail, err)
	}
	if mb, _, err := sparesMemory("", 1945<<20, "memory"); err != nil || mb != 0 {
		t.Errorf("unset: got %d MB, %v; want no cap (0)", mb, err)
	}
	for _, bad := range []string{"150%", "-1MB", "lots"} {
		if _, _, err := sparesMemory(bad, 1<<30, "memory"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
