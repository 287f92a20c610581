package sqlite

import (
	"context"
	"math"
	"testing"
	"time"

	"brainbot/state"
)

func TestUsageReportAndSpentToday(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 23, 15, 0, 0, 0, time.UTC)
	record := func(at time.Time, bot string, user int64, mode, outcome string, claude, openai float64) {
		t.Helper()
		err := s.RecordUsage(ctx, state.Usage{At: at, Bot: bot, Chat: user, User: user, RequestID: "r", Mode: mode, Outcome: outcome,
			InputTokens: 100, OutputTokens: 10, CacheReadTokens: 1000, CacheWriteTokens: 5, ClaudeUSD: claude, OpenAIUSD: openai})
		if err != nil {
			t.Fatal(err)
		}
	}
	record(now.Add(-48*time.Hour), "voice", 1, "speech", "ok", 1, 1) // before the report's window
	record(now.Add(-2*time.Hour), "voice", 1, "speech", "ok", 0.01, 0.02)
	record(now.Add(-20*time.Hour), "voice", 2, "speech", "error", 0.01, 0) // yesterday, within 24h
	record(now.Add(-time.Hour), "voice", 2, "text", "ok", 0.03, 0)
	record(now.Add(-time.Hour), "chat", 3, "text", "ok", 0.5, 0)

	lines, err := s.UsageReport(ctx, state.UsageFilter{Since: now.Add(-24 * time.Hour), Bot: "voice"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || lines[0].Mode != "speech" || lines[0].Requests != 2 || lines[0].Errors != 1 ||
		lines[0].InputTokens != 200 || !near(lines[0].ClaudeUSD, 0.02) || !near(lines[0].OpenAIUSD, 0.02) {
		t.Fatalf("report = %+v", lines)
	}
	byUser, err := s.UsageReport(ctx, state.UsageFilter{Since: now.Add(-24 * time.Hour), ByUser: true})
	if err != nil || len(byUser) != 4 {
		t.Fatalf("report by user = %+v, %v", byUser, err)
	}
	if usd, _ := s.SpentToday(ctx, "voice", 0, now); !near(usd, 0.06) {
		t.Errorf("voice spent today %v, want 0.06 (yesterday's not counted)", usd)
	}
	if usd, _ := s.SpentToday(ctx, "voice", 2, now); !near(usd, 0.03) {
		t.Errorf("user 2 spent today %v, want 0.03", usd)
	}
	p, err := s.Prune(ctx, now, state.Retention{Usage: 24 * time.Hour})
	if err != nil || p.Usage != 1 {
		t.Errorf("pruned %+v, %v; want the 2-day-old record", p, err)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
