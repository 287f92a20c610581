// Package toolspec is the contract of brainbot's MCP tools, in one place:
// the server and tool names (and the names Claude sees), the arguments
// and the JSON result of each tool (and the question tool's bounds and
// words, question.go), the speech formats and file extensions, and the
// catalogues of voices, models, sizes, qualities and
// styles with their defaults. The transcription models (voice messages
// in) are not a tool's, but they are one more OpenAI catalogue a brain
// chooses from, so they are kept here with the others.
//
// Brain validation (bot/brain), the Claude driver (claude) and the tools
// themselves (mcp) all read it, so a voice a brain may choose is a voice the
// tool accepts, and a default a brain falls back to is the default the tool
// uses. It holds data only: no I/O, no dependencies.
package toolspec

import "slices"

// The MCP servers and their tools. Claude Code names a tool
// mcp__<server>__<tool>, the server being its key in --mcp-config.
const (
	SpeechServer   = "tts"
	SpeechToolName = "text_to_speech"
	// SpeechTool is the speech tool as Claude sees it.
	SpeechTool = "mcp__" + SpeechServer + "__" + SpeechToolName

	ImageServer   = "image-gen"
	ImageToolName = "generate_image"
	// ImageTool is the image tool as Claude sees it.
	ImageTool = "mcp__" + ImageServer + "__" + ImageToolName
)

// ServerPath is the HTTP path at which brainbot serves the MCP server
// named server, below its tool server's base URL.
func ServerPath(server string) string { return "/" + server }

// SpeechSettings are the speech tool's options that a brain chooses.
type SpeechSettings struct {
	Voice  string  `json:"voice,omitempty"`
	Speed  float64 `json:"speed,omitempty"`
	Model  string  `json:"model,omitempty"`
	Format string  `json:"format,omitempty"` // mp3 or opus
	// MaxChars bounds how many characters of one text are spoken (0: all
	// of it): the rest is not sent to OpenAI. The bot sets it (the
	// brain's tts.max_chars, less where a spending cap is near), never
	// the model, so it is no argument of the tool.
	MaxChars int `json:"-"`
}

// SpeechArgs are the arguments of text_to_speech.
type SpeechArgs struct {
	// Text is spoken verbatim; long text is spoken in parts and joined.
	Text string `json:"text"`
	SpeechSettings
	// Filename is the file name prefix; the tool appends -<unix ms> and
	// the format's extension.
	Filename      string `json:"filename"`
	IncludeBase64 bool   `json:"include_base64"`
}

// MaxVoiceNoteBytes is the most one voice note may hold: the Bot API's
// sendVoice takes files "of up to 50 MB" (core.telegram.org/bots/api#sendvoice,
// checked 2026-11-27; it names no length limit). Longer audio goes out as
// several notes, cut between parts, never inside a sentence. At OpenAI's
// bit rates that is about 50 minutes of mp3, hours of opus.
const MaxVoiceNoteBytes = 50 << 20

// SpeechResult is the JSON text text_to_speech answers on success. A
// failure is an MCP error result with a short reason instead.
type SpeechResult struct {
	Success   bool   `json:"success"`
	AudioPath string `json:"audio_path"`
	// AudioPaths are every file, in order, when the audio is more than one
	// voice note may hold (MaxVoiceNoteBytes); AudioPath is the first.
	AudioPaths []string `json:"audio_paths,omitempty"`
	Format     string   `json:"format"`
	Bytes      int      `json:"bytes"`
	Characters int      `json:"characters"`
	Voice      string   `json:"voice"`
	Parts      int      `json:"parts"`
	Base64     string   `json:"audio_base64,omitempty"`
}

// ImageSettings are the image tool's options that a brain chooses.
type ImageSettings struct {
	Model   string `json:"model,omitempty"`
	Size    string `json:"size,omitempty"`
	Quality string `json:"quality,omitempty"`
	Style   string `json:"style,omitempty"`
}

