package bot

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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/claude"
	"brainbot/pricing"
)

// Transcriber turns speech into text; *transcribe.Client implements it.
// name is the audio's file name, whose extension tells its format.
type Transcriber interface {
	Transcribe(ctx context.Context, model, name string, audio io.Reader) (string, error)
}

// mediaKind is what a file is to the bot: how the model gets it, or that
// it does not.
type mediaKind string

const (
	mediaVoice mediaKind = "voice" // a voice message: transcribed
	mediaAudio mediaKind = "audio" // an audio file (music, a recording): transcribed
	mediaImage mediaKind = "image" // a photo, or an image sent as a file
	mediaPDF   mediaKind = "pdf"
	mediaText  mediaKind = "text"  // a text file: read as text
	mediaOther mediaKind = "other" // a sticker, video, location...: not read
)

// attachment is one file of a message, as journaled: what the bot needs
// to fetch it and to decide what the model gets.
type attachment struct {
	Kind mediaKind `json:"kind"`
	// What names a kind the bot does not read (sticker, video...), for
	// the log.
	What   string `json:"what,omitempty"`
	FileID string `json:"file_id,omitempty"`
	// Size is the size in bytes Telegram gave (0: not given).
	Size int64  `json:"size,omitempty"`
	MIME string `json:"mime,omitempty"`
	Name string `json:"name,omitempty"`
	// Seconds is a voice message's or audio file's length.
	Seconds int `json:"seconds,omitempty"`
	// Album is the media_group_id of the album the message is part of.
	Album string `json:"album,omitempty"`
}

// Each kind's limit: what the model takes at a sensible cost, never more
// than the public Bot API's 20 MB download limit. brains/README.md lists
// them.
var maxBytes = map[mediaKind]int64{
	// OpenAI takes 25 MB of audio; Telegram gives 20.
	mediaVoice: 20 << 20,
	mediaAudio: 20 << 20,
	// Telegram's own limit on photos. The Claude API takes at most 5 MB
	// of base64 per image, but the CLI (2.1.328, checked) scales larger
	// images down to 2000 pixels and re-encodes them as JPEG first: an
	// 18 MB PNG reached the model as a 470 KB JPEG.
	mediaImage: 10 << 20,
	// A PDF page costs 1500-3000 tokens and its picture.
	mediaPDF: 5 << 20,
	// About 25,000 tokens.
	mediaText: 100 << 10,
}

// maxAudio bounds what one message may cost in transcription ($0.03 to
// $0.06 at OpenAI's prices).
const maxAudio = 10 * time.Minute

// fileTimeout bounds one download from Telegram.
const fileTimeout = 2 * time.Minute

// mediaOf is the file msg carries, if any: everything a user may send on
// purpose besides text. Telegram puts at most one in a message.
func mediaOf(msg *models.Message) (attachment, bool) {
	switch {
	case msg.Voice != nil:
		v := msg.Voice
		return attachment{Kind: mediaVoice, FileID: v.FileID, Size: v.FileSize, MIME: v.MimeType, Seconds: v.Duration}, true
	case msg.Audio != nil:
		a := msg.Audio
		return attachment{Kind: mediaAudio, FileID: a.FileID, Size: a.FileSize, MIME: a.MimeType, Name: a.FileName, Seconds: a.Duration}, true
	case len(msg.Photo) > 0:
		return largestPhoto(msg.Photo), true
	case msg.Animation != nil:
		// Before Document: Telegram sends a GIF as both.
		return attachment{Kind: mediaOther, What: "animation"}, true
	case msg.Document != nil:
		return documentOf(msg.Document), true
	}
	for what, sent := range map[string]bool{
		"sticker": msg.Sticker != nil, "video": msg.Video != nil, "video note": msg.VideoNote != nil,
		"location": msg.Location != nil || msg.Venue != nil, "contact": msg.Contact != nil, "poll": msg.Poll != nil,
		"dice": msg.Dice != nil, "game": msg.Game != nil, "story": msg.Story != nil, "paid media": msg.PaidMedia != nil,
		"checklist": msg.Checklist != nil, "live photo": msg.LivePhoto != nil,
	} {
		if sent {
			return attachment{Kind: mediaOther, What: what}, true
		}
	}
	return attachment{}, false
}

