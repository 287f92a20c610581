package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
)

// BenchmarkFirstMessage: the first message of a new conversation through
// the whole product (Telegram stand-in, brainbot, the real CLI, the
// scripted model), with spares (the default) and with BRAINBOT_SPARES=0,
// in one run: from the message reaching the Bot API to the model
// receiving its request (the model's own timestamp), p50 and p99; and the
// resident memory of one spare. Each message comes once the CLIs are
// quiet: a spare ready and done with its start-up, as for a bot whose new
// conversations come less often than a CLI starts. Goal: with spares,
// p50 <= 100 ms.
func BenchmarkFirstMessage(b *testing.B) {
	measure := func(spares bool) []float64 {
		var env []string
		if !spares {
			env = append(env, "BRAINBOT_SPARES=0")
		}
		s := spareStack(b, env...)
		var lat []float64
		for i := range b.N {
			if spares {
				waitReadySpares(b, s, 1)
			}
			claudetest.WaitQuiet(b, s.DataDir)
			if spares && i == 0 {
				b.ReportMetric(spareRSS(b, s), "spare-rss-MB")
			}
			text := fmt.Sprintf("first message %d, spares %v", i, spares)
			start := time.Now()
			r := ask(b, s, "clock", int64(9000+i), text)
			if r.Summary.Fields["spare"] != spares {
				b.Fatalf("message %d: spare %v with spares %v", i, r.Summary.Fields["spare"], spares)
			}
			lat = append(lat, ms(modelGot(b, s, text).Sub(start)))
		}
		slices.Sort(lat)
		return lat
	}
	with, without := measure(true), measure(false)
	b.ReportMetric(with[len(with)/2], "spares-p50-ms")
	b.ReportMetric(with[len(with)*99/100], "spares-p99-ms")
	b.ReportMetric(without[len(without)/2], "cold-p50-ms")
	b.ReportMetric(without[len(without)*99/100], "cold-p99-ms")
	b.ReportMetric(0, "ns/op")
}

// modelGot is when the model received the request whose user's text is
// text.
func modelGot(b *testing.B, s *stack.Stack, text string) time.Time {
	for _, r := range slices.Backward(s.Model.Requests()) {
		for _, m := range r.Messages {
			for _, block := range m.Content {
				if m.Role == "user" && block.Type == "text" && block.Text == text {
					return r.At
				}
			}
		}
	}
	b.Fatalf("the model never got %q", text)
	return time.Time{}
}

// spareRSS is the resident memory of one of brainbot's spares (a CLI of
// no conversation yet), in MB.
func spareRSS(b *testing.B, s *stack.Stack) float64 {
	conversations := map[string]bool{}
	for _, l := range s.Logs().Find(0, func(l stack.Line) bool { return strings.HasPrefix(l.Msg, "claude request") }) {
		conversations[l.Str("session")] = true
	}
	for session, pid := range clis(s, "") {
		if !conversations[session] {
			return rssMBOrZero(pid)
		}
	}
	b.Fatal("no spare running")
	return 0
}

// demoPanel is the demo's panel (panels/cities.yaml) of three speaking
// members.
const demoPanel = `name: City hall
members: [chat, voice, painter]
speak: true
`

// demoPanelStack runs brainbot with the demo panel's members, and env.
func demoPanelStack(tb testing.TB, env ...string) *stack.Stack {
	tb.Helper()
	return stackOf(tb, map[string]string{"chat.yaml": panelChatBrain, "voice.yaml": panelVoiceBrain, "painter.yaml": panelPainterBrain},
		map[string]string{"cities.yaml": demoPanel}, append([]string{"BRAINBOT_GRACE=5s", "BRAINBOT_MAX_CLAUDE=4", "BRAINBOT_MAX_WARM=16"}, env...))
}

// demoMembers are the demo panel's members.
var demoMembers = []string{"chat", "voice", "painter"}

// BenchmarkDemoPanel: the demo panel (three members that speak, the
// scripted model, the OpenAI stand-in) from the /panel message reaching
// the Bot API to the panel's summary line, its last message sent, with
// spares (the default: each member keeps two for turns 1 and 3 and one
// for turn 2) and with BRAINBOT_SPARES=0, in one run. Each panel starts
// with the CLIs quiet. Goal: with spares, within 2.5 s.
func BenchmarkDemoPanel(b *testing.B) {
	measure := func(spares bool) []float64 {
		// The twelve spares it waits for need more than the default
		// share of a small machine's memory.
		env := []string{"BRAINBOT_SPARES_MEMORY=100%"}
		if !spares {
			env = append(env, "BRAINBOT_SPARES=0")
		}
		s := demoPanelStack(b, env...)
		var times []float64
		for i := range b.N {
			if spares {
				waitReadySpares(b, s, len(demoMembers)*4) // a conversation's and three panel turns' per member
			}
			claudetest.WaitQuiet(b, s.DataDir)
			group := int64(-100800 - i)
			mark := s.Logs().Len()
			start := time.Now()
			s.SendGroupCommand(group, 10+i, "/panel should cities ban cars?", demoMembers...)
			line := waitLogFrom(b, s, mark, func(l stack.Line) bool { return l.Msg == "panel" && l.Int("chat") == group })
			times = append(times, ms(time.Since(start)))
			if line.Str("outcome") != "ok" {
				b.Fatalf("panel %s", line.Raw)
			}
		}
		slices.Sort(times)
		return times
	}
	with, without := measure(true), measure(false)
	b.ReportMetric(with[len(with)/2], "spares-p50-ms")
	b.ReportMetric(slices.Max(with), "spares-max-ms")
	b.ReportMetric(without[len(without)/2], "cold-p50-ms")
	b.ReportMetric(0, "ns/op")
}
