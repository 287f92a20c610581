package host

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/panel/engine"
	"brainbot/message"
	"brainbot/pricing"
	"brainbot/toolspec"
)

// run runs (or resumes) a panel in the background and writes its summary
// line when it ends.
func (h *Host) run(run *engine.Run) {
	h.cfg.Launch(func(ctx context.Context) {
		start := time.Now()
		rep, err := h.engine.Run(ctx, run)
		log := h.cfg.Log.With(zap.String("panel_run", run.ID), zap.String("panel", run.Panel), zap.Int64("chat", run.Chat),
			zap.Int64("user", run.Starter))
		if err != nil {
			log.Info("panel interrupted; it resumes after the restart", zap.Int("turn", run.Turn), zap.Error(err))
			return
		}
		outcome := "ok"
		switch {
		case rep.Answers == 0:
			outcome = "failed"
		case len(rep.SatOut) > 0:
			outcome = "partial"
		}
		h.cfg.Metrics.Panels.WithLabelValues(outcome).Inc()
		// The one summary line of a panel run (docs/operations.md).
		log.Info("panel",
			zap.String("outcome", outcome), zap.Strings("members", run.Members),
			zap.Int("answers", rep.Answers), zap.Int("comments", rep.Comments), zap.Int("replies", rep.Replies),
			zap.Int("dropped_comments", rep.Dropped), zap.Strings("sat_out", rep.SatOut), zap.Uint64("seed", run.Seed),
			zap.Bool("speak", run.Speak), zap.Int("resumes", run.Resumes), zap.Int("sent", rep.Sends),
			zap.Int64("run_ms", time.Since(start).Milliseconds()), zap.Int64("total_ms", time.Since(run.Started).Milliseconds()),
			zap.Float64("cost_usd", rep.CostUSD), zap.Float64("openai_usd", rep.OpenAIUSD),
			zap.String("manifest", filepath.Join(h.cfg.DataDir, engine.Folder(run.Chat, run.ID), "run.json")))
	})
}