// largestPhoto picks, of the sizes Telegram offers of a photo, the
// largest within the image limit (the smallest if none is).
func largestPhoto(sizes []models.PhotoSize) attachment {
	best := slices.MinFunc(sizes, func(a, b models.PhotoSize) int { return a.FileSize - b.FileSize })
	for _, s := range sizes {
		if int64(s.FileSize) <= maxBytes[mediaImage] && s.Width*s.Height > best.Width*best.Height {
			best = s
		}
	}
	return attachment{Kind: mediaImage, FileID: best.FileID, Size: int64(best.FileSize), MIME: "image/jpeg"}
}

// documentOf tells a file sent as a document by its type, or failing
// that (clients send many as application/octet-stream) its name.
func documentOf(d *models.Document) attachment {
	a := attachment{Kind: mediaOther, What: "file", FileID: d.FileID, Size: d.FileSize, MIME: d.MimeType, Name: d.FileName}
	ext := strings.ToLower(path.Ext(d.FileName))
	mimeType := strings.ToLower(d.MimeType)
	switch {
	case slices.Contains(imageTypes, mimeType) || slices.Contains(imageExts, ext):
		a.Kind = mediaImage
	case mimeType == "application/pdf" || ext == ".pdf":
		a.Kind = mediaPDF
	case strings.HasPrefix(mimeType, "text/") || slices.Contains(textTypes, mimeType) || slices.Contains(textExts, ext):
		a.Kind = mediaText
	}
	return a
}

// The files the model reads: the image types the Claude API takes, and
// what text files are called.
var (
	imageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}
	imageExts  = []string{".jpg", ".jpeg", ".png", ".gif", ".webp"}
	textTypes  = []string{"application/json", "application/ld+json", "application/x-ndjson", "application/xml",
		"application/yaml", "application/x-yaml", "application/toml", "application/javascript",
		"application/x-javascript", "application/typescript", "application/x-sh", "application/x-python",
		"application/sql", "application/x-subrip", "application/csv"}
	textExts = []string{".txt", ".text", ".md", ".markdown", ".rst", ".csv", ".tsv", ".json", ".jsonl", ".ndjson",
		".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".xml", ".html", ".htm", ".css", ".log", ".sql",
		".srt", ".vtt", ".tex", ".go", ".py", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".java", ".kt", ".kts",
		".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".rs", ".rb", ".php", ".swift", ".m", ".scala", ".sh",
		".bash", ".zsh", ".ps1", ".lua", ".pl", ".r", ".hs", ".ex", ".exs", ".erl", ".clj", ".dart", ".vue",
		".svelte", ".proto", ".graphql", ".gradle", ".mk", ".dockerfile"}
)

// encodeMedia is files as the journal keeps them ("" for none).
func encodeMedia(files []attachment) string {
	if len(files) == 0 {
		return ""
	}
	data, _ := json.Marshal(files) // strings and numbers: cannot fail
	return string(data)
}

// decodeMedia reads what encodeMedia wrote.
func decodeMedia(s string) ([]attachment, error) {
	if s == "" {
		return nil, nil
	}
	var files []attachment
	if err := json.Unmarshal([]byte(s), &files); err != nil {
		return nil, fmt.Errorf("journaled files: %w", err)
	}
	return files, nil
}

// spoken reports whether the message is a voice message, which a bot
// that can speak answers in kind.
func (in *incoming) spoken() bool {
	return slices.ContainsFunc(in.media, func(a attachment) bool { return a.Kind == mediaVoice })
}

// repliesInVoice: a voice message gets a voice reply from a brain that
// can speak (tts.reply_to_voice), whatever /voice chose for text.
func repliesInVoice(b *brain.Brain, in *incoming) bool {
	return in.spoken() && b.TTS.ReplyToVoice && (b.TTS.Enabled || b.TTS.UserToggle)
}

// media reads the files of messages for the model.
type media struct {
	// transcriber is nil when brainbot has no OpenAI key: voice messages
	// then get messages.text_only.
	transcriber Transcriber
	http        *http.Client
}

