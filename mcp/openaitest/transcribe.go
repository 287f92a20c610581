package openaitest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"brainbot/mcp/audio"
)

// MaxTranscriptionBytes is OpenAI's limit on an uploaded audio file.
const MaxTranscriptionBytes = 25 << 20

// transcriptionFormats are the file extensions OpenAI's transcription API
// accepts, as its error message lists them.
var transcriptionFormats = []string{"flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm"}

// wordsVendor starts the OpusTags vendor string of a VoiceNote: the
// stand-in's way of knowing what was "said".
const wordsVendor = "brainbot openaitest words: "

// VoiceNote returns a voice note as Telegram clients record it, an Ogg
// Opus stream, lasting as long as the speech stand-in would take to say
// words, with words hidden in its header: the transcription stand-in
// answers them.
func VoiceNote(words string) ([]byte, error) {
	s := &audio.OpusStream{Head: audio.NewOpusHead(1, 312), Tags: audio.NewOpusTags(wordsVendor + words)}
	packets := max(utf8.RuneCountInString(words)*SpeechPerCharacterMillis/20, 1)
	for range packets {
		s.Packets = append(s.Packets, []byte{0xF8, 0xFF, 0xFE})
	}
	s.Granule = int64(len(s.Packets)) * 960
	return s.Encode(0x0b0a1b08)
}

// transcribe serves POST /v1/audio/transcriptions (multipart: file,
// model, response_format) as OpenAI does: the words of a VoiceNote, ""
// for other audio it can parse (silence), 400 for a file that is not
// audio or of a format OpenAI does not take, 413 over 25 MB.
func (s *Server) transcribe(w http.ResponseWriter, r *http.Request) {
	file, header, err := r.FormFile("file")
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_value", "file is required: "+err.Error())
		return
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, MaxTranscriptionBytes+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_value", err.Error())
		return
	}
	rec := Request{Model: r.FormValue("model"), Format: r.FormValue("response_format"), FileName: header.Filename, AudioBytes: len(data)}
	words, heard := spokenWords(data, header.Filename)
	if !s.admit(w, r, rec, words) {
		return
	}
	ext := strings.TrimPrefix(path.Ext(header.Filename), ".")
	switch {
	case len(data) > MaxTranscriptionBytes:
		writeError(w, http.StatusRequestEntityTooLarge, "request_too_large", "Maximum content size limit (26214400) exceeded.")
		return
	case rec.Model == "":
		writeError(w, http.StatusBadRequest, "invalid_value", "you must provide a model parameter")
		return
	case !slices.Contains(transcriptionFormats, ext):
		writeError(w, http.StatusBadRequest, "invalid_value",
			fmt.Sprintf("Invalid file format. Supported formats: %q", transcriptionFormats))
		return
	case !heard:
		writeError(w, http.StatusBadRequest, "invalid_value", "Audio file might be corrupted or unsupported")
		return
	}
	switch rec.Format {
	case "text":
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, words+"\n")
	case "", "json":
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"text": words})
	default:
		writeError(w, http.StatusBadRequest, "invalid_value", "unsupported response_format "+rec.Format)
	}
}

// spokenWords is what the stand-in hears in data: a VoiceNote's words,
// nothing in other Ogg Opus or MP3 audio; heard is false when data is
// neither (or a format the stand-in does not parse).
func spokenWords(data []byte, name string) (words string, heard bool) {
	switch strings.ToLower(path.Ext(name)) {
	case ".ogg", ".oga":
		stream, err := audio.ParseOggOpus(data)
		if err != nil {
			return "", false
		}
		return strings.TrimPrefix(opusVendor(stream.Tags), wordsVendor), true
	case ".mp3", ".mpga", ".mpeg":
		_, err := audio.ParseMP3(data)
		return "", err == nil
	}
	return "", false
}

// opusVendor reads the vendor string of an OpusTags packet ("" if it is
// malformed); only a VoiceNote's starts with wordsVendor.
func opusVendor(tags []byte) string {
	const head = len("OpusTags") + 4
	if len(tags) < head {
		return ""
	}
	n := int(binary.LittleEndian.Uint32(tags[head-4 : head]))
	if n > len(tags)-head {
		return ""
	}
	vendor := string(tags[head : head+n])
	if !strings.HasPrefix(vendor, wordsVendor) {
		return ""
	}
	return vendor
}
