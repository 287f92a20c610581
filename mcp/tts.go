package mcp

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	"brainbot/mcp/audio"
	"brainbot/output"
	"brainbot/toolspec"
)

// MaxSpeechInput is the API's input limit in characters; longer text is
// synthesised in parts and joined into one file.
const MaxSpeechInput = 4096

// maxSpeechBytes bounds one speech answer (a 4096-character MP3 is ~5 MB).
const maxSpeechBytes = 64 << 20

// NewTTSServer is the "tts" MCP server with the text_to_speech tool.
func NewTTSServer(cfg Config) *server.MCPServer {
	return newServer(toolspec.SpeechServer, ttsTool(cfg))
}

func ttsTool(cfg Config) server.ServerTool {
	return server.ServerTool{Tool: speechToolSchema(), Handler: newTTS(cfg).handle}
}

func newTTS(cfg Config) *tts {
	return &tts{cfg: cfg.withDefaults(), client: openai.NewClientWithConfig(cfg.OpenAI)}
}

// speechToolSchema is text_to_speech as MCP clients see it; its lists and
// defaults are toolspec's.
func speechToolSchema() mcpgo.Tool {
	return mcpgo.NewTool(toolspec.SpeechToolName,
		mcpgo.WithDescription("Convert text to speech with OpenAI and save it as an audio file. Returns JSON with audio_path."),
		mcpgo.WithString("text", mcpgo.Required(), mcpgo.Description("The text to speak, verbatim. Long text is spoken in full.")),
		mcpgo.WithString("voice", mcpgo.Description(fmt.Sprintf(
			"OpenAI voice (default %s, as for brains; this tool defaulted to alloy before 2026-11).", toolspec.DefaultVoice)),
			mcpgo.Enum(toolspec.Voices()...)),
		mcpgo.WithNumber("speed", mcpgo.Description(fmt.Sprintf("Speaking speed, %g to %g (default %g).", toolspec.MinSpeed, toolspec.MaxSpeed, toolspec.DefaultSpeed)),
			mcpgo.Min(toolspec.MinSpeed), mcpgo.Max(toolspec.MaxSpeed)),
		mcpgo.WithString("model", mcpgo.Description(fmt.Sprintf("Speech model (default %s).", toolspec.DefaultSpeechModel)),
			mcpgo.Enum(toolspec.SpeechModels()...)),
		mcpgo.WithString("format", mcpgo.Description(fmt.Sprintf("Audio format (default %s); opus is saved as .ogg.", toolspec.DefaultFormat)),
			mcpgo.Enum(toolspec.SpeechFormats()...)),
		mcpgo.WithString("filename", mcpgo.Description("File name prefix; the tool appends -<unix ms> and the extension.")),
		mcpgo.WithBoolean("include_base64", mcpgo.Description("Also return the audio as base64 (default false).")),
	)
}

type tts struct {
	cfg    Config
	client *openai.Client
}

func (t *tts) handle(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	args, problem := speechArgsOf(req)
	if problem != "" {
		return mcpgo.NewToolResultError(problem), nil
	}
	return t.speak(ctx, t.cfg.Log, args), nil
}

// speechArgsOf reads and checks the arguments a client chose, filling in
// toolspec's defaults; problem says what is wrong with them.
func speechArgsOf(req mcpgo.CallToolRequest) (args toolspec.SpeechArgs, problem string) {
	text, err := req.RequireString("text")
	if err != nil || strings.TrimSpace(text) == "" {
		return args, "text is required and must not be empty"
	}
	args = toolspec.SpeechArgs{
		Text: text,
		SpeechSettings: toolspec.SpeechSettings{
			Voice:  req.GetString("voice", toolspec.DefaultVoice),
			Speed:  req.GetFloat("speed", toolspec.DefaultSpeed),
			Model:  req.GetString("model", toolspec.DefaultSpeechModel),
			Format: req.GetString("format", toolspec.DefaultFormat),
		},
		Filename:      req.GetString("filename", ""),
		IncludeBase64: req.GetBool("include_base64", false),
	}
	switch s := args.SpeechSettings; {
	case !slices.Contains(toolspec.Voices(), s.Voice):
		return args, fmt.Sprintf("unknown voice %q (one of %s)", s.Voice, strings.Join(toolspec.Voices(), ", "))
	case !(s.Speed >= toolspec.MinSpeed && s.Speed <= toolspec.MaxSpeed):
		return args, fmt.Sprintf("speed %v out of range %g-%g", s.Speed, toolspec.MinSpeed, toolspec.MaxSpeed)
	case !slices.Contains(toolspec.SpeechModels(), s.Model):
		return args, fmt.Sprintf("unknown model %q (one of %s)", s.Model, strings.Join(toolspec.SpeechModels(), ", "))
	case !slices.Contains(toolspec.SpeechFormats(), s.Format):
		return args, fmt.Sprintf("unknown format %q (one of %s)", s.Format, strings.Join(toolspec.SpeechFormats(), ", "))
	}
	return args, ""
}

