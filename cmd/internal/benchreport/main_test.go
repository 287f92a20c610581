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
	results := map[string]map[string]float64{}
	parse(in, results)
	var out bytes.Buffer
	write(&out, results, "Measured on a test machine.")
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
	results := map[string]map[string]float64{}
	parse(strings.NewReader(`goos: linux
BenchmarkParse-2            	   15369	     76573 ns/op	 419.52 MB/s	   70127 B/op	      85 allocs/op
BenchmarkRequest/text-2         	       5	       413.9 cli-startup-ms	         1.310 first-action-ms
BenchmarkMemory/brainbot-idle   	       5	        17.78 rss-MB
PASS
`), results)
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
