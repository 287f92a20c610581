package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// The spares' counts are what an admin scrapes, each read when scraped.
func TestTrackSpares(t *testing.T) {
	m := New()
	counts := SpareCounts{Ready: 2, Starting: 1, Wanted: 4, Taken: 7, Missed: 3, Failed: 1, Started: 12}
	m.TrackSpares(func() SpareCounts { return counts })
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body, _ := io.ReadAll(rec.Body)
		return string(body)
	}
	body := scrape()
	for _, want := range []string{
		`brainbot_claude_spares{state="ready"} 2`,
		`brainbot_claude_spares{state="starting"} 1`,
		`brainbot_claude_spares_wanted 4`,
		`brainbot_claude_spares_taken_total 7`,
		`brainbot_claude_spares_missed_total 3`,
		`brainbot_claude_spares_failed_total 1`,
		`brainbot_claude_spares_started_total 12`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	counts.Taken = 8
	if body := scrape(); !strings.Contains(body, "brainbot_claude_spares_taken_total 8\n") {
		t.Error("a later scrape does not read the counts again")
	}
}
