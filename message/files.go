package message

import (
	"path"
	"slices"
	"strings"
)

// MediaKind is what a file is to the bot: how the model gets it, or that
// it does not.
type MediaKind string

const (
	Voice MediaKind = "voice" // a voice message: transcribed
	Audio MediaKind = "audio" // an audio file (music, a recording): transcribed
	Image MediaKind = "image" // a photo, or an image sent as a file
	PDF   MediaKind = "pdf"
	Text  MediaKind = "text"  // a text file: read as text
	Other MediaKind = "other" // a sticker, video, location...: not read
)

// Attachment is one file of a message: what the bot needs to fetch it
// and to decide what the model gets. Its JSON is how the journal of
// earlier releases kept it.
type Attachment struct {
	Kind MediaKind `json:"kind"`
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

// IsAudio reports whether the kind is heard (transcribed) rather than read.
func (k MediaKind) IsAudio() bool { return k == Voice || k == Audio }

// MaxBytes is each kind's limit: what the model takes at a sensible cost,
// never more than the public Bot API's 20 MB download limit.
// brains/README.md lists them.
var MaxBytes = map[MediaKind]int64{
	// OpenAI takes 25 MB of audio; Telegram gives 20.
	Voice: 20 << 20,
	Audio: 20 << 20,
	// Telegram's own limit on photos. The Claude API takes at most 5 MB
	// of base64 per image, but the CLI (2.1.328, checked) scales larger
	// images down to 2000 pixels and re-encodes them as JPEG first: an
	// 18 MB PNG reached the model as a 470 KB JPEG.
	Image: 10 << 20,
	// A PDF page costs 1500-3000 tokens and its picture.
	PDF: 5 << 20,
	// About 25,000 tokens.
	Text: 100 << 10,
}

// The files the model reads: the image types the Claude API takes, and
// what text files are called.
var (
	ImageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}
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

// DocumentKind tells a file sent as a document by its type, or failing
// that (clients send many as application/octet-stream) its name.
func DocumentKind(mimeType, name string) MediaKind {
	ext := strings.ToLower(path.Ext(name))
	mimeType = strings.ToLower(mimeType)
	switch {
	case slices.Contains(ImageTypes, mimeType) || slices.Contains(imageExts, ext):
		return Image
	case mimeType == "application/pdf" || ext == ".pdf":
		return PDF
	case strings.HasPrefix(mimeType, "text/") || slices.Contains(textTypes, mimeType) || slices.Contains(textExts, ext):
		return Text
	}
	return Other
}