// speak synthesises args.Text with args' settings, saves the audio under
// args.Filename and answers the tool's result; it logs to log.
func (t *tts) speak(ctx context.Context, log *zap.Logger, args toolspec.SpeechArgs) *mcpgo.CallToolResult {
	log.Debug("speech requested", zap.String("text", args.Text))
	if args.MaxChars > 0 {
		args.Text = within(args.Text, args.MaxChars) // the rest is not spoken
	}
	speech := func(ctx context.Context, limit int) ([][]byte, int, error) {
		return t.audio(ctx, args.Text, args.SpeechSettings, limit)
	}
	return t.deliver(ctx, log, args, speech, func() int { return utf8.RuneCountInString(args.Text) })
}

// deliver saves the audio speech makes under args.Filename, in args'
// format, one file a voice note, and answers the tool's result; chars
// says how many characters were spoken.
func (t *tts) deliver(ctx context.Context, log *zap.Logger, args toolspec.SpeechArgs,
	speech func(ctx context.Context, limit int) ([][]byte, int, error), chars func() int) *mcpgo.CallToolResult {
	ext, ok := toolspec.SpeechExt(args.Format)
	if !ok {
		return mcpgo.NewToolResultError(fmt.Sprintf("unknown format %q", args.Format))
	}
	log = log.With(zap.String("tool", toolspec.SpeechToolName), zap.String("voice", args.Voice), zap.String("format", args.Format))
	notes, parts, err := speech(ctx, t.cfg.MaxVoiceNote)
	if err != nil {
		var sf *speechFailure
		if errors.As(err, &sf) {
			reason := openAIFailure(sf.err, t.cfg.Timeout)
			log.Warn("speech failed", zap.Int("part", sf.part+1), zap.Int("parts", sf.parts), zap.String("reason", reason))
			return mcpgo.NewToolResultError(reason)
		}
		log.Warn("making the speech failed", zap.Error(err))
		return mcpgo.NewToolResultError("audio: " + err.Error())
	}
	// One time stamp: the notes are <prefix>-<ms>, <prefix>-<ms>-1...
	now := t.cfg.Now()
	res := toolspec.SpeechResult{Success: true, Format: args.Format, Characters: chars(), Voice: args.Voice, Parts: parts}
	for _, data := range notes {
		path, err := output.Save(filepath.Join(t.cfg.DataDir, output.Audio.Dir()), args.Filename, ext, data, now)
		if err != nil {
			log.Error("saving speech failed", zap.Error(err))
			return mcpgo.NewToolResultError("saving the audio failed: " + err.Error())
		}
		res.AudioPaths = append(res.AudioPaths, path)
		res.Bytes += len(data)
	}
	res.AudioPath = res.AudioPaths[0]
	if len(notes) == 1 {
		res.AudioPaths = nil
		if args.IncludeBase64 {
			res.Base64 = base64.StdEncoding.EncodeToString(notes[0])
		}
	}
	log.Info("speech saved", zap.String("path", res.AudioPath), zap.Int("notes", len(notes)), zap.Int("bytes", res.Bytes),
		zap.Int("characters", res.Characters), zap.Int("parts", parts))
	return jsonResult(res)
}

// speechFailure is OpenAI's refusal of one part of a text.
type speechFailure struct {
	part, parts int
	err         error
}

func (f *speechFailure) Error() string {
	return fmt.Sprintf("speech part %d of %d: %v", f.part+1, f.parts, f.err)
}

func (f *speechFailure) Unwrap() error { return f.err }

// audio speaks text with settings: in parts of at most MaxSpeechInput
// characters, joined into one file (or several: joinNotes).
func (t *tts) audio(ctx context.Context, text string, settings toolspec.SpeechSettings, limit int) (notes [][]byte, parts int, err error) {
	texts := splitText(text, MaxSpeechInput)
	clips, failed, err := t.synthesiseAll(ctx, texts, openai.CreateSpeechRequest{
		Model: openai.SpeechModel(settings.Model), Voice: openai.SpeechVoice(settings.Voice),
		ResponseFormat: openai.SpeechResponseFormat(settings.Format), Speed: settings.Speed,
	})
	if err != nil {
		return nil, len(texts), &speechFailure{part: failed, parts: len(texts), err: err}
	}
	notes, err = joinNotes(settings.Format, clips, limit)
	return notes, len(texts), err
}

// Speaker speaks text the way the tts tool does, for brainbot's own use
// (panels speak their members' words without a tool call).
type Speaker struct{ t *tts }

