package conversation

import (
	"bytes"
	"encoding/json"
	"image"
	_ "image/png" // the image tool's pictures are PNG
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"brainbot/claude"
	"brainbot/mcp/audio"
	"brainbot/output"
	"brainbot/pricing"
	"brainbot/toolspec"
)

// writeSidecar writes the metadata file beside the organised file at
// path. It is a record for other programs, not part of the reply: a
// failure is logged and the reply goes on.
func (r *request) writeSidecar(res *claude.Result, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		r.log.Warn("could not describe the generated file", zap.String("path", path), zap.Error(err))
		return
	}
	m := output.Metadata{Brain: r.brain.Name, BotID: r.in.Key.Bot, Chat: r.in.Key.Chat, User: r.in.Sender,
		RequestID: r.in.RequestID, Created: r.p.cfg.Now().UTC(), Mode: r.sum.mode.String(), Bytes: int64(len(data))}
	var usd float64
	var priced bool
	switch r.sum.mode {
	case claude.Speech:
		s := r.brain.TTS
		m.Text = voiceText(res)
		m.Model, m.Voice, m.Speed, m.Format = s.Model, s.Voice, s.Speed, s.Format
		m.DurationSeconds = audioSeconds(data, filepath.Ext(path))
		usd, priced = pricing.Speech(s.Model, utf8.RuneCountInString(m.Text))
	case claude.Image:
		img := r.brain.Image
		var args toolspec.ImageArgs
		_ = json.Unmarshal(fileCallArgs(res, toolspec.ImageTool), &args) // no call: no prompt
		m.Prompt = args.Prompt
		m.Model, m.Size, m.Quality, m.Style = img.Model, img.Size, img.Quality, img.Style
		if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
			m.Width, m.Height = cfg.Width, cfg.Height
		}
		usd, priced = pricing.Image(img.Model, img.Size, img.Quality)
	}
	if priced {
		m.CostUSD = &usd
	}
	if err := output.WriteSidecar(path, m); err != nil {
		r.log.Warn("could not write the generated file's sidecar", zap.Error(err))
	}
}

// voiceText is the text the speech tool was called with, else the
// turn-one reply it was asked to speak: always the reply when it was
// spoken while the model wrote it (the call's text is then a stand-in).
func voiceText(res *claude.Result) string {
	if res.SpokenChars > 0 {
		return res.Text
	}
	var args toolspec.SpeechArgs
	if json.Unmarshal(fileCallArgs(res, toolspec.SpeechTool), &args) == nil && args.Text != "" {
		return args.Text
	}
	return res.Text
}

// audioSeconds measures a voice note; 0 when it cannot be read.
func audioSeconds(data []byte, ext string) float64 {
	var d time.Duration
	var err error
	switch ext {
	case ".mp3":
		d, err = audio.MP3Duration(data)
	case ".ogg":
		d, err = audio.OggOpusDuration(data)
	}
	if err != nil {
		return 0
	}
	return d.Seconds()
}
