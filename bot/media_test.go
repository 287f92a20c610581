package bot

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	"brainbot/bot/intake"
	"brainbot/bot/telegramtest"
	"brainbot/claude"
	"brainbot/mcp/openaitest"
	"brainbot/pricing"
	"brainbot/state/sqlite"
	"brainbot/transcribe"
)

// mediaHarness is a harness whose bots can transcribe, against the
// OpenAI stand-in.
type mediaHarness struct {
	*harness
	openai *openaitest.Server
}

// newMediaHarness runs the brain alpha (tokenA) with extra YAML.
func newMediaHarness(t *testing.T, extra string, cfg func(*Config)) *mediaHarness {
	t.Helper()
	api := openaitest.NewServer()
	t.Cleanup(api.Close)
	oc := openai.DefaultConfig("sk-test")
	oc.BaseURL = api.URL
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, extra)}, func(c *Config) {
		c.Transcriber = transcribe.New(oc)
		if cfg != nil {
			cfg(c)
		}
	})
	return &mediaHarness{harness: h, openai: api}
}

var messageIDs atomic.Int64

// send queues a message from user in their private chat, its content
// given as the JSON fields Telegram sends ("voice":{...}, "caption":...).
func (h *mediaHarness) send(user int64, fields string) {
	h.sendIn(user, user, "private", fields)
}

func (h *mediaHarness) sendIn(user, chat int64, chatType, fields string) {
	h.srv.SendUpdate(tokenA, fmt.Appendf(nil,
		`{"message":{"message_id":%d,"date":1700000000,"chat":{"id":%d,"type":%q},"from":{"id":%d,"is_bot":false,"first_name":"Ann"},%s}}`,
		messageIDs.Add(1), chat, chatType, user, fields))
}

// ask sends fields from user and returns the bot's next delivery.
func (h *mediaHarness) ask(user int64, fields string) telegramtest.Call {
	h.t.Helper()
	before := len(h.srv.Sent(tokenA))
	h.send(user, fields)
	return h.waitSent(tokenA, before+1)[before]
}

// lastRequest is what the model was last asked.
func (h *mediaHarness) lastRequest() claude.Request {
	h.t.Helper()
	reqs := h.claude.requests()
	if len(reqs) == 0 {
		h.t.Fatal("the model was not asked")
	}
	return reqs[len(reqs)-1]
}

// summary waits for the n-th request line (from 1) and returns its fields.
func (h *mediaHarness) summary(n int) map[string]any {
	h.t.Helper()
	waitFor(h.t.(*testing.T), func() bool { return h.logs.FilterMessage("request").Len() >= n })
	return h.logs.FilterMessage("request").All()[n-1].ContextMap()
}

func voice(fileID string, seconds, size int) string {
	return fmt.Sprintf(`"voice":{"file_id":%q,"file_unique_id":"AgADvoice","duration":%d,"mime_type":"audio/ogg","file_size":%d}`, fileID, seconds, size)
}

func document(fileID, name, mime string, size int) string {
	return fmt.Sprintf(`"document":{"file_id":%q,"file_unique_id":"AgADdoc","file_name":%q,"mime_type":%q,"file_size":%d}`, fileID, name, mime, size)
}

