package cgroup

import (
	"slices"
	"testing"
	"testing/fstest"
)

// The "some" line of a pressure file, and none read from a file without
// one or with a broken one.
func TestReadPressure(t *testing.T) {
	fsys := fstest.MapFS{
		"cpu.pressure": {Data: []byte("some avg10=59.18 avg60=87.41 avg300=68.62 total=9702145572\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=12\n")},
		"full":         {Data: []byte("full avg10=0.00 avg60=0.00 avg300=0.00 total=12\n")},
		"broken":       {Data: []byte("some avg10=x avg60=0.00 avg300=0.00 total=12\n")},
		"short":        {Data: []byte("some avg10=1.00\n")},
	}
	if p, err := ReadPressure(fsys, "cpu.pressure"); err != nil || p != (Pressure{Avg10: 59.18, Total: 9702145572}) {
		t.Errorf("ReadPressure = %+v, %v", p, err)
	}
	for _, name := range []string{"full", "broken", "short", "absent"} {
		if p, err := ReadPressure(fsys, name); err == nil {
			t.Errorf("ReadPressure(%s) = %+v, no error", name, p)
		}
	}
}

// A cgroup's folders from its own up to its hierarchy's mount, v1's
// named by its controllers.
func TestUp(t *testing.T) {
	hs, err := Self(fstest.MapFS{"proc/self/cgroup": {Data: []byte("5:cpu,cpuacct:/a/b\n0::/\n")}})
	if err != nil || len(hs) != 2 {
		t.Fatalf("Self() = %+v, %v", hs, err)
	}
	if got, want := slices.Collect(hs[0].Up()), []string{"sys/fs/cgroup/cpu,cpuacct/a/b", "sys/fs/cgroup/cpu,cpuacct/a", "sys/fs/cgroup/cpu,cpuacct"}; !slices.Equal(got, want) || !hs[0].Has("cpu") {
		t.Errorf("v1 Up() = %q, want %q", got, want)
	}
	if got := slices.Collect(hs[1].Up()); !slices.Equal(got, []string{"sys/fs/cgroup"}) || hs[1].Version != 2 {
		t.Errorf("v2 Up() = %q, want the root alone", got)
	}
}
