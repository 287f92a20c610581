package bot

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"brainbot/bot/telegramtest"
	"brainbot/claude"
	"brainbot/metrics"
	"brainbot/output"
	"brainbot/sysprompt"
	"brainbot/toolspec"
)

// fakeToolCalls are what fakeClaude reports for "#tools": calls of the
// brain's server, of ours, and of a tool the model made up.
var fakeToolCalls = []claude.ToolCall{
	{Server: "clock", Tool: "now", Duration: 20 * time.Millisecond, Outcome: claude.ToolOK},
	{Server: "clock", Tool: "now", Duration: 30 * time.Millisecond, Outcome: claude.ToolError},
	{Server: "clock", Tool: "secret", Duration: time.Millisecond, Outcome: claude.ToolDenied},
	{Server: toolspec.SpeechServer, Tool: toolspec.SpeechToolName, Outcome: claude.ToolError},
	{Server: "made-up", Tool: "x1", Outcome: claude.ToolError},
	{Server: "", Tool: "Bash", Outcome: claude.ToolError},
}

// fakeFileCall is the successful call of our file tool that made a
// speech or image request's file, as the driver reports it.
func fakeFileCall(mode claude.Mode, text, prompt string) claude.ToolCall {
	if mode == claude.Image {
		input, _ := json.Marshal(toolspec.ImageArgs{Prompt: "A picture of: " + prompt})
		return claude.ToolCall{Server: toolspec.ImageServer, Tool: toolspec.ImageToolName, Input: input, Outcome: claude.ToolOK}
	}
	input, _ := json.Marshal(toolspec.SpeechArgs{Text: text})
	return claude.ToolCall{Server: toolspec.SpeechServer, Tool: toolspec.SpeechToolName, Input: input, Outcome: claude.ToolOK}
}

const clockBrain = `timezone: Asia/Tokyo
mcp_servers:
  clock:
    command: /usr/bin/clock
    args: [--serve]
    env: {TZ: "${CLOCK_TZ}", KEY: "${CLOCK_KEY}", OTHER: "${UNSET_ONE}"}
  search:
    type: http
    url: https://${SEARCH_HOST}/mcp
    headers: {Authorization: "Bearer ${CLOCK_KEY}"}
tools:
  allow: [mcp__clock__now, mcp__search]
  timeout: 12s
`

// The brain's servers reach the driver resolved, with its allow-list and
// timeout; every resolved value is handed to OnSecret first; an unset
// variable is a warning. The system prompt's variables carry the
// message's facts.
func TestBrainToolsReachTheDriver(t *testing.T) {
	env := map[string]string{"CLOCK_TZ": "Asia/Tokyo", "CLOCK_KEY": "s3cret-clock-key", "SEARCH_HOST": "search.example"}
	var mu sync.Mutex
	var secrets []string
	now := time.Date(2026, 11, 23, 20, 30, 0, 0, time.UTC)
	h := newHarness(t, map[string]string{
		"clock": "name: Clock\nsystem_prompt: \"You are {{bot_name}}, talking to {{user_first_name}}.\"\ntelegram:\n  token: \"" + tokenA + "\"\n" + clockBrain,
	}, func(c *Config) {
		c.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		c.OnSecret = func(s string) { mu.Lock(); defer mu.Unlock(); secrets = append(secrets, s) }
		c.Now = func() time.Time { return now }
	})
	h.exchange(tokenA, 7, "what time is it?")
	req := h.claude.requests()[0]

	want := map[string]claude.MCPServer{
		"clock": {Type: "stdio", Command: "/usr/bin/clock", Args: []string{"--serve"},
			Env: map[string]string{"TZ": "Asia/Tokyo", "KEY": "s3cret-clock-key", "OTHER": ""}},
		"search": {Type: "http", URL: "https://search.example/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret-clock-key"}},
	}
	if got, _ := json.Marshal(req.MCPServers); string(got) != string(must(json.Marshal(want))) {
		t.Errorf("servers\n got %s\nwant %s", got, must(json.Marshal(want)))
	}
	if !slices.Equal(req.AllowedTools, []string{"mcp__clock__now", "mcp__search"}) || req.ToolTimeout != 12*time.Second {
		t.Errorf("allowed %q, timeout %v", req.AllowedTools, req.ToolTimeout)
	}
	if req.MaxTurns != 8 {
		t.Errorf("max turns %d, want a brain with tools' default 8", req.MaxTurns)
	}
	mu.Lock()
	for _, s := range []string{"Asia/Tokyo", "s3cret-clock-key", "search.example"} {
		if !slices.Contains(secrets, s) {
			t.Errorf("OnSecret never saw %q (saw %q)", s, secrets)
		}
	}
	mu.Unlock()
	const unsetWarning = "variables of the brain's MCP servers are not set; the servers get them empty"
	if w := h.waitLog(unsetWarning); !slices.Equal(w.ContextMap()["variables"].([]any), []any{"UNSET_ONE"}) {
		t.Errorf("warning %v", w.ContextMap())
	}
	// Told once, not with every message.
	h.exchange(tokenA, 7, "and now?")
	if n := h.logs.FilterMessage(unsetWarning).Len(); n != 1 {
		t.Errorf("%d warnings about unset variables after two messages, want 1", n)
	}

	// 20:30 UTC is the next morning in Tokyo.
	wantVars := sysprompt.Vars{sysprompt.BotName: "Clock", sysprompt.UserFirstName: "User7", sysprompt.UserLanguage: telegramtest.UserLanguage,
		sysprompt.ChatType: "private", sysprompt.Date: "2026-11-24", sysprompt.Weekday: "Tuesday", sysprompt.Time: "05:30 JST"}
	for k, v := range wantVars {
		if req.PromptVars[k] != v {
			t.Errorf("%s = %q, want %q", k, req.PromptVars[k], v)
		}
	}
	if req.SystemPrompt != "You are {{bot_name}}, talking to {{user_first_name}}." {
		t.Errorf("system prompt %q: the driver fills it, when it starts the process", req.SystemPrompt)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// A brain without servers sends none.
func TestNoBrainTools(t *testing.T) {
	h := newHarness(t, map[string]string{"plain": brainFile(tokenA, "")}, nil)
	h.exchange(tokenA, 7, "hi")
	if req := h.claude.requests()[0]; req.MCPServers != nil || req.AllowedTools != nil || req.ToolTimeout != 0 {
		t.Errorf("request of a brain without tools: %+v %q %v", req.MCPServers, req.AllowedTools, req.ToolTimeout)
	}
}

// Tool calls are counted by bot, server, tool and outcome; names the
// model made up count as "other".
func TestToolCallMetrics(t *testing.T) {
	reg := metrics.New()
	h := newHarness(t, map[string]string{"clock": brainFile(tokenA, clockBrain)}, func(c *Config) { c.Metrics = reg })
	h.exchange(tokenA, 7, "#tools")
	waitSummaries(t, h.logs, 1)
	want := map[[3]string]uint64{
		{"clock", "now", "ok"}: 1, {"clock", "now", "error"}: 1, {"clock", "secret", "denied"}: 1,
		{"tts", "text_to_speech", "error"}: 1, {"other", "other", "error"}: 2,
	}
	got := histogramCounts(t, reg)
	if len(got) != len(want) {
		t.Errorf("tool call series %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%v: %d calls, want %d", k, got[k], n)
		}
	}
}

