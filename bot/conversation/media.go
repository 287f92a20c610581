package conversation

// Files in: what a photo, voice message or document becomes for the
// model. Intake records each file a message carries (mediaOf); the
// pipeline answers what it will not read without the model (refused), and
// reads the rest just before the model is asked (read): fetched from
// Telegram within the limit of its kind, voice transcribed, images and
// documents handed to the driver as content blocks.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/claude"
	"brainbot/message"
	"brainbot/pricing"
)

// maxAudio bounds what one message may cost in transcription ($0.03 to
// $0.06 at OpenAI's prices).
const maxAudio = 10 * time.Minute

// spoken reports whether the message is a voice message, which a bot
// that can speak answers in kind.
func spoken(in *message.Inbound) bool {
	return slices.ContainsFunc(in.Media, func(a message.Attachment) bool { return a.Kind == message.Voice })
}

// repliesInVoice: a voice message gets a voice reply from a brain that
// can speak (tts.reply_to_voice), whatever /voice chose for text.
func repliesInVoice(b *brain.Brain, in *message.Inbound) bool {
	return spoken(in) && b.TTS.ReplyToVoice && (b.TTS.Enabled || b.TTS.UserToggle)
}

// media reads the files of messages for the model.
type media struct {
	// transcriber is nil when brainbot has no OpenAI key: voice messages
	// then get messages.text_only.
	transcriber Transcriber
	// fetch downloads a file a bot received.
	fetch func(ctx context.Context, bot, fileID string, limit int64) ([]byte, error)
}

// refused answers, without the model, a message with a file the bot will
// not read: a kind it cannot, voice while speech to text is off, or a
// file over its limit by what Telegram says of it. It reports whether it
// did.
func (md *media) refused(r *request) bool {
	for _, a := range r.in.Media {
		outcome, text := md.refusal(r.brain, a)
		if outcome == "" {
			continue
		}
		r.log.Info("file not read", zap.String("why", outcome), zap.String("kind", string(a.Kind)), zap.String("what", a.What),
			zap.String("mime", a.MIME), zap.Int64("size", a.Size), zap.Int("seconds", a.Seconds))
		r.say(outcome, text)
		return true
	}
	return false
}

// refusal is the outcome and answer of a file the bot will not read, ""
// for one it will.
func (md *media) refusal(b *brain.Brain, a message.Attachment) (outcome, text string) {
	limit := message.MaxBytes[a.Kind]
	switch {
	case a.Kind == message.Other:
		return "unsupported", b.Messages.Unsupported
	case a.Kind.IsAudio() && (md.transcriber == nil || !b.STT.Enabled):
		return "text only", b.Messages.TextOnly
	case a.Size > limit:
		return "too big", b.Messages.TooBigText(formatBytes(limit))
	case a.Kind.IsAudio() && time.Duration(a.Seconds)*time.Second > maxAudio:
		return "too big", b.Messages.TooBigText(fmt.Sprintf("%d minutes", int(maxAudio.Minutes())))
	}
	return "", ""
}

// formatBytes writes a limit as users read it: "20 MB", "100 KB".
func formatBytes(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MB", n>>20)
	}
	return fmt.Sprintf("%d KB", n>>10)
}