// ImageArgs are the arguments of generate_image.
type ImageArgs struct {
	// Prompt says what the image shows; Claude writes it from the
	// conversation.
	Prompt string `json:"prompt,omitempty"`
	ImageSettings
	// Filename is the file name prefix; the tool appends -<unix ms>.png.
	Filename      string `json:"filename"`
	IncludeBase64 bool   `json:"include_base64"`
}

// ImageResult is the JSON text generate_image answers on success. A
// failure is an MCP error result with a short reason instead.
type ImageResult struct {
	Success       bool   `json:"success"`
	ImagePath     string `json:"image_path"`
	RevisedPrompt string `json:"revised_prompt"`
	Bytes         int    `json:"bytes"`
	Model         string `json:"model"`
	Size          string `json:"size"`
	Base64        string `json:"image_base64,omitempty"`
}

// Speech defaults and limits (OpenAI's speech API).
const (
	DefaultVoice       = "nova"
	DefaultSpeed       = 1.0
	MinSpeed           = 0.25
	MaxSpeed           = 4.0
	DefaultSpeechModel = "tts-1"
	DefaultFormat      = "mp3"
)

// Voices are the voices OpenAI's speech API offers.
func Voices() []string {
	return []string{"alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse"}
}

// SpeechModels are OpenAI's speech models.
func SpeechModels() []string { return []string{"tts-1", "tts-1-hd", "gpt-4o-mini-tts"} }

// DefaultTranscriptionModel turns voice messages into text unless a
// brain says otherwise (stt.model): OpenAI's cheapest transcription
// model, and more accurate than whisper-1.
const DefaultTranscriptionModel = "gpt-4o-mini-transcribe"

// TranscriptionModels are OpenAI's speech-to-text models a brain may
// choose, DefaultTranscriptionModel first.
func TranscriptionModels() []string {
	return []string{DefaultTranscriptionModel, "gpt-4o-transcribe", "whisper-1"}
}

// SpeechFormats are the audio formats the speech tool writes.
func SpeechFormats() []string { return []string{"mp3", "opus"} }

// SpeechExt is the file extension of a speech format: opus is saved in an
// Ogg container (.ogg), as Telegram voice notes are.
func SpeechExt(format string) (string, bool) {
	switch format {
	case "mp3":
		return ".mp3", true
	case "opus":
		return ".ogg", true
	}
	return "", false
}

// ImageExt is the extension of every image the image tool writes.
const ImageExt = ".png"

// DefaultImageModel is the image model when none is chosen.
const DefaultImageModel = "dall-e-2"

// ImageModel is what one OpenAI image model accepts.
type ImageModel struct {
	Name  string
	Sizes []string
	// Qualities and Styles are empty when the model has no such option.
	Qualities []string
	Styles    []string
	// DefaultSize is the size used when none is chosen: the cheapest
	// for dall-e-2, the only square one the others share otherwise.
	DefaultSize string
}

// ImageModels are OpenAI's image models, DefaultImageModel first.
func ImageModels() []ImageModel {
	return []ImageModel{
		{Name: "dall-e-2", Sizes: []string{"256x256", "512x512", "1024x1024"}, DefaultSize: "256x256"},
		{Name: "dall-e-3", Sizes: []string{"1024x1024", "1792x1024", "1024x1792"},
			Qualities: []string{"standard", "hd"}, Styles: []string{"vivid", "natural"}, DefaultSize: "1024x1024"},
		{Name: "gpt-image-1", Sizes: []string{"1024x1024", "1536x1024", "1024x1536", "auto"},
			Qualities: []string{"low", "medium", "high", "auto"}, DefaultSize: "1024x1024"},
	}
}

// ImageModelNames are the names of ImageModels, in order.
func ImageModelNames() []string {
	var names []string
	for _, m := range ImageModels() {
		names = append(names, m.Name)
	}
	return names
}

// LookupImageModel returns the image model named name.
func LookupImageModel(name string) (ImageModel, bool) {
	models := ImageModels()
	i := slices.IndexFunc(models, func(m ImageModel) bool { return m.Name == name })
	if i < 0 {
		return ImageModel{}, false
	}
	return models[i], true
}