// refused answers, without the model, a message with a file the bot will
// not read: a kind it cannot, voice while speech to text is off, or a
// file over its limit by what Telegram says of it. It reports whether it
// did.
func (md *media) refused(r *request) bool {
	for _, a := range r.in.media {
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
func (md *media) refusal(b *brain.Brain, a attachment) (outcome, text string) {
	limit := maxBytes[a.Kind]
	switch {
	case a.Kind == mediaOther:
		return "unsupported", b.Messages.Unsupported
	case isAudio(a.Kind) && (md.transcriber == nil || !b.STT.Enabled):
		return "text only", b.Messages.TextOnly
	case a.Size > limit:
		return "too big", b.Messages.TooBigText(formatBytes(limit))
	case isAudio(a.Kind) && time.Duration(a.Seconds)*time.Second > maxAudio:
		return "too big", b.Messages.TooBigText(fmt.Sprintf("%d minutes", int(maxAudio.Minutes())))
	}
	return "", ""
}

func isAudio(k mediaKind) bool { return k == mediaVoice || k == mediaAudio }

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
	for _, a := range r.in.media {
		data, err := md.fetch(r, a)
		if errors.Is(err, errTooBig) {
			r.log.Info("file not read", zap.String("why", "too big"), zap.String("kind", string(a.Kind)), zap.Int64("limit", maxBytes[a.Kind]))
			r.say("too big", r.brain.Messages.TooBigText(formatBytes(maxBytes[a.Kind])))
			return false
		}
		if err != nil {
			r.fail("download", err)
			return false
		}
		if isAudio(a.Kind) {
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
		r.in.text = strings.Join(append(said, r.in.text), "\n\n")
		r.in.text = strings.TrimSpace(r.in.text)
	}
	return true
}

// errTooBig: the file turned out larger than its kind's limit, though
// Telegram's message did not say so.
var errTooBig = errors.New("file over its limit")

// fetch downloads a's file through getFile, never holding more than its
// kind's limit: a larger file is errTooBig.
func (md *media) fetch(r *request, a attachment) ([]byte, error) {
	limit := maxBytes[a.Kind]
	var f *models.File
	err := r.out.retry(r.ctx, "getFile", func(ctx context.Context) error {
		var err error
		f, err = r.out.client().GetFile(ctx, &tgbot.GetFileParams{FileID: a.FileID})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("getFile: %w", err)
	}
	if f.FileSize > limit {
		return nil, errTooBig
	}
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, r.out.client().FileDownloadLink(f), nil)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", f.FilePath, withoutURL(err))
	}
	resp, err := md.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", f.FilePath, withoutURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download %s: HTTP %d", f.FilePath, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("download %s: %w", f.FilePath, withoutURL(err))
	case int64(len(data)) > limit:
		return nil, errTooBig
	}
	return data, nil
}

// withoutURL drops the download URL, which holds the bot's token, from a
// client error.
func withoutURL(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return fmt.Errorf("%s: %w", uerr.Op, uerr.Err)
	}
	return err
}

// transcribe turns a voice message or audio file into its words, and
// counts what that cost with the request.
func (md *media) transcribe(r *request, a attachment, data []byte) (string, error) {
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
func audioName(a attachment) string {
	if a.Name != "" && path.Ext(a.Name) != "" {
		return a.Name
	}
	ext, ok := audioExts[strings.ToLower(a.MIME)]
	if !ok && a.Kind == mediaVoice {
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
func spokenText(a attachment, words string) string {
	mark := "[voice message]"
	if a.Kind == mediaAudio {
		mark = "[audio file " + cmp.Or(a.Name, "without a name") + "]"
	}
	if words == "" {
		return mark + " (no words)"
	}
	return mark + " " + words
}

// attachmentFor is data as the model gets it, checked to be what it
// claims: an image of a type the model reads, a PDF, UTF-8 text.
func attachmentFor(a attachment, data []byte) (claude.Attachment, bool) {
	switch a.Kind {
	case mediaImage:
		sniffed := http.DetectContentType(data)
		return claude.Attachment{MediaType: sniffed, Data: data}, slices.Contains(imageTypes, sniffed)
	case mediaPDF:
		return claude.Attachment{MediaType: "application/pdf", Name: a.Name, Data: data}, bytes.HasPrefix(data, []byte("%PDF-"))
	case mediaText:
		data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a byte order mark
		return claude.Attachment{MediaType: "text/plain", Name: a.Name, Data: data}, utf8.Valid(data) && !bytes.ContainsRune(data, 0)
	}
	return claude.Attachment{}, false
}