// Resume takes up the runs an earlier process (or a dead instance) left,
// once their members' bots are connected (or after a
// minute without them: a member whose bot is gone fails its turns and
// sits out). It returns early when stopping is closed.
func (h *Host) Resume(ctx context.Context, stopping <-chan struct{}) {
	runs, err := h.cfg.Runs.RunningPanels(ctx)
	if err != nil {
		h.cfg.Log.Error("could not read the panel journal; unfinished panels are not resumed", zap.Error(err))
		return
	}
	for _, pr := range runs {
		var run engine.Run
		if err := json.Unmarshal(pr.Run, &run); err != nil {
			h.cfg.Log.Error("journaled panel run unreadable; dropped", zap.String("panel_run", pr.ID), zap.Error(err))
			_ = h.cfg.Runs.SavePanel(ctx, pr.ID, pr.Run, true, h.cfg.Now())
			continue
		}
		deadline := time.Now().Add(time.Minute)
		for !h.connected(run.Members) && time.Now().Before(deadline) {
			select {
			case <-stopping:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		run.Resumes++
		h.cfg.Log.Info("resuming panel run", zap.String("panel_run", run.ID), zap.String("panel", run.Panel), zap.Int("turn", run.Turn))
		h.run(&run)
	}
}

func (h *Host) connected(members []string) bool {
	for _, m := range members {
		if !h.cfg.Members.Connected(m) {
			return false
		}
	}
	return true
}

// Ask runs one member's turn in a Claude process of its own, in a session
// of its own: a panel leaves the member's conversations in the group and
// in private chats as they were, and no CLI stays warm for it.
func (h *Host) Ask(ctx context.Context, run *engine.Run, q engine.Question) (engine.Answer, error) {
	b := h.cfg.Brain(q.Member)
	if b == nil {
		return engine.Answer{}, fmt.Errorf("brain %s is gone", q.Member)
	}
	log := h.cfg.Log.With(zap.String("panel_run", run.ID), zap.String("bot", q.Member), zap.Int("turn", q.Turn),
		zap.Int64("chat", run.Chat), zap.Int64("user", run.Starter))
	pq := h.question(run, q.Member, b, log, q.Prompt, q.Schema)
	if h.cfg.SpeakEarly != nil {
		pq.OnText = q.OnText // only its voice takes the text as it streams
	}
	res, err := h.cfg.Pipeline.Ask(ctx, pq)
	var ans engine.Answer
	if res != nil {
		ans = engine.Answer{Text: res.Text, Structured: res.Structured, CostUSD: res.CostUSD}
	}
	return ans, err
}

// question is a turn of member (brain b) in run.
func (h *Host) question(run *engine.Run, member string, b *brain.Brain, log *zap.Logger, prompt, schema string) Question {
	return Question{Bot: member, Brain: b, Run: run.ID, Chat: run.Chat, Thread: run.Thread, Speak: run.Speak,
		User: run.Starter, UserName: run.StarterName, Prompt: prompt, Schema: schema, Log: log}
}

// speak speaks a member's text with its brain's voice settings, once the
// text is complete.
func (h *Host) speak(ctx context.Context, run *engine.Run, member, text string) ([]byte, string, float64, error) {
	b := h.cfg.Brain(member)
	if b == nil {
		return nil, "", 0, fmt.Errorf("brain %s is gone", member)
	}
	if h.cfg.Speaker == nil {
		return nil, "", 0, errors.New("no speech without an OpenAI key")
	}
	data, ext, spoken, err := h.cfg.Speaker.Speak(ctx, text, speechSettings(b))
	usd := h.spent(ctx, run, member, b, spoken) // made, so billed: on a failure too
	if err != nil {
		return nil, "", usd, err
	}
	return data, ext, usd, nil
}

// spent records the speech of chars characters made for member (brain
// b) in run, and returns what it cost.
func (h *Host) spent(ctx context.Context, run *engine.Run, member string, b *brain.Brain, chars int) float64 {
	usd, _ := pricing.Speech(cmp.Or(b.TTS.Model, toolspec.DefaultSpeechModel), chars)
	log := h.cfg.Log.With(zap.String("panel_run", run.ID), zap.String("bot", member))
	h.cfg.Pipeline.Spent(context.WithoutCancel(ctx), h.question(run, member, b, log, "", ""), usd)
	return usd
}

// speechSettings are brain b's voice settings, with its bound on one
// spoken answer.
func speechSettings(b *brain.Brain) toolspec.SpeechSettings {
	return toolspec.SpeechSettings{Voice: b.TTS.Voice, Speed: b.TTS.Speed, Model: b.TTS.Model, Format: b.TTS.Format,
		MaxChars: b.TTS.MaxChars}
}

// outbox sends as member to the run's chat, replying to message replyTo.
func (h *Host) outbox(run *engine.Run, member string, replyTo int) (Outbox, error) {
	if !h.cfg.Members.Connected(member) {
		return nil, fmt.Errorf("bot %s is not connected", member)
	}
	log := h.cfg.Log.With(zap.String("panel_run", run.ID), zap.String("bot", member))
	return h.cfg.Members.Outbox(message.Key{Bot: member, Chat: run.Chat, Thread: run.Thread}, replyTo, log), nil
}

// Send posts a member's turn: its voice note, or its text.
func (h *Host) Send(ctx context.Context, run *engine.Run, it *engine.Item, replyTo int) (int, error) {
	o, err := h.outbox(run, it.Member, replyTo)
	if err != nil {
		return 0, err
	}
	if run.Speak {
		err = o.File(ctx, message.VoiceNote, filepath.Join(h.cfg.DataDir, it.File))
	} else {
		err = o.Text(ctx, it.Text, true)
	}
	if err == nil && len(o.Sent()) == 0 {
		err = errors.New("no message sent")
	}
	if err != nil {
		return 0, err
	}
	return o.Sent()[0], nil
}

// Note posts the panel's closing note, from the first member that can.
func (h *Host) Note(ctx context.Context, run *engine.Run, text string) error {
	for _, m := range run.Members {
		o, err := h.outbox(run, m, run.MessageID)
		if err != nil {
			continue
		}
		return o.Text(ctx, text, false)
	}
	return errors.New("no member bot is connected")
}

// Save journals the run.
func (h *Host) Save(ctx context.Context, run *engine.Run) error {
	data, err := json.Marshal(run)
	if err != nil {
		return err
	}
	return h.cfg.Runs.SavePanel(ctx, run.ID, data, !run.Finished.IsZero(), h.cfg.Now())
}
