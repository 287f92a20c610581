package brain

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"brainbot/sysprompt"
	"brainbot/toolspec"
)

// The bot authors' reference and the example brains live in brains/ at the
// top of the module. These tests keep them true to this package.
const (
	examplesDir = "../../brains"
	readmePath  = examplesDir + "/README.md"
)

func readREADME(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// section returns the text under the "## title" heading of a Markdown
// document, up to the next heading of that level.
func section(t *testing.T, doc, title string) string {
	t.Helper()
	_, after, found := strings.Cut(doc, "\n## "+title+"\n")
	if !found {
		t.Fatalf("README has no section %q", title)
	}
	body, _, _ := strings.Cut(after, "\n## ")
	return body
}

func TestExampleBrains(t *testing.T) {
	brains, err := LoadDir(examplesDir)
	if err != nil {
		t.Fatalf("example brains are invalid:\n%v", err)
	}
	byID := make(map[string]*Brain)
	var ids []string
	for _, b := range brains {
		byID[b.ID] = b
		ids = append(ids, b.ID)
	}

	// The README lists them as: [`narrator.yaml`](narrator.yaml): id `narrator`, ...
	listed := regexp.MustCompile("\\[`([^`]+)`\\]\\([^)]+\\): id `([^`]+)`").
		FindAllStringSubmatch(section(t, readREADME(t), "Example brains"), -1)
	var readmeIDs []string
	for _, m := range listed {
		file, id := m[1], m[2]
		if fileID(file) != id {
			t.Errorf("README: %s is said to have id %q; its id is %q", file, id, fileID(file))
		}
		readmeIDs = append(readmeIDs, id)
	}
	slices.Sort(readmeIDs)
	if !slices.Equal(ids, readmeIDs) {
		t.Errorf("brains/ holds %q, README lists %q", ids, readmeIDs)
	}

	// One of each kind, as the README describes them.
	if b := byID["narrator"]; b == nil || b.TTS.Enabled || b.Image.Enabled {
		t.Errorf("narrator is not a text bot: %+v", b)
	}
	if b := byID["voice"]; b == nil || !b.TTS.Enabled || !b.TTS.UserToggle {
		t.Errorf("voice is not a voice bot with /voice: %+v", b)
	}
	if b := byID["painter"]; b == nil || !b.Image.Enabled || b.Image.Model != "dall-e-2" || b.Image.Size != "256x256" {
		t.Errorf("painter is not a dall-e-2 256x256 image bot: %+v", b)
	}
	for _, b := range brains {
		if b.Telegram.Token != "" || b.Telegram.TokenEnv == "" {
			t.Errorf("%s: examples must take their token from token_env", b.Path)
		}
	}
}

// TestREADMECompleteExample parses the README's complete example, so the
// example authors copy is valid.
func TestREADMECompleteExample(t *testing.T) {
	body := section(t, readREADME(t), "Complete example")
	_, rest, found := strings.Cut(body, "```yaml\n")
	example, _, closed := strings.Cut(rest, "```")
	if !found || !closed {
		t.Fatal("the Complete example section has no ```yaml block")
	}
	b, err := ParseBytes("narrator.yaml", []byte(example))
	if err != nil {
		t.Fatalf("the README's complete example is invalid:\n%v", err)
	}
	// It shows the defaults as values; parsing must agree with them.
	if b.Messages != defaultMessages {
		t.Errorf("README example messages %+v differ from the defaults %+v", b.Messages, defaultMessages)
	}
	if b.TTS.Voice != toolspec.DefaultVoice || b.TTS.Speed != toolspec.DefaultSpeed || b.TTS.Model != toolspec.DefaultSpeechModel ||
		b.TTS.Format != toolspec.DefaultFormat || b.Claude.Timeout.D() != defaultTimeout ||
		b.Image.Model != toolspec.DefaultImageModel || !slices.Equal(b.Image.Keywords, defaultKeywords) ||
		!b.TTS.ReplyToVoice || !b.STT.Enabled || b.STT.Model != toolspec.DefaultTranscriptionModel {
		t.Errorf("README example does not show the defaults: %+v", b)
	}
}

// TestREADMEDocumentsEveryField checks the reference names every field and
// every allowed value this package accepts.
func TestREADMEDocumentsEveryField(t *testing.T) {
	readme := readREADME(t)
	brainType := reflect.TypeFor[Brain]()
	index := yamlFields(brainType)
	for _, name := range fieldNames(brainType) {
		f := brainType.Field(index[name])
		if f.Type.Kind() != reflect.Struct || f.Type == reflect.TypeFor[Duration]() {
			requireMention(t, readme, "`"+name+"`")
			continue
		}
		for _, sub := range fieldNames(f.Type) {
			requireMention(t, readme, "`"+name+"."+sub+"`")
		}
	}
	for _, name := range fieldNames(reflect.TypeFor[MCPServer]()) {
		requireMention(t, readme, "`mcp_servers.<name>."+name+"`")
	}
	for _, v := range sysprompt.Names() {
		requireMention(t, readme, "`{{"+v+"}}`")
	}
	// The tools' catalogues (package toolspec), as the README lists them.
	lists := [][]string{toolspec.Voices(), toolspec.SpeechModels(), toolspec.SpeechFormats(), toolspec.ImageModelNames(),
		toolspec.TranscriptionModels()}
	for _, model := range toolspec.ImageModels() {
		lists = append(lists, model.Sizes)
		for _, options := range [][]string{model.Qualities, model.Styles} {
			if options != nil {
				lists = append(lists, options)
			}
		}
	}
	for _, list := range lists {
		requireMention(t, readme, strings.Join(list, ", "))
	}
	for _, msg := range []string{defaultMessages.Error, defaultMessages.Busy, defaultMessages.Denied,
		defaultMessages.Limit, defaultMessages.Reset, defaultMessages.Expired, defaultMessages.Unreadable,
		defaultMessages.Unsupported, defaultMessages.TextOnly, defaultMessages.TooBig, LimitPlaceholder, MaxPlaceholder} {
		requireMention(t, readme, msg)
	}
}

func requireMention(t *testing.T, readme, s string) {
	t.Helper()
	if !strings.Contains(readme, s) {
		t.Errorf("brains/README.md does not mention %s", s)
	}
}
