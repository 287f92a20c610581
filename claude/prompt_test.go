package claude

import (
	"encoding/json"
	"strings"
	"testing"
)

// The stdin line carries each attachment as the content block the Claude
// API reads, before the text.
func TestEncodeUserLineWithAttachments(t *testing.T) {
	line, err := encodeUserLine("", "", "what is this?",
		Attachment{MediaType: "image/jpeg", Data: []byte("jpeg")},
		Attachment{MediaType: "application/pdf", Name: "paper.pdf", Data: []byte("%PDF")},
		Attachment{MediaType: "text/plain", Name: "notes.md", Data: []byte("# Notes\n")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(line), "}\n") || strings.Count(string(line), "\n") != 1 {
		t.Fatalf("not one line: %q", line)
	}
	want := `{"type":"user","message":{"role":"user","content":[` +
		`{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"anBlZw=="}},` +
		`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERg=="},"title":"paper.pdf"},` +
		`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"# Notes\n"},"title":"notes.md"},` +
		`{"type":"text","text":"what is this?"}]},"parent_tool_use_id":null,"session_id":""}`
	if got := strings.TrimSuffix(string(line), "\n"); got != want {
		t.Errorf("line\n%s\nwant\n%s", got, want)
	}
}

// A photo without a caption is the image alone; a message without files
// always has its text block, even empty.
func TestEncodeUserLineText(t *testing.T) {
	for _, tc := range []struct {
		text  string
		files []Attachment
		want  []string // block types
	}{
		{"", []Attachment{{MediaType: "image/png", Data: []byte{1}}}, []string{"image"}},
		{"hello", nil, []string{"text"}},
		{"", nil, []string{"text"}},
	} {
		var types []string
		for _, b := range encodedBlocks(t, "", tc.text, tc.files...) {
			types = append(types, b.Type)
			if b.Type == "text" && (b.Text == nil || *b.Text != tc.text) {
				t.Errorf("text block %v, want %q", b.Text, tc.text)
			}
		}
		if strings.Join(types, ",") != strings.Join(tc.want, ",") {
			t.Errorf("text %q with %d files: blocks %v, want %v", tc.text, len(tc.files), types, tc.want)
		}
	}
}

// What the model cannot read is refused before a CLI starts.
func TestEncodeUserLineRefusesUnreadableFiles(t *testing.T) {
	for _, f := range []Attachment{
		{MediaType: "image/heic", Name: "x.heic", Data: []byte{1}},
		{MediaType: "text/plain", Name: "latin1.txt", Data: []byte{'c', 'a', 'f', 0xe9}},
	} {
		if _, err := encodeUserLine("", "", "hi", f); err == nil || !strings.Contains(err.Error(), f.Name) {
			t.Errorf("%s: err = %v, want one naming the file", f.MediaType, err)
		}
	}
}

// A user's text that starts with "/" would be a CLI command (the CLI reads
// the last text block of a message as one): it goes out as words, and
// only a leading space tells. Other text is written as it is.
func TestEncodeUserLineKeepsWordsWords(t *testing.T) {
	for _, tc := range []struct {
		text  string
		files []Attachment
		want  string
	}{
		{"/config model=haiku", nil, " /config model=haiku"},
		{"/insights", []Attachment{{MediaType: "image/png", Data: []byte{1}}}, " /insights"},
		{"/heapdump: hello", nil, " /heapdump: hello"},
		{"/", nil, " /"},
		{"what does /config do?", nil, "what does /config do?"},
		{" /already spaced", nil, " /already spaced"},
		{"hello", nil, "hello"},
	} {
		blocks := encodedBlocks(t, "", tc.text, tc.files...)
		if last := blocks[len(blocks)-1]; last.Type != "text" || last.Text == nil || *last.Text != tc.want {
			t.Errorf("%q: last block %+v, want text %q", tc.text, last, tc.want)
		}
	}
}

// encodedBlock is a content block of an encoded stdin line; Text is nil
// when the block has none.
type encodedBlock struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// encodedBlocks encodes note, text and files as a stdin line and returns
// its content blocks.
func encodedBlocks(t *testing.T, note, text string, files ...Attachment) []encodedBlock {
	t.Helper()
	line, err := encodeUserLine("", note, text, files...)
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Message struct {
			Content []encodedBlock `json:"content"`
		} `json:"message"`
	}
	if err := json.Unmarshal(line, &msg); err != nil {
		t.Fatal(err)
	}
	return msg.Message.Content
}

// The note of the prompt's per-message values opens the message as a
// block of its own: the user's words stay the last block, guarded as ever,
// and a message without a note has no such block.
func TestEncodeUserLineNote(t *testing.T) {
	note := `<brainbot-context>{"time":"14:05 UTC"}</brainbot-context>`
	var got []string
	for _, b := range encodedBlocks(t, note, "/config model=haiku", Attachment{MediaType: "image/png", Data: []byte{1}}) {
		text := b.Type
		if b.Text != nil {
			text += ":" + *b.Text
		}
		got = append(got, text)
	}
	want := []string{"text:" + note, "image", "text: /config model=haiku"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("blocks %q, want %q", got, want)
	}
}
