// Package metrics holds brainbot's Prometheus metrics: what an admin
// scrapes from /metrics to watch the bots. Each Metrics has its own
// registry (no global state), with the Go runtime and process collectors
// beside brainbot's own. docs/observe.md lists every metric.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are brainbot's metrics. The zero value is not usable: call New.
type Metrics struct {
	registry *prometheus.Registry

	// Requests counts answered messages by bot, reply mode and outcome
	// (the summary line's fields).
	Requests *prometheus.CounterVec
	// Stage is the time of each stage of a request: queue_wait,
	// cli_start, turn1, turn2, locate, upload, total.
	Stage *prometheus.HistogramVec
	// ClaudeRunning and ClaudeWaiting are the Claude requests running and
	// waiting for a slot.
	ClaudeRunning prometheus.Gauge
	ClaudeWaiting prometheus.Gauge
	// CostUSD is what the bots spent, by bot and provider: ProviderClaude
	// (what the Claude CLI reported) and ProviderOpenAI (transcription,
	// speech and pictures, priced by package pricing). Add to it with
	// Spent.
	CostUSD *prometheus.CounterVec
	// SpendingCap is each bot's limits.daily_usd (0: no cap), for alerts
	// on spending near it.
	SpendingCap *prometheus.GaugeVec
	// Reserved is what each bot's answers under way may still cost: held
	// against its spending caps until their cost is recorded.
	Reserved *prometheus.GaugeVec
	// Tokens counts model tokens by bot and kind (input, output,
	// cache_read, cache_write).
	Tokens *prometheus.CounterVec
	// TelegramErrors counts failed Bot API calls by bot, method and code
	// ("429", "403", ..., "other" for the rest and when Telegram was not
	// reached).
	TelegramErrors *prometheus.CounterVec
	// JournalReplays counts messages answered after a restart.
	JournalReplays *prometheus.CounterVec
	// UndecodableUpdates counts updates skipped because the Telegram
	// library could not decode them, by bot.
	UndecodableUpdates *prometheus.CounterVec
	// Panics counts panics contained while handling an update, by bot and
	// stage (intake: the polling handler; delivery: an update the cluster
	// handed over; answer: the worker answering a message).
	Panics *prometheus.CounterVec
	// LastPoll is when each bot last had an answer from getUpdates (unix
	// seconds).
	LastPoll *prometheus.GaugeVec
	// ToolCalls is the time of the model's tool calls by bot, server,
	// tool and outcome (ok, error, denied); its _count is the number of
	// calls.
	ToolCalls *prometheus.HistogramVec
	// Panels counts finished panel runs by outcome (ok, partial, failed).
	Panels *prometheus.CounterVec
	// Stops counts turns stopped while the model wrote, by bot and how
	// (button: a draft's stop button or a group's ⏹; command: /stop).
	Stops *prometheus.CounterVec
	// ButtonTaps counts taps on the bots' buttons, by bot, kind (question,
	// read, stop, unknown) and outcome.
	ButtonTaps *prometheus.CounterVec
	// RichMessages counts rich messages by outcome (sent; unknown_method:
	// the Bot API server does not know them, split HTML instead, and the
	// bot no longer tries; refused: Telegram refused one, split HTML).
	RichMessages *prometheus.CounterVec
	// GuestAnswers counts answers to guest queries by outcome (ok, error).
	GuestAnswers *prometheus.CounterVec
	// EphemeralNotices counts notices shown to one user of a group, by
	// outcome (sent; fallback: Telegram refused, an ordinary reply sent).
	EphemeralNotices *prometheus.CounterVec
	// BrainFilesInvalid is the number of brain files in the brains folder
	// that have problems: their bot does not start, or keeps its last good
	// version.
	BrainFilesInvalid prometheus.Gauge
}

