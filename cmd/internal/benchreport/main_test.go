package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/report.md")

// The report for a recorded `make bench` run matches testdata/report.md
// (regenerate with -update after a deliberate change).
func TestReportGolden(t *testing.T) {
	in, err := os.Open("testdata/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	results, logs := map[string]map[string]float64{}, map[string]string{}
	parse(in, results, logs)
	var out bytes.Buffer
	write(&out, results, logs, "Measured on a test machine.")
	if strings.Contains(out.String(), "%!") {
		t.Errorf("a format verb went wrong:\n%s", out.String())
	}
	if *update {
		if err := os.WriteFile("testdata/report.md", out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/report.md")
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("report differs from testdata/report.md (run with -update if intended):\n%s", out.String())
	}
}

func TestParse(t *testing.T) {
	results, logs := map[string]map[string]float64{}, map[string]string{}
	parse(strings.NewReader(`goos: linux
BenchmarkParse-2            	   15369	     76573 ns/op	 419.52 MB/s	   70127 B/op	      85 allocs/op
BenchmarkRequest/text-2         	       5	       413.9 cli-startup-ms	         1.310 first-action-ms
BenchmarkMemory/brainbot-idle   	       5	        17.78 rss-MB
BenchmarkSmallServer-2          	       1	         1.000 skipped	         0 ns/op
--- BENCH: BenchmarkSmallServer-2
    smallserver_bench_test.go:66: making a cgroup of 1 CPU and 2 GB needs root (run make bench as root)
    smallserver_bench_test.go:70: a second line
PASS
`), results, logs)
	if want := "making a cgroup of 1 CPU and 2 GB needs root (run make bench as root)"; logs["BenchmarkSmallServer"] != want {
		t.Errorf("logs = %q, want the small server's first line", logs)
	}
	for _, tt := range []struct {
		bench, unit string
		want        float64
	}{
		{"BenchmarkParse", "MB/s", 419.52},
		{"BenchmarkParse", "allocs/op", 85},
		{"BenchmarkRequest/text", "cli-startup-ms", 413.9},
		{"BenchmarkMemory/brainbot-idle", "rss-MB", 17.78}, // no -N suffix
	} {
		if got, ok := results[tt.bench][tt.unit]; !ok || got != tt.want {
			t.Errorf("%s %s = %v (%v), want %v", tt.bench, tt.unit, got, ok, tt.want)
		}
	}
	if cell := (cell{bench: "BenchmarkMissing", unit: "x"}).render(results); cell != "—" {
		t.Errorf("a benchmark that did not run renders %q, want a dash", cell)
	}
}

// A small-server run that was skipped says why where its table would be.
func TestSmallServerSkipped(t *testing.T) {
	var out bytes.Buffer
	smallServer(&out, map[string]map[string]float64{"BenchmarkSmallServer": {"skipped": 1}},
		map[string]string{"BenchmarkSmallServer": "no cgroup v2 hierarchy"})
	if !strings.Contains(out.String(), "\nSkipped in this run: no cgroup v2 hierarchy.\n") {
		t.Errorf("no reason in\n%s", out.String())
	}
}
