package mcp

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/zap"

	"brainbot/ticket"
	"brainbot/toolspec"
)

const httpPrefix = "bot-speaker-user-7-1761837889351"

// httpFixture is the tool server as the driver's CLI processes meet it.
type httpFixture struct {
	*fixture
	tickets *ticket.Registry
	srv     *HTTPServer
}

func newHTTPFixture(t *testing.T) *httpFixture {
	t.Helper()
	f := &httpFixture{fixture: newFixture(t), tickets: ticket.NewRegistry()}
	srv, err := ListenHTTP(f.cfg, f.tickets, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	f.srv = srv
	return f
}

// connect is an MCP client of one server with token, as the Claude CLI
// connects with the headers of its --mcp-config.
func (f *httpFixture) connect(t *testing.T, server, token string) (*client.Client, error) {
	t.Helper()
	c, err := client.NewStreamableHttpClient(f.srv.URL+toolspec.ServerPath(server),
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var init mcpgo.InitializeRequest
	init.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcpgo.Implementation{Name: "test", Version: "1"}
	_, err = c.Initialize(ctx, init)
	return c, err
}

// process is a CLI process working for a request whose log lines carry
// request_id.
func (f *httpFixture) process(t *testing.T) *ticket.Process {
	p := f.tickets.Connect()
	t.Cleanup(p.Close)
	p.Serve(f.cfg.Log.With(zap.String("request_id", "req-1")))
	return p
}

func (f *httpFixture) refusals() int {
	return f.logs.FilterMessage("tool call refused").FilterField(zap.String("request_id", "req-1")).Len()
}

func TestHTTPUnknownTokenCannotConnect(t *testing.T) {
	f := newHTTPFixture(t)
	f.process(t) // a running process, whose token the caller does not have
	if _, err := f.connect(t, toolspec.SpeechServer, "forged-token"); err == nil {
		t.Fatal("a client with a forged token connected")
	}
	if len(f.oa.Requests()) != 0 {
		t.Error("OpenAI was called")
	}
}

// The calls the bot did not ask for: before turn two, a second call, a
// call with another file name, the other tool. Each gets NotAskedFor, a
// warn line naming the request, and no OpenAI call.
func TestHTTPServesOnlyTheTicketedCall(t *testing.T) {
	f := newHTTPFixture(t)
	p := f.process(t)
	tts, err := f.connect(t, toolspec.SpeechServer, p.Token())
	if err != nil {
		t.Fatal(err)
	}
	img, err := f.connect(t, toolspec.ImageServer, p.Token())
	if err != nil {
		t.Fatal(err)
	}
	// The model's own, costly choice in turn one.
	costly := map[string]any{"text": "Hello.", "voice": "onyx", "speed": 4.0, "model": "tts-1-hd", "format": "mp3", "filename": httpPrefix}
	if msg := failure(t, call(t, tts, toolspec.SpeechToolName, costly)); msg != NotAskedFor {
		t.Errorf("turn-one call: %q, want %q", msg, NotAskedFor)
	}

	p.Open(ticket.Ticket{Tool: toolspec.SpeechTool, Prefix: httpPrefix,
		Speech: toolspec.SpeechSettings{Voice: "nova", Speed: 1.25, Model: "tts-1", Format: "opus"}})
	wrongFile := map[string]any{"text": "Hello.", "filename": "turn1-own-choice"}
	if msg := failure(t, call(t, tts, toolspec.SpeechToolName, wrongFile)); msg != NotAskedFor {
		t.Errorf("call with another file name: %q", msg)
	}
	if msg := failure(t, call(t, img, toolspec.ImageToolName, map[string]any{"prompt": "a cat", "filename": httpPrefix})); msg != NotAskedFor {
		t.Errorf("call of the other tool: %q", msg)
	}
	if n := len(f.oa.Requests()); n != 0 || f.refusals() != 3 {
		t.Fatalf("before the asked-for call: %d OpenAI calls, %d refusals logged; want 0 and 3", n, f.refusals())
	}

	// The asked-for call is served with the brain's settings, whatever
	// the model passed.
	var res toolspec.SpeechResult
	success(t, call(t, tts, toolspec.SpeechToolName, costly), &res)
	reqs := f.oa.Requests()
	if len(reqs) != 1 || reqs[0].Voice != "nova" || reqs[0].Speed != 1.25 || reqs[0].Model != "tts-1" || reqs[0].Format != "opus" || reqs[0].Input != "Hello." {
		t.Fatalf("OpenAI saw %+v; want one call with the brain's settings", reqs)
	}
	dir := filepath.Join(f.cfg.DataDir, "audio-output")
	if want := filepath.Join(dir, httpPrefix+"-1761837902984.ogg"); res.AudioPath != want {
		t.Errorf("audio_path %s, want %s", res.AudioPath, want)
	}
	assertInside(t, dir, res.AudioPath)

	if msg := failure(t, call(t, tts, toolspec.SpeechToolName, costly)); msg != NotAskedFor {
		t.Errorf("second call: %q", msg)
	}
	if n := len(f.oa.Requests()); n != 1 || f.refusals() != 4 {
		t.Errorf("after a second call: %d OpenAI calls, %d refusals logged; want 1 and 4", n, f.refusals())
	}
}

func TestHTTPImageWithTheBrainsSettings(t *testing.T) {
	f := newHTTPFixture(t)
	p := f.process(t)
	img, err := f.connect(t, toolspec.ImageServer, p.Token())
	if err != nil {
		t.Fatal(err)
	}
	p.Open(ticket.Ticket{Tool: toolspec.ImageTool, Prefix: httpPrefix,
		Image: toolspec.ImageSettings{Model: "dall-e-2", Size: "256x256"}})
	var res toolspec.ImageResult
	success(t, call(t, img, toolspec.ImageToolName, map[string]any{
		"prompt": "a lighthouse", "model": "dall-e-3", "size": "1792x1024", "quality": "hd", "style": "vivid",
		"filename": httpPrefix, "include_base64": true,
	}), &res)
	reqs := f.oa.Requests()
	if len(reqs) != 1 || reqs[0].Model != "dall-e-2" || reqs[0].Size != "256x256" || reqs[0].Quality != "" || reqs[0].Style != "" || reqs[0].Prompt != "a lighthouse" {
		t.Fatalf("OpenAI saw %+v; want one dall-e-2 256x256 call", reqs)
	}
	if res.Base64 != "" || !strings.HasPrefix(filepath.Base(res.ImagePath), httpPrefix+"-") {
		t.Errorf("result %+v: want the ticket's file name and no base64", res)
	}
}

// The tools are listed as over stdio: same names, same schema.
func TestHTTPListsTheTools(t *testing.T) {
	f := newHTTPFixture(t)
	p := f.process(t)
	for server, tool := range map[string]string{toolspec.SpeechServer: toolspec.SpeechToolName, toolspec.ImageServer: toolspec.ImageToolName,
		toolspec.QuestionServer: toolspec.QuestionToolName} {
		c, err := f.connect(t, server, p.Token())
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.ListTools(context.Background(), mcpgo.ListToolsRequest{})
		if err != nil || len(res.Tools) != 1 || res.Tools[0].Name != tool {
			t.Errorf("%s tools/list = %+v, %v; want %s", server, res, err, tool)
		}
	}
}

// A question is accepted once, and only where the request allows one; a
// question the model can fix does not use up its leave; nothing reaches
// OpenAI.
func TestHTTPQuestion(t *testing.T) {
	f := newHTTPFixture(t)
	p := f.process(t)
	c, err := f.connect(t, toolspec.QuestionServer, p.Token())
	if err != nil {
		t.Fatal(err)
	}
	ask := map[string]any{"question": "Which city?", "options": []string{"Paris", "Rome"}}
	if msg := failure(t, call(t, c, toolspec.QuestionToolName, ask)); msg != NotAskedFor || f.refusals() != 1 {
		t.Errorf("a question the request does not allow: %q (%d refusals logged), want %q", msg, f.refusals(), NotAskedFor)
	}
	p.AllowQuestion()
	oneOption := map[string]any{"question": "Which city?", "options": []string{"Paris"}}
	if msg := failure(t, call(t, c, toolspec.QuestionToolName, oneOption)); !strings.Contains(msg, "1 options; give 2 to 8") {
		t.Errorf("one option: %q", msg)
	}
	if got := resultText(t, call(t, c, toolspec.QuestionToolName, ask)); got != toolspec.QuestionAsked {
		t.Errorf("the question: %q, want %q", got, toolspec.QuestionAsked)
	}
	if msg := failure(t, call(t, c, toolspec.QuestionToolName, ask)); msg != AskedAlready {
		t.Errorf("a second question: %q, want %q", msg, AskedAlready)
	}
	if n := len(f.oa.Requests()); n != 0 {
		t.Errorf("OpenAI was called %d times", n)
	}
}

// The ticket's MaxChars bounds what the asked-for call speaks of the
// model's text: the rest never reaches OpenAI.
func TestHTTPSpeechStopsAtTheTicketsBound(t *testing.T) {
	f := newHTTPFixture(t)
	p := f.process(t)
	tts, err := f.connect(t, toolspec.SpeechServer, p.Token())
	if err != nil {
		t.Fatal(err)
	}
	p.Open(ticket.Ticket{Tool: toolspec.SpeechTool, Prefix: httpPrefix, Speech: toolspec.SpeechSettings{Voice: "nova", Speed: 1, Model: "tts-1", Format: "mp3", MaxChars: 30}})
	var res toolspec.SpeechResult
	success(t, call(t, tts, toolspec.SpeechToolName, map[string]any{"text": "First things first. Then the rest, which is long.", "filename": httpPrefix}), &res)
	reqs := f.oa.Requests()
	if len(reqs) != 1 || reqs[0].Input != "First things first." || res.Characters != len("First things first.") {
		t.Fatalf("OpenAI saw %+v, the tool reported %d characters; want the first sentence only", reqs, res.Characters)
	}
}
