package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"brainbot/cmd/internal/stack"
	"brainbot/mcp/audio"
	"brainbot/mcp/openaitest"
)

// Photos, voice messages and files in, end to end: the real CLI gets the
// image blocks and the transcripts, the scripted model answers what it
// saw, and users get one answer each.
func TestMediaEndToEnd(t *testing.T) {
	example, err := os.ReadFile("../../brains/voice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := newStackWithBrains(t, map[string]string{"voice.yaml": string(example)})

	t.Run("a voice message to a speech brain gets a voice note answering its words", func(t *testing.T) {
		r := sendVoice(t, s, "speaker", 401, "what time is it")
		if got := r.Methods(); len(got) != 1 || got[0] != "sendVoice" {
			t.Fatalf("want one voice note, got %v\n%s", got, r.Summary.Raw)
		}
		speech := lastOpenAI(s, "/v1/audio/speech")
		if speech.Input != "You said: [voice message] what time is it (message 1)" {
			t.Errorf("the voice note says %q", speech.Input)
		}
		heard := lastOpenAI(s, "/v1/audio/transcriptions")
		if heard.Model != "gpt-4o-mini-transcribe" || heard.FileName != "voice.ogg" {
			t.Errorf("transcription request %+v", heard)
		}
		if r.Summary.Str("mode") != "speech" || r.Summary.Int("audio_s") != 1 || r.Summary.Float("openai_usd") <= 0 {
			t.Errorf("request line %s", r.Summary.Raw)
		}
		// The words are in the log at debug only.
		for _, l := range s.Logs().Find(0, func(l stack.Line) bool { return strings.Contains(l.Raw, "what time is it") }) {
			if l.Level != "debug" {
				t.Errorf("the words at %s: %s", l.Level, l.Raw)
			}
		}
	})

	t.Run("the example voice brain answers voice with voice", func(t *testing.T) {
		r := sendVoice(t, s, "voice", 402, "good morning")
		if got := r.Methods(); len(got) != 1 || got[0] != "sendVoice" {
			t.Fatalf("want one voice note, got %v\n%s", got, r.Summary.Raw)
		}
		if _, err := audio.ParseOggOpus(r.Calls[0].Files["voice"].Data); err != nil {
			t.Errorf("the voice note is not Ogg Opus as brains/voice.yaml says: %v", err)
		}
	})

	t.Run("a photo with a caption gets an answer that saw it", func(t *testing.T) {
		r := send(t, s, "narrator", 403, photoMessage(s, "narrator", 64, 48, "what is in this picture?"))
		want := "You said: what is in this picture? (message 1) [I see: image image/jpeg 64x48]"
		if got := wantText(t, r); got != want {
			t.Errorf("reply %q\nwant  %q", got, want)
		}
		// The CLI keeps a copy of the image in its temporary folder: the
		// warm process's own, not brainbot's (docs/operations.md).
		copies, _ := filepath.Glob(filepath.Join(s.DataDir, "claude", "tmp", "cli-*", "claude-*", "*", "*", "images", "*"))
		if len(copies) == 0 {
			t.Errorf("no copy of the image in the CLI process's temporary folder")
		}
		if strays, _ := filepath.Glob(filepath.Join(s.TempDir, "claude-*")); len(strays) > 0 {
			t.Errorf("the CLI wrote to brainbot's temporary folder: %q", strays)
		}
	})

	t.Run("an album of three photos gets one reply", func(t *testing.T) {
		var album []map[string]any
		for i := range 3 {
			m := photoMessage(s, "narrator", 30+i, 20, "")
			m["media_group_id"] = "album-404"
			album = append(album, m)
		}
		album[0]["caption"] = "our holiday"
		r := send(t, s, "narrator", 404, album...)
		want := "You said: our holiday (message 1) [I see: image image/jpeg 30x20; image image/jpeg 31x20; image image/jpeg 32x20]"
		if got := wantText(t, r); got != want {
			t.Errorf("reply %q\nwant  %q", got, want)
		}
		if got := wantText(t, ask(t, s, "narrator", 404, "and now?")); got != "You said: and now? (message 2)" {
			t.Errorf("after the album: %q (one album is one message)", got)
		}
	})

	t.Run("a sticker gets the friendly reply without the model", func(t *testing.T) {
		before := len(s.Model.Requests())
		r := send(t, s, "narrator", 405, map[string]any{"sticker": map[string]any{
			"file_id": "CAACAgIAAxkBAAE", "file_unique_id": "AgADx", "type": "regular", "width": 512, "height": 512,
			"is_animated": false, "is_video": false, "emoji": "👍"}})
		if got := wantText(t, r); !strings.HasPrefix(got, "Sorry, I can't open this kind of message.") {
			t.Errorf("reply %q", got)
		}
		if len(s.Model.Requests()) != before {
			t.Errorf("the model was asked about a sticker")
		}
	})

	t.Run("an oversize file gets the size message", func(t *testing.T) {
		r := send(t, s, "narrator", 406, map[string]any{"document": map[string]any{
			"file_id": "BQACAgIAAxkBAAE", "file_unique_id": "AgADy", "file_name": "book.pdf",
			"mime_type": "application/pdf", "file_size": 12 << 20}})
		if got := wantText(t, r); got != "Sorry, that's too big for me: I can take up to 5 MB." {
			t.Errorf("reply %q", got)
		}
	})
}

// send sends contents (one message, or an album's) from user and returns
// the answer.
func send(t *testing.T, s *stack.Stack, bot string, user int64, contents ...map[string]any) stack.Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	r, err := s.SendMessage(bot, user, contents...).Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sendVoice sends a voice message saying words.
func sendVoice(t *testing.T, s *stack.Stack, bot string, user int64, words string) stack.Reply {
	t.Helper()
	note, err := openaitest.VoiceNote(words)
	if err != nil {
		t.Fatal(err)
	}
	id := s.Telegram.AddFile(stack.Token(bot), note)
	return send(t, s, bot, user, map[string]any{"voice": map[string]any{
		"file_id": id, "file_unique_id": "u" + id, "duration": 1, "mime_type": "audio/ogg", "file_size": len(note)}})
}

// photoMessage is a photo of width x height as Telegram sends it: the
// sizes it made (here one), stored for the bot to fetch.
func photoMessage(s *stack.Stack, bot string, width, height int, caption string) map[string]any {
	var buf bytes.Buffer
	_ = jpeg.Encode(&buf, image.NewGray(image.Rect(0, 0, width, height)), nil) // in memory: cannot fail
	id := s.Telegram.AddFile(stack.Token(bot), buf.Bytes())
	m := map[string]any{"photo": []any{map[string]any{
		"file_id": id, "file_unique_id": fmt.Sprint("u", id), "width": width, "height": height, "file_size": buf.Len()}}}
	if caption != "" {
		m["caption"] = caption
	}
	return m
}

// lastOpenAI is the OpenAI stand-in's last request to path.
func lastOpenAI(s *stack.Stack, path string) openaitest.Request {
	reqs := s.OpenAI.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Path == path {
			return reqs[i]
		}
	}
	return openaitest.Request{}
}