func jpegOf(t *testing.T, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, image.NewRGBA(image.Rect(0, 0, w, h)), nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A voice message reaches the model as its words, marked as spoken, and
// a brain that can speak answers it with a voice message, even where its
// text messages get text. The transcription is priced with the request.
func TestVoiceMessageIsAnsweredInVoice(t *testing.T) {
	h := newMediaHarness(t, "tts:\n  user_toggle: true\n", nil)
	note, err := openaitest.VoiceNote("what is the weather like")
	if err != nil {
		t.Fatal(err)
	}
	id := h.srv.AddFile(tokenA, note)
	got := h.ask(7, voice(id, 30, len(note)))
	if got.Method != "sendVoice" {
		t.Fatalf("reply to a voice message: %s %q, want a voice message", got.Method, got.Param("text"))
	}
	req := h.lastRequest()
	if req.Prompt != "[voice message] what is the weather like" || req.Mode != claude.Speech || len(req.Attachments) != 0 {
		t.Errorf("model asked %q in mode %v with %d files", req.Prompt, req.Mode, len(req.Attachments))
	}
	calls := h.openai.Requests()
	if len(calls) != 1 || calls[0].Model != "gpt-4o-mini-transcribe" || calls[0].FileName != "voice.ogg" || calls[0].AudioBytes != len(note) {
		t.Fatalf("OpenAI got %+v", calls)
	}
	line := h.summary(1)
	if line["audio_s"] != int64(30) || line["mode"] != "speech" || line["outcome"] != "ok" {
		t.Errorf("request line %v", line)
	}
	// 30 s at $0.003 a minute, and the voice reply's speech.
	speech, _ := pricing.Speech("tts-1", len("You said: "+req.Prompt))
	if usd, _ := line["openai_usd"].(float64); math.Abs(usd-(0.0015+speech)) > 1e-9 {
		t.Errorf("openai_usd = %v, want the transcription's 0.0015 and the speech's %v", line["openai_usd"], speech)
	}
	if h.logs.FilterMessage("transcribed").Len() != 1 {
		t.Errorf("the words are not logged at debug")
	}
	// Text still gets text.
	if got := h.exchange(tokenA, 7, "and in writing?"); got.Method != "sendMessage" {
		t.Errorf("reply to text: %s", got.Method)
	}
	// /voice chooses for text messages only: switched on and off again,
	// a voice message is still answered in voice.
	h.exchange(tokenA, 7, "/voice")
	h.exchange(tokenA, 7, "/voice")
	if got := h.ask(7, voice(id, 30, len(note))); got.Method != "sendVoice" {
		t.Errorf("after /voice off, reply to a voice message: %s", got.Method)
	}
}

// With reply_to_voice off, or a brain that cannot speak, a voice message
// is answered like text.
func TestVoiceMessageAnsweredInTextWhereTheBrainSaysSo(t *testing.T) {
	for _, extra := range []string{"tts:\n  user_toggle: true\n  reply_to_voice: false\n", ""} {
		h := newMediaHarness(t, extra, nil)
		note, _ := openaitest.VoiceNote("hi")
		got := h.ask(7, voice(h.srv.AddFile(tokenA, note), 1, len(note)))
		if got.Method != "sendMessage" || got.Param("text") != "You said: [voice message] hi" {
			t.Errorf("%q: reply %s %q", extra, got.Method, got.Param("text"))
		}
	}
}

// Without speech to text (no OpenAI key, or stt.enabled: false) a voice
// message gets text_only, and the model is not asked.
func TestVoiceWithoutSpeechToText(t *testing.T) {
	cases := map[string]*mediaHarness{
		"no OpenAI key":      newMediaHarness(t, "messages:\n  text_only: Write to me.\n", func(c *Config) { c.Transcriber = nil }),
		"stt.enabled: false": newMediaHarness(t, "stt:\n  enabled: false\nmessages:\n  text_only: Write to me.\n", nil),
	}
	for name, h := range cases {
		note, _ := openaitest.VoiceNote("hello")
		if got := h.ask(7, voice(h.srv.AddFile(tokenA, note), 2, len(note))); got.Param("text") != "Write to me." {
			t.Errorf("%s: reply %q", name, got.Param("text"))
		}
		if line := h.summary(1); line["outcome"] != "text only" {
			t.Errorf("%s: outcome %v", name, line["outcome"])
		}
		if len(h.claude.requests()) != 0 || len(h.openai.Requests()) != 0 {
			t.Errorf("%s: the model or OpenAI was asked", name)
		}
	}
}

// Audio OpenAI cannot read, and a file Telegram will not give, get the
// error text and a log line with the cause; the conversation goes on.
func TestVoiceThatCannotBeHeard(t *testing.T) {
	h := newMediaHarness(t, "messages:\n  error: Oops.\n", nil)
	broken := h.srv.AddFile(tokenA, []byte("this is not audio"))
	if got := h.ask(7, voice(broken, 2, 17)); got.Param("text") != "Oops." {
		t.Fatalf("broken audio: %q", got.Param("text"))
	}
	if got := h.ask(7, voice("gone", 2, 17)); got.Param("text") != "Oops." {
		t.Fatalf("a file Telegram will not give: %q", got.Param("text"))
	}
	failures := h.logs.FilterMessage("request failed").All()
	if len(failures) != 2 || failures[0].ContextMap()["phase"] != "transcribe" || failures[1].ContextMap()["phase"] != "download" ||
		!strings.Contains(failures[0].ContextMap()["error"].(string), "400") || !strings.Contains(failures[1].ContextMap()["error"].(string), "getFile") {
		t.Errorf("failure lines %v", failures)
	}
	if got := h.exchange(tokenA, 7, "still there?"); got.Param("text") != "You said: still there?" {
		t.Errorf("after the failures: %q", got.Param("text"))
	}
	if len(h.claude.requests()) != 1 {
		t.Errorf("the model was asked %d times, want once (the text)", len(h.claude.requests()))
	}
}

// A photo reaches the model as an image, the largest size within the
// limit, with its caption as the text; without a caption, the image alone.
func TestPhotoReachesTheModel(t *testing.T) {
	h := newMediaHarness(t, "", nil)
	small, medium := jpegOf(t, 90, 60), jpegOf(t, 800, 533)
	sizes := fmt.Sprintf(`"photo":[{"file_id":%q,"file_unique_id":"s","width":90,"height":60,"file_size":%d},`+
		`{"file_id":%q,"file_unique_id":"m","width":800,"height":533,"file_size":%d},`+
		`{"file_id":"too-big","file_unique_id":"l","width":5120,"height":3413,"file_size":%d}]`,
		h.srv.AddFile(tokenA, small), len(small), h.srv.AddFile(tokenA, medium), len(medium), 11<<20)
	if got := h.ask(7, sizes+`,"caption":"what is this?"`); got.Param("text") != "You said: what is this?" {
		t.Fatalf("reply %q", got.Param("text"))
	}
	req := h.lastRequest()
	if len(req.Attachments) != 1 || req.Attachments[0].MediaType != "image/jpeg" || !bytes.Equal(req.Attachments[0].Data, medium) {
		t.Fatalf("attachments %+v, want the 800x533 JPEG", describeAttachments(req.Attachments))
	}
	h.ask(7, sizes)
	if req := h.lastRequest(); req.Prompt != "" || len(req.Attachments) != 1 {
		t.Errorf("a photo without caption: prompt %q, %d files", req.Prompt, len(req.Attachments))
	}
}

func describeAttachments(files []claude.Attachment) []string {
	var out []string
	for _, f := range files {
		out = append(out, fmt.Sprintf("%s %q %d bytes", f.MediaType, f.Name, len(f.Data)))
	}
	return out
}

// Text files are read as text with their name, images sent as files as
// photos, PDFs as PDFs; a file that is not what it claims, or of a kind
// the bot does not read, gets unsupported without the model.
func TestDocuments(t *testing.T) {
	h := newMediaHarness(t, "messages:\n  unsupported: Can't open that.\n", nil)
	png, _ := openaitest.PNG("20x10")
	for _, tc := range []struct {
		name, mime string
		data       []byte
		want       claude.Attachment
	}{
		{"notes.md", "application/octet-stream", []byte("\xef\xbb\xbf# Notes\nbuy milk"), claude.Attachment{MediaType: "text/plain", Name: "notes.md", Data: []byte("# Notes\nbuy milk")}},
		{"data.csv", "text/csv", []byte("a,b\n1,2\n"), claude.Attachment{MediaType: "text/plain", Name: "data.csv", Data: []byte("a,b\n1,2\n")}},
		{"main.go", "", []byte("package main\n"), claude.Attachment{MediaType: "text/plain", Name: "main.go", Data: []byte("package main\n")}},
		{"scan.png", "image/png", png, claude.Attachment{MediaType: "image/png", Data: png}},
		{"paper.pdf", "application/pdf", []byte("%PDF-1.7\n%%EOF\n"), claude.Attachment{MediaType: "application/pdf", Name: "paper.pdf", Data: []byte("%PDF-1.7\n%%EOF\n")}},
	} {
		id := h.srv.AddFile(tokenA, tc.data)
		if got := h.ask(7, document(id, tc.name, tc.mime, len(tc.data))+`,"caption":"look"`); got.Param("text") != "You said: look" {
			t.Errorf("%s: reply %q", tc.name, got.Param("text"))
			continue
		}
		req := h.lastRequest()
		if len(req.Attachments) != 1 || req.Attachments[0].MediaType != tc.want.MediaType || req.Attachments[0].Name != tc.want.Name ||
			!bytes.Equal(req.Attachments[0].Data, tc.want.Data) {
			t.Errorf("%s: model got %v", tc.name, describeAttachments(req.Attachments))
		}
	}
	asked := len(h.claude.requests())
	for _, tc := range []struct{ name, mime, data string }{
		{"latin1.txt", "text/plain", "caf\xe9"},
		{"fake.pdf", "application/pdf", "<html>"},
		{"photo.jpg", "image/jpeg", "not a picture"},
		{"archive.zip", "application/zip", "PK\x03\x04"},
		{"song.mp3", "audio/mpeg", "ID3"},
	} {
		id := h.srv.AddFile(tokenA, []byte(tc.data))
		if got := h.ask(7, document(id, tc.name, tc.mime, len(tc.data))); got.Param("text") != "Can't open that." {
			t.Errorf("%s: reply %q", tc.name, got.Param("text"))
		}
	}
	if n := len(h.claude.requests()); n != asked {
		t.Errorf("the model was asked about %d unreadable files", n-asked)
	}
}

// A file over its kind's limit gets too_big with the limit, whether
// Telegram says its size or the download finds out; nothing beyond the
// limit is read.
func TestFilesOverTheLimit(t *testing.T) {
	h := newMediaHarness(t, "messages:\n  too_big: Up to {max} please.\n", nil)
	big := bytes.Repeat([]byte("a"), 100<<10+1)
	for _, tc := range []struct {
		name, fields, want string
	}{
		{"said by Telegram", document("never-fetched", "big.txt", "text/plain", 5<<20), "Up to 100 KB please."},
		{"found on download", document(h.srv.AddFile(tokenA, big), "big.txt", "text/plain", 10), "Up to 100 KB please."},
		{"a long voice message", voice("never-fetched", 11*60, 1000), "Up to 10 minutes please."},
		{"a large PDF", document("never-fetched", "big.pdf", "application/pdf", 6<<20), "Up to 5 MB please."},
	} {
		if got := h.ask(7, tc.fields); got.Param("text") != tc.want {
			t.Errorf("%s: reply %q, want %q", tc.name, got.Param("text"), tc.want)
		}
	}
	for _, c := range h.srv.Calls(tokenA) {
		if c.Method == "getFile" && c.Param("file_id") == "never-fetched" {
			t.Errorf("a file Telegram said was too big was fetched")
		}
	}
	if len(h.claude.requests()) != 0 || len(h.openai.Requests()) != 0 {
		t.Errorf("the model or OpenAI was asked")
	}
}

// What the bot cannot read gets unsupported in a private chat; in a
// group, only when it replies to the bot, while a photo addressed to the
// bot is read like text.
func TestUnsupportedKindsAndGroups(t *testing.T) {
	h := newMediaHarness(t, "messages:\n  unsupported: Can't open that.\n", nil)
	kinds := []string{
		`"sticker":{"file_id":"s","file_unique_id":"s","type":"regular","width":512,"height":512,"is_animated":false,"is_video":false}`,
		`"location":{"latitude":52.52,"longitude":13.4}`,
		`"contact":{"phone_number":"+4930123","first_name":"Bob"}`,
		`"poll":{"id":"1","question":"Tea?","options":[{"text":"yes","voter_count":0}],"total_voter_count":0,"is_closed":false,"is_anonymous":true,"type":"regular","allows_multiple_answers":false}`,
		`"video":{"file_id":"v","file_unique_id":"v","width":640,"height":480,"duration":3}`,
		`"video_note":{"file_id":"n","file_unique_id":"n","length":240,"duration":3}`,
		`"animation":{"file_id":"g","file_unique_id":"g","width":1,"height":1,"duration":1},"document":{"file_id":"g","file_unique_id":"g"}`,
	}
	for _, k := range kinds {
		if got := h.ask(7, k); got.Param("text") != "Can't open that." {
			t.Errorf("%s: reply %q", k[:20], got.Param("text"))
		}
	}
	if len(h.claude.requests()) != 0 {
		t.Fatalf("the model was asked")
	}

	// In a group: a sticker posted is ignored; one replying to the bot is
	// answered; a photo mentioning the bot is read.
	const group = -100
	botID := telegramtest.BotID(tokenA)
	replyToBot := fmt.Sprintf(`"reply_to_message":{"message_id":1,"date":1,"chat":{"id":%d,"type":"group"},"from":{"id":%d,"is_bot":true,"first_name":"Bot"},"text":"hi"}`, group, botID)
	before := len(h.srv.Sent(tokenA))
	h.sendIn(7, group, "group", kinds[0])
	h.sendIn(7, group, "group", kinds[0]+","+replyToBot)
	if got := h.waitSent(tokenA, before+1)[before]; got.ChatID() != group || got.Param("text") != "Can't open that." {
		t.Fatalf("group sticker replying to the bot: %+v", got)
	}
	img := jpegOf(t, 4, 4)
	mention := fmt.Sprintf(`"photo":[{"file_id":%q,"file_unique_id":"p","width":4,"height":4,"file_size":%d}],"caption":"@%s what is it?","caption_entities":[{"type":"mention","offset":0,"length":%d}]`,
		h.srv.AddFile(tokenA, img), len(img), telegramtest.Username(tokenA), len(telegramtest.Username(tokenA))+1)
	h.sendIn(7, group, "group", mention)
	if got := h.waitSent(tokenA, before+2)[before+1]; got.Param("text") != "You said: Ann: what is it?" {
		t.Fatalf("group photo for the bot: %q", got.Param("text"))
	}
	if req := h.lastRequest(); len(req.Attachments) != 1 {
		t.Errorf("group photo: %d files", len(req.Attachments))
	}
	// The posted sticker came first in the conversation, so any reply to
	// it would have come before these.
	if n := len(h.srv.Sent(tokenA)); n != before+2 {
		t.Errorf("%d replies in the group, want 2 (the posted sticker gets none)", n-before)
	}
}

// The photos of an album are one request with all of them, answered once
// and in order with the conversation's other messages.
func TestAlbumIsOneRequest(t *testing.T) {
	h := newMediaHarness(t, "", nil)
	var want [][]byte
	for i := range 3 {
		img := jpegOf(t, 10+i, 10)
		want = append(want, img)
		caption := ""
		if i == 0 {
			caption = `,"caption":"our trip"`
		}
		h.send(7, fmt.Sprintf(`"media_group_id":"13919228427634190","photo":[{"file_id":%q,"file_unique_id":"u%d","width":%d,"height":10,"file_size":%d}]%s`,
			h.srv.AddFile(tokenA, img), i, 10+i, len(img), caption))
	}
	h.srv.SendText(tokenA, 7, 7, "probe")
	sent := h.waitSent(tokenA, 2)
	if sent[0].Param("text") != "You said: our trip" || sent[1].Param("text") != "You said: probe" {
		t.Fatalf("replies %s, want the album's then the probe's", describeCalls(sent))
	}
	req := h.claude.requests()[0]
	if len(req.Attachments) != 3 {
		t.Fatalf("the album reached the model as %d files", len(req.Attachments))
	}
	for i, a := range req.Attachments {
		if !bytes.Equal(a.Data, want[i]) {
			t.Errorf("photo %d is not the album's, in order", i)
		}
	}
	time.Sleep(intake.AlbumWait + 200*time.Millisecond)
	if n := len(h.srv.Sent(tokenA)); n != 2 {
		t.Errorf("%d replies, want 2", n)
	}
	waitEmptyJournal(t, h.store)
}

// An album journaled before a crash is answered once after the restart,
// with every file.
func TestAlbumReplayedAfterCrash(t *testing.T) {
	h := newMediaHarness(t, "", nil)
	h.stop()
	ctx := context.Background()
	upd := h.srv.SendText(tokenA, 1, 1, "confirmed by the journal")
	for i, caption := range []string{"two photos", ""} {
		img := jpegOf(t, 5, 5)
		media := fmt.Sprintf(`[{"kind":"image","file_id":%q,"size":%d,"album":"42"}]`, h.srv.AddFile(tokenA, img), len(img))
		if _, err := h.store.Journal(ctx, sqlite.Entry{Bot: "alpha", Chat: 7, User: 7, MessageID: 10 + i, Text: caption, Media: media, Created: time.Now()}, "alpha@1001", upd); err != nil {
			t.Fatal(err)
		}
	}
	h.start()
	if got := h.waitSent(tokenA, 1); got[0].Param("text") != "You said: two photos" {
		t.Fatalf("after restart: %s", describeCalls(got))
	}
	if req := h.lastRequest(); len(req.Attachments) != 2 {
		t.Errorf("replayed album: %d files", len(req.Attachments))
	}
	waitEmptyJournal(t, h.store)
	// A second answer to the album, or one to the update the journal
	// confirmed, would have come before the answers to the chats' next
	// messages.
	h.exchange(tokenA, 7, "next")
	h.exchange(tokenA, 1, "next")
	if sent := h.srv.Sent(tokenA); len(sent) != 3 {
		t.Errorf("replies %s, want the album's and one for each next message", describeCalls(sent))
	}
}

// An audio file is transcribed under its own name, or one its type gives.
func TestAudioFileIsTranscribed(t *testing.T) {
	h := newMediaHarness(t, "", nil)
	song := openaitest.SilentMP3(40)
	for _, tc := range []struct{ fields, file, reply string }{
		{`"file_name":"song.mp3","mime_type":"audio/mpeg"`, "song.mp3", "You said: [audio file song.mp3] (no words)"},
		{`"mime_type":"audio/mpeg"`, "audio.mp3", "You said: [audio file without a name] (no words)"},
	} {
		fields := fmt.Sprintf(`"audio":{"file_id":%q,"file_unique_id":"a","duration":1,%s,"file_size":%d},"caption":"what song?"`,
			h.srv.AddFile(tokenA, song), tc.fields, len(song))
		if got := h.ask(7, fields); got.Param("text") != tc.reply+"\n\nwhat song?" {
			t.Errorf("reply %q", got.Param("text"))
		}
		if calls := h.openai.Requests(); calls[len(calls)-1].FileName != tc.file {
			t.Errorf("OpenAI got the file as %q, want %q", calls[len(calls)-1].FileName, tc.file)
		}
	}
}

// A transcription is paid for even when the model is not reached: it
// counts towards the user's spending.
func TestTranscriptionCostRecordedWithoutTheModel(t *testing.T) {
	h := newMediaHarness(t, "", func(c *Config) { c.MaxClaude, c.MaxWait = 1, 300*time.Millisecond })
	h.srv.SendText(tokenA, 7, 7, "hold the slot #wait")
	h.claude.waitCalls(t, 1)
	note, _ := openaitest.VoiceNote("anyone there?")
	if got := h.ask(8, voice(h.srv.AddFile(tokenA, note), 60, len(note))); got.ChatID() != 8 || !strings.Contains(got.Param("text"), "still working") {
		t.Fatalf("reply %q, want the busy message", got.Param("text"))
	}
	close(h.claude.release)
	// The busy request's line, written after its usage was recorded (user
	// 7's may come first).
	waitFor(t, func() bool { return h.logs.FilterMessage("request").FilterField(zap.Int64("user", 8)).Len() > 0 })
	spent, err := h.store.SpentToday(context.Background(), "alpha", 8, time.Now())
	if err != nil || math.Abs(spent-0.003) > 1e-9 {
		t.Errorf("user 8 spent %v (%v), want a minute of transcription, $0.003", spent, err)
	}
}
