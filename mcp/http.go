package mcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/zap"

	"brainbot/ticket"
	"brainbot/toolspec"
)

// NotAskedFor is the error result of a tool call the bot did not ask for.
const NotAskedFor = "this tool is only used when the bot asks for it"

// HTTPServer serves the tools from the brainbot process to the Claude CLI
// processes it starts, over MCP streamable HTTP: the "tts" server at
// URL+toolspec.ServerPath("tts"), "image-gen" and "brainbot" (the
// question tool) likewise. A request must carry the bearer token of a
// running CLI process (ticket.Registry); a file tool's call is served only
// against that process's ticket, with the ticket's settings and file
// name, the model supplying only the text to speak or the image prompt.
// Any other call gets NotAskedFor, is logged at warn to the request the
// process works for, and never reaches OpenAI. A question is accepted
// once per request that allows it (see question.go). The memory tools
// ("brainbot-memory") read and write only the notes of the request's
// user with its bot, as the request gave them (see memory.go).
type HTTPServer struct {
	// URL is the base URL, http://127.0.0.1:<port>.
	URL  string
	srv  *http.Server
	gate *gate
}

// UseNotes makes n keep the memory tools' notes: the process's backend,
// opened after the server (a cluster's backend needs the driver, which
// needs the server's URL). Until then the memory tools refuse every call.
func (s *HTTPServer) UseNotes(n Notebook) { s.gate.notes.Store(&n) }

// readHeaderTimeout bounds a request's headers. A tool call's answer may
// take minutes (long speech), so there is no write timeout: the CLI's
// request ends with the CLI, and the driver bounds the CLI.
const readHeaderTimeout = 10 * time.Second

// ListenHTTP serves the tools on addr (use "127.0.0.1:0" for a free
// loopback port) until Shutdown.
func ListenHTTP(cfg Config, tickets *ticket.Registry, addr string) (*HTTPServer, error) {
	cfg = cfg.withDefaults()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mcp: listen: %w", err)
	}
	errLog, err := zap.NewStdLogAt(cfg.Log.Named("mcp-go"), zap.WarnLevel)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("mcp: %w", err)
	}
	g := &gate{tickets: tickets, log: cfg.Log, tts: newTTS(cfg), img: newImageGen(cfg), now: cfg.Now}
	mux := http.NewServeMux()
	for name, tools := range map[string][]server.ServerTool{
		toolspec.SpeechServer:   {{Tool: speechToolSchema(), Handler: g.speech}},
		toolspec.ImageServer:    {{Tool: imageToolSchema(), Handler: g.image}},
		toolspec.QuestionServer: {{Tool: questionToolSchema(), Handler: g.question}},
		toolspec.MemoryServer:   append(memoryTools(g), scheduleTools(g)...),
	} {
		h := server.NewStreamableHTTPServer(newServer(name, tools...),
			// Each POST stands alone: the token, not an MCP session,
			// says who calls.
			server.WithStateLess(true),
			server.WithHTTPContextFunc(withToken),
			server.WithStreamableHTTPLogger(slog.New(slog.NewTextHandler(errLog.Writer(), &slog.HandlerOptions{Level: slog.LevelWarn}))),
		)
		mux.Handle(toolspec.ServerPath(name), g.authenticate(h))
	}
	s := &HTTPServer{
		URL:  "http://" + ln.Addr().String(),
		gate: g,
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout, ErrorLog: errLog},
	}
	go func() {
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			cfg.Log.Error("MCP tool server stopped", zap.Error(err))
		}
	}()
	return s, nil
}

// Shutdown stops accepting calls and waits, until ctx ends, for those in
// flight; then it closes what is left.
func (s *HTTPServer) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	return err
}

// gate authorises every call against the tickets and runs the tool.
type gate struct {
	tickets *ticket.Registry
	log     *zap.Logger
	tts     *tts
	img     *imageGen
	// notes keeps the memory tools' notes (UseNotes); nil: their calls
	// are refused.
	notes atomic.Pointer[Notebook]
	// schedule keeps the schedule tools' reminders and zones
	// (UseSchedule); nil: their calls are refused.
	schedule atomic.Pointer[Schedule]
	now      func() time.Time
}

type tokenKey struct{}

// withToken puts the request's bearer token into the context the tool
// handlers get.
func withToken(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, tokenKey{}, bearer(r))
}

func bearer(r *http.Request) string {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return token
}

// authenticate answers 401 to a request without the token of a running
// CLI process: nothing else may even list the tools.
func (g *gate) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.tickets.Known(bearer(r)) {
			g.log.Warn("MCP request without a known token refused", zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr))
			http.Error(w, "unknown token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// claim takes the caller's ticket for tool. It reports false, after
// logging why, when the bot did not ask for this call.
func (g *gate) claim(ctx context.Context, tool string, req mcpgo.CallToolRequest) (ticket.Ticket, *zap.Logger, bool) {
	token, _ := ctx.Value(tokenKey{}).(string)
	t, log, err := g.tickets.Claim(token, tool, req.GetString("filename", ""))
	log = cmp.Or(log, g.log)
	if err != nil {
		log.Warn("tool call refused", zap.String("tool", tool), zap.Error(err))
		return t, log, false
	}
	return t, log, true
}

// speech serves text_to_speech with the ticket's voice, speed, model,
// format and file name; only the text is the model's.
func (g *gate) speech(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	t, log, ok := g.claim(ctx, toolspec.SpeechTool, req)
	if !ok {
		return mcpgo.NewToolResultError(NotAskedFor), nil
	}
	args := toolspec.SpeechArgs{SpeechSettings: t.Speech, Filename: t.Prefix}
	if u := t.Utterance; u != nil {
		// Spoken while the model wrote the answer: waits for the rest.
		return g.tts.deliver(ctx, log, args, u.Audio, u.Spoken), nil
	}
	args.Text = req.GetString("text", "")
	if strings.TrimSpace(args.Text) == "" {
		return mcpgo.NewToolResultError("text is required and must not be empty"), nil
	}
	return g.tts.speak(ctx, log, args), nil
}

// image serves generate_image with the ticket's model, size, quality,
// style and file name; only the prompt is the model's.
func (g *gate) image(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	t, log, ok := g.claim(ctx, toolspec.ImageTool, req)
	if !ok {
		return mcpgo.NewToolResultError(NotAskedFor), nil
	}
	prompt := req.GetString("prompt", "")
	if strings.TrimSpace(prompt) == "" {
		return mcpgo.NewToolResultError("prompt is required and must not be empty"), nil
	}
	return g.img.create(ctx, log, toolspec.ImageArgs{Prompt: prompt, ImageSettings: t.Image, Filename: t.Prefix}), nil
}
