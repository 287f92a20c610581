// Package openaitest is an OpenAI API stand-in on loopback for tests and
// demos: POST /v1/audio/speech answers real audio (silent MPEG-1 Layer III
// frames for mp3, an Ogg Opus stream of silent packets for opus) whose
// duration grows with the input, POST /v1/images/generations answers a
// real PNG of the requested size, as b64_json or as a URL served by the
// stand-in itself, POST /v1/audio/transcriptions "hears" the words
// VoiceNote put into a voice note (see Transcribe), and GET /v1/models
// lists the models brainbot uses (the cheap call that checks a key).
//
// Failures can be queued with FailNext, or requested by a directive in the
// speech input, image prompt or a voice note's words, so an end-to-end
// test can drive them through a scripted model or a user's voice message:
//
//	#openai-401     401 invalid_api_key
//	#openai-429     429 rate_limit_exceeded
//	#openai-500     500 server_error
//	#openai-policy  400 content_policy_violation
//	#openai-slow    no answer until the client gives up
package openaitest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"brainbot/mcp/audio"
	"brainbot/toolspec"
)

// SpeechPerCharacterMillis is how much audio the stand-in makes per input
// character (roughly a speaking rate of 15 characters a second).
const SpeechPerCharacterMillis = 60

// Request is one request the stand-in received.
type Request struct {
	Path           string
	Model          string
	Voice          string
	Input          string // speech
	Prompt         string // images
	Format         string // speech and transcription response_format
	FileName       string // transcription: the uploaded file's name
	AudioBytes     int    // transcription: the uploaded file's size
	Speed          float64
	Size           string
	Quality        string
	Style          string
	ResponseFormat string // images
	Authorized     bool   // a bearer token was sent
	// At is when the request arrived (its body read).
	At time.Time
}

type failure struct {
	status        int
	code, message string
}

// Server is a running stand-in. Use URL as the client's BaseURL.
type Server struct {
	// URL is the base URL including /v1, for openai.ClientConfig.BaseURL.
	URL string

	srv  *httptest.Server
	done chan struct{}

	mu       sync.Mutex
	requests []Request
	failures []failure
	images   map[string][]byte // served for URL answers
	barrier  *barrier
	key      string // "": any bearer token is accepted
	// speechBase and speechPerChar slow every speech answer (SetPace).
	speechBase, speechPerChar time.Duration
	// speechBytes is the least size of a speech answer (SetSpeechBytes).
	speechBytes int
}

// barrier holds requests until n of them are in flight at once.
type barrier struct {
	n, arrived int
	all        chan struct{} // closed when the n-th arrives
}

// NewServer starts a stand-in; Close it when done.
func NewServer() *Server {
	s := &Server{done: make(chan struct{}), images: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/audio/speech", s.speech)
	mux.HandleFunc("POST /v1/images/generations", s.generateImage)
	mux.HandleFunc("POST /v1/audio/transcriptions", s.transcribe)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /files/{name}", s.file)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close releases requests still blocked by #openai-slow and stops the server.
func (s *Server) Close() {
	close(s.done)
	s.srv.Close()
}

// FailNext makes the next API request (speech, image or transcription) fail with an
// OpenAI error body carrying status, code and message. Calls queue up.
func (s *Server) FailNext(status int, code, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, failure{status, code, message})
}

// RequireKey makes the stand-in refuse, from now on, every API request
// whose bearer token is not key, with OpenAI's 401 invalid_api_key.
func (s *Server) RequireKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// SetPace makes every later speech answer take base plus perChar for
// each character of its input before its first byte, as OpenAI's does
// (about 0.3 s + 2.5 ms a character).
func (s *Server) SetPace(base, perChar time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.speechBase, s.speechPerChar = base, perChar
}

// SetSpeechBytes makes every later mp3 speech answer at least n bytes
// long (longer silence): a test can pass the most one voice note holds
// without speaking an hour of text.
func (s *Server) SetSpeechBytes(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.speechBytes = n
}

// Barrier makes the next n API requests each wait until all n are in
// flight at once (or their client gives up): a test can prove requests are
// made concurrently, because sequential ones never get past it.
func (s *Server) Barrier(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.barrier = &barrier{n: n, all: make(chan struct{})}
}

// Requests returns the API requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

var directives = map[string]failure{
	"#openai-401":    {http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided."},
	"#openai-429":    {http.StatusTooManyRequests, "rate_limit_exceeded", "Rate limit reached for requests."},
	"#openai-500":    {http.StatusInternalServerError, "server_error", "The server had an error while processing your request."},
	"#openai-policy": {http.StatusBadRequest, "content_policy_violation", "Your request was rejected as a result of our safety system."},
}

// admit records the request and answers a queued or requested failure; it
// reports whether the handler should go on.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, rec Request, text string) bool {
	rec.Path, rec.At = r.URL.Path, time.Now()
	rec.Authorized = strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") && len(r.Header.Get("Authorization")) > len("Bearer ")
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	var f *failure
	if s.key != "" && r.Header.Get("Authorization") != "Bearer "+s.key {
		f = &failure{http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided."}
	} else if len(s.failures) > 0 {
		f = &s.failures[0]
		s.failures = s.failures[1:]
	}
	var wait chan struct{}
	if b := s.barrier; b != nil {
		wait = b.all
		if b.arrived++; b.arrived == b.n {
			close(b.all)
			s.barrier = nil
		}
	}
	s.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-r.Context().Done():
			return false
		case <-s.done:
			return false
		}
	}
	if f == nil {
		for d, df := range directives {
			if strings.Contains(text, d) {
				f = &df
				break
			}
		}
	}
	if f != nil {
		writeError(w, f.status, f.code, f.message)
		return false
	}
	if strings.Contains(text, "#openai-slow") {
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return false
	}
	return true
}

