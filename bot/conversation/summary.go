package conversation

import (
	"time"

	"go.uber.org/zap"

	"brainbot/claude"
	"brainbot/message"
	"brainbot/metrics"
)

// summary is what the one summary line of a request says.
type summary struct {
	mode    claude.Mode
	outcome string
	// claudeStartup (spawn to the CLI's init) and claudeTotal (spawn to
	// exit) tell the CLI's share of the time from ours.
	queueWait, claudeStartup, turn1, turn2, claudeTotal, locate, send time.Duration
	// firstText is arrival to the first streamed text in the chat.
	firstText time.Duration
	// transcribe is the time voice took to become text, audioSeconds how
	// much there was.
	transcribe   time.Duration
	audioSeconds int
	// cost is what the Claude CLI reported; openAI what transcription,
	// speech or the image cost by package pricing.
	cost, openAI float64
	tokens       claude.Tokens
	// ranClaude: the request reached the model (and has a cost to record);
	// warm: in a CLI process kept from the conversation's last request;
	// spare: in one started ahead of a new conversation.
	ranClaude, warm, spare bool
}

func (s *summary) noteClaude(res *claude.Result) {
	if res != nil {
		s.claudeStartup, s.turn1, s.turn2, s.claudeTotal = res.Startup, res.Turn1, res.Turn2, res.Total
		s.cost, s.tokens, s.warm, s.spare = res.CostUSD, res.Tokens, res.Warm, res.Spare
	}
}

// write logs the line every message gets, whatever became of it: the
// admin's record of the request (docs/observe.md lists its fields).
// Durations are whole milliseconds, the unit in the key.
func (s *summary) write(log *zap.Logger, total time.Duration) {
	log.Info("request",
		zap.String("mode", s.mode.String()), zap.String("outcome", s.outcome), zap.Bool("warm", s.warm), zap.Bool("spare", s.spare),
		zap.Int64("queue_wait_ms", s.queueWait.Milliseconds()), zap.Int64("claude_startup_ms", s.claudeStartup.Milliseconds()),
		zap.Int64("turn1_ms", s.turn1.Milliseconds()), zap.Int64("turn2_ms", s.turn2.Milliseconds()),
		zap.Int64("claude_total_ms", s.claudeTotal.Milliseconds()),
		zap.Int64("locate_ms", s.locate.Milliseconds()), zap.Int64("send_ms", s.send.Milliseconds()),
		zap.Int64("transcribe_ms", s.transcribe.Milliseconds()), zap.Int("audio_s", s.audioSeconds),
		zap.Int64("first_text_ms", s.firstText.Milliseconds()),
		zap.Int64("total_ms", total.Milliseconds()), zap.Float64("cost_usd", s.cost), zap.Float64("openai_usd", s.openAI),
		zap.Int64("input_tokens", s.tokens.Input), zap.Int64("output_tokens", s.tokens.Output),
		zap.Int64("cache_read_tokens", s.tokens.CacheRead), zap.Int64("cache_write_tokens", s.tokens.CacheWrite))
}

// count adds the request to the metrics.
func (s *summary) count(m *metrics.Metrics, bot string, total time.Duration) {
	m.Requests.WithLabelValues(bot, s.mode.String(), s.outcome).Inc()
	for stage, d := range map[string]time.Duration{"queue_wait": s.queueWait, "cli_start": s.claudeStartup,
		"turn1": s.turn1, "turn2": s.turn2, "locate": s.locate, "upload": s.send, "transcribe": s.transcribe, "total": total} {
		m.ObserveStage(stage, d)
	}
	m.Spent(bot, metrics.ProviderClaude, s.cost)
	m.Spent(bot, metrics.ProviderOpenAI, s.openAI)
	for kind, n := range map[string]int64{"input": s.tokens.Input, "output": s.tokens.Output,
		"cache_read": s.tokens.CacheRead, "cache_write": s.tokens.CacheWrite} {
		if n > 0 {
			m.Tokens.WithLabelValues(bot, kind).Add(float64(n))
		}
	}
}

// chatAction is the status the chat shows while a reply in mode is made.
func chatAction(mode claude.Mode) message.Action {
	switch mode {
	case claude.Speech:
		return message.RecordVoice
	case claude.Image:
		return message.UploadPhoto
	}
	return message.Typing
}

// fileKind is how a file made in mode is sent.
func fileKind(mode claude.Mode) message.FileKind {
	if mode == claude.Speech {
		return message.VoiceNote
	}
	return message.Picture
}
