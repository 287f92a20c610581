package mcp

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"brainbot/toolspec"
)

// publishedSchema is one tool's input schema as tools/list sends it.
type publishedSchema struct {
	Properties map[string]struct {
		Description string   `json:"description"`
		Enum        []string `json:"enum"`
		Minimum     *float64 `json:"minimum"`
		Maximum     *float64 `json:"maximum"`
	} `json:"properties"`
	Required []string `json:"required"`
}

func listSchema(t *testing.T, tool server.ServerTool) publishedSchema {
	t.Helper()
	c := startTool(t, tool)
	name := tool.Tool.Name
	res, err := c.ListTools(context.Background(), mcpgo.ListToolsRequest{})
	if err != nil || len(res.Tools) != 1 || res.Tools[0].Name != name {
		t.Fatalf("tools/list = %+v, %v; want %s", res, err, name)
	}
	data, err := json.Marshal(res.Tools[0].InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	var s publishedSchema
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// The tools publish exactly toolspec's catalogues: a voice, model or format
// a brain may choose is one the tool offers, and it offers no other. A list
// edited in one place and not the other fails here.
func TestSchemasPublishToolspecCatalogues(t *testing.T) {
	f := newFixture(t)
	speech := listSchema(t, ttsTool(f.cfg))
	for prop, want := range map[string][]string{
		"voice":  toolspec.Voices(),
		"model":  toolspec.SpeechModels(),
		"format": toolspec.SpeechFormats(),
	} {
		if got := speech.Properties[prop].Enum; !slices.Equal(got, want) {
			t.Errorf("text_to_speech %s enum %q, toolspec says %q", prop, got, want)
		}
	}
	if p := speech.Properties["speed"]; p.Minimum == nil || *p.Minimum != toolspec.MinSpeed || p.Maximum == nil || *p.Maximum != toolspec.MaxSpeed {
		t.Errorf("text_to_speech speed range %+v, toolspec says %g-%g", p, toolspec.MinSpeed, toolspec.MaxSpeed)
	}
	if !strings.Contains(speech.Properties["voice"].Description, "default "+toolspec.DefaultVoice) {
		t.Errorf("voice description %q does not name the default %s", speech.Properties["voice"].Description, toolspec.DefaultVoice)
	}

	image := listSchema(t, imageTool(f.cfg))
	if got := image.Properties["model"].Enum; !slices.Equal(got, toolspec.ImageModelNames()) {
		t.Errorf("generate_image model enum %q, toolspec says %q", got, toolspec.ImageModelNames())
	}
	for _, m := range toolspec.ImageModels() {
		for prop, options := range map[string][]string{"size": m.Sizes, "quality": m.Qualities, "style": m.Styles} {
			desc := image.Properties[prop].Description
			if len(options) > 0 && !strings.Contains(desc, m.Name+": "+strings.Join(options, ", ")) {
				t.Errorf("generate_image %s description %q does not list %s's %q", prop, desc, m.Name, options)
			}
		}
	}
	for _, s := range []publishedSchema{speech, image} {
		for _, req := range s.Required {
			if _, ok := s.Properties[req]; !ok {
				t.Errorf("required %q is not a property", req)
			}
		}
	}
}

// What a client leaves out is toolspec's default, the brains' default too.
func TestToolDefaultsAreToolspecs(t *testing.T) {
	f := newFixture(t)
	var sr toolspec.SpeechResult
	success(t, call(t, startTool(t, ttsTool(f.cfg)), toolspec.SpeechToolName, map[string]any{"text": "Hi."}), &sr)
	var ir toolspec.ImageResult
	success(t, call(t, startTool(t, imageTool(f.cfg)), toolspec.ImageToolName, map[string]any{"prompt": "a cat"}), &ir)
	reqs := f.oa.Requests()
	dallE2, _ := toolspec.LookupImageModel(toolspec.DefaultImageModel)
	if len(reqs) != 2 || reqs[0].Voice != toolspec.DefaultVoice || reqs[0].Model != toolspec.DefaultSpeechModel ||
		reqs[0].Speed != toolspec.DefaultSpeed || reqs[0].Format != toolspec.DefaultFormat ||
		reqs[1].Model != toolspec.DefaultImageModel || reqs[1].Size != dallE2.DefaultSize {
		t.Errorf("OpenAI saw %+v; want toolspec's defaults", reqs)
	}
}