// stageBuckets span a chat action's worth to a long model answer.
var stageBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// New makes the metrics and registers them.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brainbot_requests_total", Help: "Messages answered, by bot, reply mode and outcome.",
		}, []string{"bot", "mode", "outcome"}),
		Stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "brainbot_request_stage_seconds", Help: "Time of each stage of a request.", Buckets: stageBuckets,
		}, []string{"stage"}),
		ClaudeRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "brainbot_claude_running", Help: "Claude requests running now.",
		}),
		ClaudeWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "brainbot_claude_waiting", Help: "Requests waiting for a Claude slot.",
		}),
		CostUSD: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brainbot_cost_usd_total", Help: "USD spent, by bot and provider (claude: what the Claude CLI reported; openai: transcription, speech and pictures by brainbot's price table).",
		}, []string{"bot", "provider"}),
		SpendingCap: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "brainbot_spending_cap_usd", Help: "Each bot's daily spending cap, its brain's limits.daily_usd (0: no cap).",
		}, []string{"bot"}),
		Reserved: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "brainbot_reserved_usd", Help: "USD each bot's answers under way may cost, held against its spending caps until their cost is recorded.",
		}, []string{"bot"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brainbot_tokens_total", Help: "Model tokens, by bot and kind (input, output, cache_read, cache_write).",
		}, []string{"bot", "kind"}),
		TelegramErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brainbot_telegram_errors_total", Help: "Failed Bot API calls, by bot, method and HTTP code (other: another code, or Telegram not reached).",
		}, []string{"bot", "method", "code"}),
		JournalReplays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brainbot_journal_replays_total", Help: "Messages answered after a restart, by bot.",
		}, []string{"bot"}),
		UndecodableUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brainbot_undecodable_updates_total", Help: "Updates skipped because they could not be decoded, by bot.",
		}, []string{"bot"}),
		Panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brainbot_panics_total", Help: "Panics contained while handling an update (the update was skipped), by bot and stage (intake, delivery, answer).",
		}, []string{"bot", "stage"}),
		LastPoll: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "brainbot_last_poll_timestamp_seconds", Help: "When each bot last had an answer from getUpdates.",
		}, []string{"bot"}),
		ToolCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "brainbot_tool_call_seconds", Help: "The model's tool calls, by bot, server, tool and outcome (ok, error, denied): their time; _count counts them.",
			Buckets: stageBuckets,
		}, []string{"bot", "server", "tool", "outcome"}),
		Panels: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brainbot_panels_total", Help: "Finished panel runs, by outcome (ok, partial: someone sat out, failed: no answer).",
		}, []string{"outcome"}),
		Stops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brainbot_stops_total", Help: "Turns stopped while the model wrote, by bot and how (button: a draft's stop button or a group's ⏹; command: /stop).",
		}, []string{"bot", "via"}),
		ButtonTaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brainbot_button_taps_total", Help: "Taps on the bots' buttons, by bot, kind (question, read, stop, unknown) and outcome.",
		}, []string{"bot", "kind", "outcome"}),
		RichMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brainbot_rich_messages_total", Help: "Rich messages (sendRichMessage) by outcome: sent, unknown_method (the Bot API server lacks them; split HTML sent instead), refused (split HTML instead).",
		}, []string{"outcome"}),
		GuestAnswers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brainbot_guest_answers_total", Help: "Answers to guest queries (a bot summoned where it is not a member), by outcome: ok, error.",
		}, []string{"outcome"}),
		EphemeralNotices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brainbot_ephemeral_notices_total", Help: "Notices shown to one user of a group (limits, access, busy...), by outcome: sent, fallback (refused: sent as an ordinary reply).",
		}, []string{"outcome"}),
		BrainFilesInvalid: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "brainbot_brain_files_invalid", Help: "Brain files in the brains folder with problems (brainbot doctor lists them): their bot does not start, or keeps its last good version.",
		}),
	}
	m.registry.MustRegister(m.ButtonTaps, m.BrainFilesInvalid)
	m.registry.MustRegister(m.Stops, m.RichMessages, m.GuestAnswers, m.EphemeralNotices, m.Requests, m.Stage, m.ClaudeRunning, m.ClaudeWaiting, m.CostUSD, m.SpendingCap, m.Reserved, m.Tokens,
		m.TelegramErrors, m.JournalReplays, m.UndecodableUpdates, m.Panics, m.LastPoll, m.ToolCalls, m.Panels,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// The providers of brainbot_cost_usd_total.
const (
	ProviderClaude = "claude"
	ProviderOpenAI = "openai"
)

// Spent adds usd that bot spent at provider; nothing is recorded for 0.
func (m *Metrics) Spent(bot, provider string, usd float64) {
	if usd > 0 {
		m.CostUSD.WithLabelValues(bot, provider).Add(usd)
	}
}

// ObserveStage records one stage's time; a stage that did not happen
// (zero) is not recorded.
func (m *Metrics) ObserveStage(stage string, d time.Duration) {
	if d > 0 {
		m.Stage.WithLabelValues(stage).Observe(d.Seconds())
	}
}

// Build reports what this brainbot is as brainbot_build_info{version,
// revision}, always 1: a dashboard shows which release each instance
// runs, and a query can join on it.
func (m *Metrics) Build(version, revision string) {
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "brainbot_build_info", Help: "Always 1: the version and revision of this brainbot as labels.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision},
	})
	info.Set(1)
	m.registry.MustRegister(info)
}

// TrackWarm reports warm() as brainbot_claude_warm: the conversations
// whose CLI process is kept alive, idle.
func (m *Metrics) TrackWarm(warm func() int) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "brainbot_claude_warm", Help: "Conversations whose Claude process is kept alive between messages (idle ones).",
	}, func() float64 { return float64(warm()) }))
}

// TrackReady reports ready() on every scrape as brainbot_ready: 1 when it
// returns nil, as /readyz answers 200.
func (m *Metrics) TrackReady(ready func() error) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "brainbot_ready", Help: "1 while /readyz would answer 200 (every bot this instance polls hears from Telegram), else 0.",
	}, func() float64 {
		if ready() != nil {
			return 0
		}
		return 1
	}))
}