// models answers GET /v1/models with the models brainbot's tools use, in
// OpenAI's list format.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if !s.admit(w, r, Request{}, "") {
		return
	}
	var data []map[string]any
	for _, id := range slices.Concat(toolspec.SpeechModels(), toolspec.TranscriptionModels(), toolspec.ImageModelNames()) {
		data = append(data, map[string]any{"id": id, "object": "model", "created": 1698785189, "owned_by": "system"})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": message, "type": "invalid_request_error", "code": code, "param": nil,
	}})
}

func (s *Server) speech(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model          string  `json:"model"`
		Input          string  `json:"input"`
		Voice          string  `json:"voice"`
		ResponseFormat string  `json:"response_format"`
		Speed          float64 `json:"speed"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_json", err.Error())
		return
	}
	rec := Request{Model: req.Model, Voice: req.Voice, Input: req.Input, Format: req.ResponseFormat, Speed: req.Speed}
	if !s.admit(w, r, rec, req.Input) {
		return
	}
	switch {
	case req.Input == "":
		writeError(w, http.StatusBadRequest, "invalid_value", "input is required")
		return
	case utf8.RuneCountInString(req.Input) > 4096:
		writeError(w, http.StatusBadRequest, "string_above_max_length", "input is longer than 4096 characters")
		return
	case req.Voice == "":
		writeError(w, http.StatusBadRequest, "invalid_value", "voice is required")
		return
	}
	if !s.pace(r, utf8.RuneCountInString(req.Input)) {
		return
	}
	millis := float64(utf8.RuneCountInString(req.Input) * SpeechPerCharacterMillis)
	if req.Speed > 0 {
		millis /= req.Speed
	}
	s.mu.Lock()
	// At least speechBytes of mp3 (96-byte frames of 24 ms); opus of the
	// same length is smaller.
	millis = max(millis, float64(s.speechBytes/96*24))
	s.mu.Unlock()
	switch req.ResponseFormat {
	case "", "mp3":
		w.Header().Set("Content-Type", "audio/mpeg")
		w.Write(SilentMP3(int(math.Ceil(millis / 24))))
	case "opus":
		b, err := SilentOggOpus(int(math.Ceil(millis / 20)))
		if err != nil {
			writeError(w, http.StatusInternalServerError, "server_error", err.Error())
			return
		}
		w.Header().Set("Content-Type", "audio/ogg")
		w.Write(b)
	default:
		writeError(w, http.StatusBadRequest, "invalid_value", "unsupported response_format "+req.ResponseFormat)
	}
}

// pace waits as SetPace says for an input of chars characters; false when
// the client gave up or the server is closing first.
func (s *Server) pace(r *http.Request, chars int) bool {
	s.mu.Lock()
	d := s.speechBase + time.Duration(chars)*s.speechPerChar
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.Context(), d)
	defer cancel()
	select {
	case <-ctx.Done():
		return r.Context().Err() == nil // the time is up, the client still there
	case <-s.done:
		return false
	}
}

// SilentMP3 returns n silent MPEG-1 Layer III frames (32 kbit/s, 48 kHz,
// mono, 96 bytes and 24 ms each). The header is written out literally here,
// independent of package audio, so tests parsing it check both.
func SilentMP3(n int) []byte {
	frame := make([]byte, 96)
	copy(frame, []byte{0xFF, 0xFB, 0x14, 0xC0}) // sync, MPEG-1 L3 no CRC; 32 kbit/s 48 kHz; mono
	return bytes.Repeat(frame, max(n, 1))
}

// SilentOggOpus returns an Ogg Opus stream of n 20 ms CELT silence packets.
func SilentOggOpus(n int) ([]byte, error) {
	const preSkip = 312
	s := &audio.OpusStream{Head: audio.NewOpusHead(1, preSkip), Tags: audio.NewOpusTags("brainbot openaitest")}
	for range max(n, 1) {
		s.Packets = append(s.Packets, []byte{0xF8, 0xFF, 0xFE})
	}
	s.Granule = int64(len(s.Packets)) * 960
	return s.Encode(0x0b0a1b07)
}

var sizesByModel = map[string][]string{
	"dall-e-2":    {"256x256", "512x512", "1024x1024"},
	"dall-e-3":    {"1024x1024", "1792x1024", "1024x1792"},
	"gpt-image-1": {"1024x1024", "1536x1024", "1024x1536", "auto"},
}

func (s *Server) generateImage(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Prompt         string `json:"prompt"`
		Model          string `json:"model"`
		N              int    `json:"n"`
		Size           string `json:"size"`
		Quality        string `json:"quality"`
		Style          string `json:"style"`
		ResponseFormat string `json:"response_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_json", err.Error())
		return
	}
	rec := Request{Model: req.Model, Prompt: req.Prompt, Size: req.Size, Quality: req.Quality, Style: req.Style, ResponseFormat: req.ResponseFormat}
	if !s.admit(w, r, rec, req.Prompt) {
		return
	}
	model := cmp.Or(req.Model, "dall-e-2")
	size := cmp.Or(req.Size, "1024x1024")
	sizes, known := sizesByModel[model]
	switch {
	case req.Prompt == "":
		writeError(w, http.StatusBadRequest, "invalid_value", "prompt is required")
		return
	case !known:
		writeError(w, http.StatusBadRequest, "invalid_value", "unknown model "+model)
		return
	case !slices.Contains(sizes, size):
		writeError(w, http.StatusBadRequest, "invalid_value", fmt.Sprintf("size %s is not supported by %s", size, model))
		return
	case req.N > 1 && model == "dall-e-3":
		writeError(w, http.StatusBadRequest, "invalid_value", "dall-e-3 supports n=1 only")
		return
	}
	if size == "auto" {
		size = "1024x1024"
	}
	img, err := PNG(size)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	item := map[string]string{}
	if model == "dall-e-3" {
		item["revised_prompt"] = "A detailed rendering of: " + req.Prompt
	}
	if strings.HasPrefix(model, "gpt-image") || req.ResponseFormat == "b64_json" {
		item["b64_json"] = base64.StdEncoding.EncodeToString(img)
	} else {
		s.mu.Lock()
		name := strconv.Itoa(len(s.images)) + ".png"
		s.images[name] = img
		s.mu.Unlock()
		item["url"] = s.srv.URL + "/files/" + name
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"created": 1700000000, "data": []any{item}})
}

func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	img, ok := s.images[r.PathValue("name")]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Write(img)
}

// PNG encodes a gradient image of size "WxH".
func PNG(size string) ([]byte, error) {
	ws, hs, ok := strings.Cut(size, "x")
	width, errW := strconv.Atoi(ws)
	height, errH := strconv.Atoi(hs)
	if !ok || errW != nil || errH != nil || width <= 0 || height <= 0 {
		return nil, fmt.Errorf("openaitest: bad size %q", size)
	}
	img := image.NewNRGBA(image.Rect(0, 0, width, height))
	for y := range height {
		for x := range width {
			img.SetNRGBA(x, y, color.NRGBA{R: uint8(x * 255 / width), G: uint8(y * 255 / height), B: 128, A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
