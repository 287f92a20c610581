package bot

import (
	"cmp"
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/go-telegram/bot/models"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/claude"
	"brainbot/output"
	"brainbot/toolspec"
)

// converse runs the message through Claude and sends the reply.
func (m *Manager) converse(ctx context.Context, j *job, b *brain.Brain, log *zap.Logger, req *request) {
	// The status shows while the request waits and runs, until the reply
	// is out.
	stopAction := m.keepChatAction(ctx, j, log, chatAction(req.mode))
	defer stopAction()

	// Journaled before waiting for a slot: the daily limit has counted the
	// message, and a replay must not count it again (see handle).
	if j.journalID != 0 {
		if err := m.cfg.Store.Attempt(ctx, j.journalID, req.mode.String()); err != nil {
			log.Warn("could not journal the attempt", zap.Error(err))
		}
	}
	select {
	case m.sem <- struct{}{}:
	case <-m.stopping:
		req.outcome = "interrupted" // still journaled: replayed on the next start
		return
	}
	req.queueWait = time.Since(j.arrived)
	res, expired, err := m.runClaude(ctx, j, b, log, req.mode)
	<-m.sem
	if res != nil {
		req.claudeStartup, req.turn1, req.turn2, req.claudeTotal = res.Startup, res.Turn1, res.Turn2, res.Total
		req.cost = res.CostUSD
	}
	if expired && err == nil {
		// Told once, with an answer: the new session is stored, so this
		// will not recur. A failure gets only the error message (never two
		// replies); the loss is told with the next answer if its session
		// was not kept.
		m.deliverText(ctx, j, log, b.Messages.Expired, false)
	}

	switch {
	case err != nil && req.mode == claude.Speech && res != nil && res.Text != "" && ctx.Err() == nil:
		log.Warn("speech failed; sending the text reply instead", zap.String("phase", "claude"), zap.Error(err))
		m.sendTextReply(ctx, j, b, log, req, res.Text)
	case err != nil:
		m.fail(ctx, j, b, log, req, "claude", err)
	case req.mode == claude.Text:
		m.sendTextReply(ctx, j, b, log, req, res.Text)
	default:
		m.sendFileReply(ctx, j, b, log, req, res)
	}
}

// runClaude runs the request in the user's session, starting a new session
// when there is none or the stored one is gone (expired reports the latter).
func (m *Manager) runClaude(ctx context.Context, j *job, b *brain.Brain, log *zap.Logger, mode claude.Mode) (res *claude.Result, expired bool, err error) {
	sess, ok, err := m.cfg.Store.Session(ctx, j.r.id, j.user)
	if err != nil {
		return nil, false, err
	}
	creq := claude.Request{
		Mode:         mode,
		Prompt:       j.text,
		SessionID:    sess.ID,
		Resume:       ok,
		SystemPrompt: b.SystemPrompt,
		Model:        b.Claude.Model,
		BotID:        j.r.id,
		FilePrefix:   output.Prefix(j.r.id, j.user, time.Now()),
		Speech: toolspec.SpeechSettings{
			Voice: b.TTS.Voice, Speed: b.TTS.Speed, Model: b.TTS.Model, Format: b.TTS.Format,
		},
		Image: toolspec.ImageSettings{
			Model: b.Image.Model, Size: b.Image.Size, Quality: b.Image.Quality, Style: b.Image.Style,
		},
		InactivityTimeout: b.Claude.Timeout.D(),
	}
	if !ok {
		creq.SessionID = uuid.NewString()
	}
	res, err = m.cfg.Claude.Run(ctx, creq)
	if err != nil && creq.Resume && errors.Is(err, claude.ErrSessionNotFound) {
		log.Warn("stored session is gone; starting a new one", zap.String("lost_session", creq.SessionID))
		expired = true
		creq.SessionID, creq.Resume = uuid.NewString(), false
		res, err = m.cfg.Claude.Run(ctx, creq)
	}
	// Keep the session the CLI reported, or ours once a request succeeded.
	// A CLI that failed before reporting one never created it: storing it
	// would make the next message's resume fail as a "lost" session.
	if res != nil && (res.SessionID != "" || err == nil) {
		id := cmp.Or(res.SessionID, creq.SessionID)
		if serr := m.cfg.Store.UseSession(context.WithoutCancel(ctx), j.r.id, j.user, id, m.cfg.Now()); serr != nil {
			log.Warn("could not save the session", zap.Error(serr))
		}
	}
	return res, expired, err
}