// SpareCounts is what the Claude driver's spares (CLI processes started
// ahead of new conversations) are and did so far.
type SpareCounts struct {
	// Ready and Starting are the spares now, Wanted what their sets want.
	Ready, Starting, Wanted int
	// Taken counts new conversations a spare served, Missed those that
	// started a CLI of their own, Failed the spares that died or hung,
	// Started the spares started: a CLI each.
	Taken, Missed, Failed, Started uint64
}

// TrackSpares reports counts(), read once a scrape, as
// brainbot_claude_spares{state="ready"|"starting"},
// brainbot_claude_spares_wanted and the counters
// brainbot_claude_spares_taken_total, _missed_total, _failed_total and
// _started_total.
func (m *Metrics) TrackSpares(counts func() SpareCounts) {
	m.registry.MustRegister(sparesCollector{counts: counts,
		spares:  prometheus.NewDesc("brainbot_claude_spares", "Claude processes started ahead of new conversations, by state (ready, starting).", []string{"state"}, nil),
		wanted:  prometheus.NewDesc("brainbot_claude_spares_wanted", "Spares the bots want now (more for busy ones); the warm-process budget may allow fewer.", nil, nil),
		taken:   prometheus.NewDesc("brainbot_claude_spares_taken_total", "New conversations a spare served.", nil, nil),
		missed:  prometheus.NewDesc("brainbot_claude_spares_missed_total", "New conversations that found no spare and started a Claude process of their own.", nil, nil),
		failed:  prometheus.NewDesc("brainbot_claude_spares_failed_total", "Spares that failed to start, died or hung before use (each replaced).", nil, nil),
		started: prometheus.NewDesc("brainbot_claude_spares_started_total", "Spares started: a Claude process each (with _missed_total, the processes new conversations cost).", nil, nil),
	})
}

// sparesCollector reads the spares' counts once per scrape.
type sparesCollector struct {
	counts                                         func() SpareCounts
	spares, wanted, taken, missed, failed, started *prometheus.Desc
}

func (c sparesCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.spares, c.wanted, c.taken, c.missed, c.failed, c.started} {
		ch <- d
	}
}

func (c sparesCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.counts()
	ch <- prometheus.MustNewConstMetric(c.spares, prometheus.GaugeValue, float64(s.Ready), "ready")
	ch <- prometheus.MustNewConstMetric(c.spares, prometheus.GaugeValue, float64(s.Starting), "starting")
	ch <- prometheus.MustNewConstMetric(c.wanted, prometheus.GaugeValue, float64(s.Wanted))
	ch <- prometheus.MustNewConstMetric(c.taken, prometheus.CounterValue, float64(s.Taken))
	ch <- prometheus.MustNewConstMetric(c.missed, prometheus.CounterValue, float64(s.Missed))
	ch <- prometheus.MustNewConstMetric(c.failed, prometheus.CounterValue, float64(s.Failed))
	ch <- prometheus.MustNewConstMetric(c.started, prometheus.CounterValue, float64(s.Started))
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// ClusterState is what TrackCluster reports of this instance in a
// cluster (BRAINBOT_NATS_URL).
type ClusterState struct {
	// BotsPolled are the bots this instance polls, PartitionsOwned the
	// partitions of the conversations it consumes.
	BotsPolled, PartitionsOwned int
	// NATSConnected says whether it is connected to NATS, NATSReconnects
	// how often it connected again since it started.
	NATSConnected  bool
	NATSReconnects uint64
	// NATSUnavailable says whether JetStream fails this instance's calls
	// now (messages wait), NATSOutages how often that began.
	NATSUnavailable bool
	NATSOutages     uint64
}

// TrackCluster reports state() on every scrape: the bots this instance
// polls, the partitions it consumes, and its NATS connection.
func (m *Metrics) TrackCluster(state func() ClusterState) {
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "brainbot_cluster_bots_polled", Help: "Bots this instance polls Telegram for (it holds their poller lease).",
		}, func() float64 { return float64(state().BotsPolled) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "brainbot_cluster_partitions_owned", Help: "Partitions of the conversations this instance consumes.",
		}, func() float64 { return float64(state().PartitionsOwned) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "brainbot_cluster_nats_connected", Help: "1 while this instance is connected to NATS, else 0.",
		}, func() float64 {
			if state().NATSConnected {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "brainbot_cluster_nats_reconnects_total", Help: "Times this instance connected to NATS again after losing the connection.",
		}, func() float64 { return float64(state().NATSReconnects) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "brainbot_cluster_nats_unavailable", Help: "1 while NATS JetStream fails this instance's calls (messages wait for it), else 0.",
		}, func() float64 {
			if state().NATSUnavailable {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "brainbot_cluster_nats_outages_total", Help: "Times NATS JetStream began to fail this instance's calls.",
		}, func() float64 { return float64(state().NATSOutages) }))
}