// histogramCounts is the number of observations of each series of the
// tool call histogram, by server, tool and outcome.
func histogramCounts(t *testing.T, reg *metrics.Metrics) map[[3]string]uint64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	reg.ToolCalls.Collect(ch)
	close(ch)
	got := map[[3]string]uint64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		got[[3]string{labels["server"], labels["tool"], labels["outcome"]}] = pb.GetHistogram().GetSampleCount()
	}
	return got
}

// Every organised voice note and picture has a JSON sidecar saying what
// made it.
func TestSidecars(t *testing.T) {
	h := newHarness(t, map[string]string{
		"voice":  brainFile(tokenB, "tts:\n  enabled: true\n  voice: onyx\n  format: opus\n"),
		"artist": brainFile(tokenC, "image:\n  enabled: true\n  model: dall-e-3\n  size: 1792x1024\n"),
	}, nil)
	h.exchange(tokenB, 7, "sing")
	h.exchange(tokenC, 8, "draw a tree")

	voice := sidecarOf(t, filepath.Join(h.data, "audio-output", "bot-voice", "user-7"))
	if voice.Mode != "speech" || voice.BotID != "voice" || voice.Brain != "Tester" || voice.User != 7 || voice.Chat != 7 ||
		voice.Text != "You said: sing" || voice.Voice != "onyx" || voice.Format != "opus" || voice.Model != "tts-1" ||
		voice.RequestID == "" || voice.Created.IsZero() || voice.Bytes != int64(len("OggS-voice")) || voice.CostUSD == nil {
		t.Errorf("voice sidecar %+v", voice)
	}
	picture := sidecarOf(t, filepath.Join(h.data, "image-output", "bot-artist", "user-8"))
	if picture.Mode != "image" || picture.Prompt != "A picture of: draw a tree" || picture.Model != "dall-e-3" ||
		picture.Size != "1792x1024" || picture.CostUSD == nil || *picture.CostUSD <= 0 {
		t.Errorf("picture sidecar %+v", picture)
	}
}

// sidecarOf reads the one organised file's sidecar in dir.
func sidecarOf(t *testing.T, dir string) output.Metadata {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files, sidecars []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), output.SidecarExt) {
			sidecars = append(sidecars, e.Name())
		} else {
			files = append(files, e.Name())
		}
	}
	if len(files) != 1 || len(sidecars) != 1 || sidecars[0] != files[0]+output.SidecarExt {
		t.Fatalf("%s holds %q: want one file and its sidecar", dir, entries)
	}
	data, err := os.ReadFile(filepath.Join(dir, sidecars[0]))
	if err != nil {
		t.Fatal(err)
	}
	var m output.Metadata
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("sidecar is not JSON: %v\n%s", err, data)
	}
	if m.File != files[0] {
		t.Errorf("sidecar names %q, want %q", m.File, files[0])
	}
	return m
}