// read fetches the message's files and makes them what the model gets:
// r.attach, and r.in.text with what was said in voice messages before
// what was written. False means the request was answered instead (a file
// Telegram would not give or OpenAI could not transcribe gets the error
// text; one over its limit or that is not what it claimed, the matching
// message).
func (md *media) read(r *request) bool {
	var said []string
	for _, a := range r.in.Media {
		data, err := md.fetch(r.ctx, r.in.Key.Bot, a.FileID, message.MaxBytes[a.Kind])
		if errors.Is(err, message.ErrTooBig) {
			r.log.Info("file not read", zap.String("why", "too big"), zap.String("kind", string(a.Kind)), zap.Int64("limit", message.MaxBytes[a.Kind]))
			r.say("too big", r.brain.Messages.TooBigText(formatBytes(message.MaxBytes[a.Kind])))
			return false
		}
		if err != nil {
			r.fail("download", err)
			return false
		}
		if a.Kind.IsAudio() {
			words, err := md.transcribe(r, a, data)
			if err != nil {
				r.fail("transcribe", err)
				return false
			}
			said = append(said, spokenText(a, words))
			continue
		}
		file, ok := attachmentFor(a, data)
		if !ok {
			r.log.Info("file not read", zap.String("why", "not what it claims"), zap.String("kind", string(a.Kind)),
				zap.String("mime", a.MIME), zap.String("sniffed", http.DetectContentType(data)))
			r.say("unsupported", r.brain.Messages.Unsupported)
			return false
		}
		r.attach = append(r.attach, file)
	}
	if len(said) > 0 {
		r.in.Text = strings.TrimSpace(strings.Join(append(said, r.in.Text), "\n\n"))
	}
	return true
}

// transcribe turns a voice message or audio file into its words, and
// counts what that cost with the request.
func (md *media) transcribe(r *request, a message.Attachment, data []byte) (string, error) {
	model := r.brain.STT.Model
	start := time.Now()
	words, err := md.transcriber.Transcribe(r.ctx, model, audioName(a), bytes.NewReader(data))
	r.sum.transcribe += time.Since(start)
	if err != nil {
		return "", err
	}
	r.sum.audioSeconds += a.Seconds
	usd, _ := pricing.Transcription(model, float64(a.Seconds)) // brain validation keeps to priced models
	r.sum.openAI += usd
	r.log.Debug("transcribed", zap.String("kind", string(a.Kind)), zap.Int("seconds", a.Seconds), zap.String("words", words))
	return words, nil
}

// audioName is the file name OpenAI gets: its extension says the format.
func audioName(a message.Attachment) string {
	if a.Name != "" && path.Ext(a.Name) != "" {
		return a.Name
	}
	ext, ok := audioExts[strings.ToLower(a.MIME)]
	if !ok && a.Kind == message.Voice {
		ext = ".ogg" // Telegram records voice as Ogg Opus
	}
	return string(a.Kind) + ext
}

var audioExts = map[string]string{
	"audio/ogg": ".ogg", "audio/opus": ".ogg", "audio/mpeg": ".mp3", "audio/mp3": ".mp3", "audio/mp4": ".m4a",
	"audio/m4a": ".m4a", "audio/x-m4a": ".m4a", "audio/aac": ".m4a", "audio/wav": ".wav", "audio/x-wav": ".wav",
	"audio/flac": ".flac", "audio/x-flac": ".flac", "audio/webm": ".webm",
}

// spokenText is what the model reads of a voice message or audio file:
// its words, marked as spoken.
func spokenText(a message.Attachment, words string) string {
	mark := "[voice message]"
	if a.Kind == message.Audio {
		mark = "[audio file " + cmp.Or(a.Name, "without a name") + "]"
	}
	if words == "" {
		return mark + " (no words)"
	}
	return mark + " " + words
}

// attachmentFor is data as the model gets it, checked to be what it
// claims: an image of a type the model reads, a PDF, UTF-8 text.
func attachmentFor(a message.Attachment, data []byte) (claude.Attachment, bool) {
	switch a.Kind {
	case message.Image:
		sniffed := http.DetectContentType(data)
		return claude.Attachment{MediaType: sniffed, Data: data}, slices.Contains(message.ImageTypes, sniffed)
	case message.PDF:
		return claude.Attachment{MediaType: "application/pdf", Name: a.Name, Data: data}, bytes.HasPrefix(data, []byte("%PDF-"))
	case message.Text:
		data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a byte order mark
		return claude.Attachment{MediaType: "text/plain", Name: a.Name, Data: data}, utf8.Valid(data) && !bytes.ContainsRune(data, 0)
	}
	return claude.Attachment{}, false
}