func chatAction(mode claude.Mode) models.ChatAction {
	switch mode {
	case claude.Speech:
		return models.ChatActionRecordVoice
	case claude.Image:
		return models.ChatActionUploadPhoto
	}
	return models.ChatActionTyping
}

// keepChatAction shows action in the chat now and every ChatActionEvery
// until the returned stop is called.
func (m *Manager) keepChatAction(ctx context.Context, j *job, log *zap.Logger, action models.ChatAction) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(m.cfg.ChatActionEvery)
		defer tick.Stop()
		for {
			if err := m.sendChatAction(ctx, j, action); err != nil && ctx.Err() == nil {
				log.Debug("chat action not sent", zap.Error(err))
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// sendFileReply sends the generated voice or image, and the text when the
// brain asks for it too.
func (m *Manager) sendFileReply(ctx context.Context, j *job, b *brain.Brain, log *zap.Logger, req *request, res *claude.Result) {
	kind, textToo := output.Audio, b.TTS.SendTextToo
	if req.mode == claude.Image {
		kind, textToo = output.Image, b.Image.SendTextToo
	}
	locStart := time.Now()
	path, err := output.Locate(filepath.Join(m.cfg.DataDir, kind.Dir()), res.FilePrefix, res.FileExt, res.FilePath)
	if err == nil {
		path, err = output.Organize(m.cfg.DataDir, path, kind, j.r.id, j.user)
	}
	req.locate = time.Since(locStart)
	if err != nil {
		if req.mode == claude.Speech && res.Text != "" {
			log.Warn("voice file not found; sending the text reply instead", zap.String("phase", "locate"), zap.Error(err))
			m.sendTextReply(ctx, j, b, log, req, res.Text)
			return
		}
		m.fail(ctx, j, b, log, req, "locate", err)
		return
	}
	sendStart := time.Now()
	err = m.deliverFile(ctx, j, log, req.mode, path)
	req.send = time.Since(sendStart)
	switch {
	case errors.Is(err, errBlocked):
		req.outcome = "blocked"
		m.finish(j, log)
		return
	case err != nil && req.mode == claude.Speech && res.Text != "":
		log.Warn("voice message not sent; sending the text reply instead", zap.String("phase", "send"), zap.Error(err))
		m.sendTextReply(ctx, j, b, log, req, res.Text)
		return
	case err != nil:
		m.fail(ctx, j, b, log, req, "send", err)
		return
	}
	if textToo && res.Text != "" {
		if err := m.deliverText(ctx, j, log, res.Text, true); err != nil && !errors.Is(err, errBlocked) {
			log.Warn("text after the file not sent", zap.Error(err))
		}
	}
	m.finish(j, log)
}

// sendTextReply sends Claude's text, split and formatted.
func (m *Manager) sendTextReply(ctx context.Context, j *job, b *brain.Brain, log *zap.Logger, req *request, text string) {
	if text == "" {
		m.fail(ctx, j, b, log, req, "reply", errors.New("empty reply"))
		return
	}
	sendStart := time.Now()
	err := m.deliverText(ctx, j, log, text, true)
	req.send = time.Since(sendStart)
	switch {
	case errors.Is(err, errBlocked):
		req.outcome = "blocked"
		m.finish(j, log)
	case err != nil:
		m.fail(ctx, j, b, log, req, "send", err)
	default:
		m.finish(j, log)
	}
}
