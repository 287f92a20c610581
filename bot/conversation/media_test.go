package conversation

// Files in, at the ports: what is fetched within which limit, what the
// model gets of it, and what is answered without the model.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"brainbot/claude"
	"brainbot/message"
)

// fakeTranscriber hears words in any audio, and says what it was given.
type fakeTranscriber struct{ heard *string }

func (f fakeTranscriber) Transcribe(ctx context.Context, model, name string, audio io.Reader) (string, error) {
	data, _ := io.ReadAll(audio)
	*f.heard = fmt.Sprintf("%s %s %s", model, name, data)
	return "what a day", nil
}

const pngHeader = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"

// A file is fetched within its kind's limit only when it will be read;
// voice becomes words before the text, an image an attachment of the type
// its bytes say; what will not be read gets its message without the model.
func TestFilesIn(t *testing.T) {
	tooBig := fmt.Sprintf("text %q formatted=false", "Too big: "+formatBytes(message.MaxBytes[message.PDF])+".")
	for _, c := range []struct {
		name       string
		media      message.Attachment
		data       string
		noSTT      bool
		out        []string // what the chat got, after the fetch
		prompt     string   // "" when the model is not asked
		attachment string   // the media type the model gets
	}{
		{name: "voice", media: message.Attachment{Kind: message.Voice, FileID: "f1", Seconds: 3}, data: "ogg",
			out: []string{`text "Hello, Ann." formatted=true`}, prompt: "[voice message] what a day\n\nsee this"},
		{name: "photo", media: message.Attachment{Kind: message.Image, FileID: "f1", MIME: "image/jpeg"}, data: pngHeader,
			out: []string{`text "Hello, Ann." formatted=true`}, prompt: "see this", attachment: "image/png"},
		{name: "photo that is not one", media: message.Attachment{Kind: message.Image, FileID: "f1"}, data: "<html>",
			out: []string{`text "Not for me." formatted=false`}},
		{name: "over its limit when fetched", media: message.Attachment{Kind: message.PDF, FileID: "f1"},
			data: strings.Repeat("x", int(message.MaxBytes[message.PDF])+1), out: []string{tooBig}},
		{name: "over its limit by its size", media: message.Attachment{Kind: message.PDF, FileID: "f1", Size: message.MaxBytes[message.PDF] + 1},
			out: []string{tooBig}},
		{name: "sticker", media: message.Attachment{Kind: message.Other, What: "sticker"}, out: []string{`text "Not for me." formatted=false`}},
		{name: "voice without speech to text", media: message.Attachment{Kind: message.Voice, FileID: "f1"}, noSTT: true,
			out: []string{`text "Text only." formatted=false`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var heard string
			k := newKit(t, "messages:\n  unsupported: Not for me.\n  too_big: \"Too big: {max}.\"\n  text_only: Text only.\n",
				func(cfg *Config) {
					if !c.noSTT {
						cfg.Transcriber = fakeTranscriber{&heard}
					}
				})
			k.chats.fetched = map[string][]byte{"f1": []byte(c.data)}
			in := k.private("see this")
			in.Media = []message.Attachment{c.media}
			k.serve(in)

			out := k.ev.Of("out")
			if c.data != "" {
				fetch := fmt.Sprintf("fetch f1 within %d", message.MaxBytes[c.media.Kind])
				if len(out) == 0 || out[0] != fetch {
					t.Fatalf("sent %q, want %q first", out, fetch)
				}
				k.want("out", append([]string{fetch}, c.out...)...)
			} else {
				k.want("out", c.out...)
			}
			reqs := k.agent.requests()
			if c.prompt == "" {
				if len(reqs) != 0 {
					t.Errorf("the model was asked about %q", reqs[0].Prompt)
				}
				return
			}
			if len(reqs) != 1 || reqs[0].Prompt != c.prompt {
				t.Fatalf("requests %+v, want one with %q", reqs, c.prompt)
			}
			if got := attachmentTypes(reqs[0]); got != c.attachment {
				t.Errorf("the model got %q, want %q", got, c.attachment)
			}
			if c.media.Kind == message.Voice {
				if heard != k.brain.STT.Model+" voice.ogg ogg" {
					t.Errorf("transcribed %q", heard)
				}
				if u := k.usage(); len(u) != 1 || u[0].OpenAIUSD <= 0 {
					t.Errorf("usage %+v: the transcription is not paid for", u)
				}
			}
		})
	}
}

func attachmentTypes(req claude.Request) string {
	var types []string
	for _, a := range req.Attachments {
		types = append(types, a.MediaType)
	}
	return strings.Join(types, " ")
}