// NewSpeaker is a Speaker with cfg's OpenAI settings and timeout.
func NewSpeaker(cfg Config) *Speaker { return &Speaker{t: newTTS(cfg)} }

// Speak returns text spoken with settings (toolspec's defaults fill in
// what is unset) and the audio's file extension: in parts, as an answer
// is spoken while it is written (Begin). spoken is how many characters
// OpenAI spoke, what it bills: after an error too, for the parts made.
func (s *Speaker) Speak(ctx context.Context, text string, settings toolspec.SpeechSettings) (data []byte, ext string, spoken int, err error) {
	settings = withSpeechDefaults(settings)
	ext, ok := toolspec.SpeechExt(settings.Format)
	if !ok {
		return nil, "", 0, fmt.Errorf("unknown speech format %q", settings.Format)
	}
	u := s.Begin(ctx, settings)
	defer u.Cancel()
	u.Finish(text)
	notes, _, err := u.Audio(ctx, -1) // one file, however long
	u.Cancel()                        // what was spoken is all that is billed
	if err != nil {
		return nil, "", u.Spoken(), err
	}
	return notes[0], ext, u.Spoken(), nil
}

// withSpeechDefaults fills in toolspec's defaults for what settings leave
// unset.
func withSpeechDefaults(settings toolspec.SpeechSettings) toolspec.SpeechSettings {
	settings.Voice = cmp.Or(settings.Voice, toolspec.DefaultVoice)
	settings.Speed = cmp.Or(settings.Speed, toolspec.DefaultSpeed)
	settings.Model = cmp.Or(settings.Model, toolspec.DefaultSpeechModel)
	settings.Format = cmp.Or(settings.Format, toolspec.DefaultFormat)
	return settings
}

// speechParallel bounds how many parts of one long text are spoken at once.
const speechParallel = 4

// synthesiseAll speaks the parts concurrently, at most speechParallel at
// once, and returns the clips in order. The Claude CLI prints nothing while
// a tool runs, so a long answer spoken part after part could outlast the
// bot's inactivity limit (and keeps the user waiting longer). The first
// failure cancels the rest; failed is its part's index.
func (t *tts) synthesiseAll(ctx context.Context, parts []string, base openai.CreateSpeechRequest) (clips [][]byte, failed int, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clips = make([][]byte, len(parts))
	slots := make(chan struct{}, speechParallel)
	var (
		wg   sync.WaitGroup
		once sync.Once
	)
	for i, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				return
			}
			req := base
			req.Input = part
			clip, perr := t.synthesise(ctx, req)
			if perr != nil {
				// Only the first failure counts: the others are its cancellation.
				once.Do(func() { failed, err = i, perr; cancel() })
				return
			}
			clips[i] = clip
		}()
	}
	wg.Wait()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err() // the caller's context ended before every part began
	}
	return clips, failed, err
}

// synthesise makes one speech call within the per-call deadline, body
// included.
func (t *tts) synthesise(ctx context.Context, req openai.CreateSpeechRequest) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	resp, err := t.client.CreateSpeech(ctx, req)
	if err != nil {
		return nil, err
	}
	defer resp.Close()
	b, err := io.ReadAll(io.LimitReader(resp, maxSpeechBytes+1))
	switch {
	case err != nil:
		return nil, err
	case len(b) == 0:
		return nil, errors.New("empty audio answer")
	case len(b) > maxSpeechBytes:
		return nil, fmt.Errorf("audio answer larger than %d bytes", maxSpeechBytes)
	}
	return b, nil
}

// joinNotes joins the parts' audio, in order, into voice notes of at
// most limit bytes each (toolspec.MaxVoiceNoteBytes for 0; less for the
// file headers a join adds), cut only between parts: one note unless the
// audio is longer. limit < 0: always one.
func joinNotes(format string, clips [][]byte, limit int) ([][]byte, error) {
	if limit == 0 {
		limit = toolspec.MaxVoiceNoteBytes
	}
	limit -= limit / 50 // 2% for the headers and pages a join rewrites
	var notes [][]byte
	for start := 0; start < len(clips); {
		end, size := start+1, len(clips[start])
		for end < len(clips) && (limit < 0 || size+len(clips[end]) <= limit) {
			size += len(clips[end])
			end++
		}
		note, err := joinClips(format, clips[start:end])
		if err != nil {
			return nil, err
		}
		notes = append(notes, note)
		start = end
	}
	return notes, nil
}

// joinClips makes one file of the parts' audio. A single part is kept as
// OpenAI sent it.
func joinClips(format string, clips [][]byte) ([]byte, error) {
	if len(clips) == 1 {
		return clips[0], nil
	}
	if format == "opus" {
		return audio.JoinOggOpus(clips)
	}
	return audio.JoinMP3(clips)
}
