// Package probe starts a brain's own MCP servers as the Claude CLI would
// and lists their tools: what `brainbot check -connect` reports, so a bot
// author learns that a server does not start, or does not offer a tool
// the brain allows, before a user does.
package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"brainbot/bot/brain"
	"brainbot/mcp/launch"
)

// Timeout bounds starting one server and listing its tools.
const Timeout = 30 * time.Second

// maxStderr bounds the end of a failed server's stderr quoted in its
// error.
const maxStderr = 1 << 10

// Server is what connecting to one server found.
type Server struct {
	Name string
	// Tools are the names of its tools, sorted; Err says why there are
	// none to be had.
	Tools []string
	Err   error
}

// Connect starts or reaches every server (by name, sorted) and lists its
// tools. servers must be resolved (brain.ResolveMCPServers). A stdio
// server is started as the CLI starts it for brainbot: through launcher,
// brainbot's executable (package launch), with environ, the environment
// the CLI would give it, and its own env; an http server is sent its
// headers.
func Connect(ctx context.Context, servers map[string]brain.MCPServer, environ []string, launcher string) []Server {
	var found []Server
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		s := servers[name]
		if s.Type != brain.ServerHTTP {
			s.Command, s.Args = launcher, launch.Args(s.Command, s.Args, s.Env)
		}
		tools, err := listTools(ctx, s, environ)
		found = append(found, Server{Name: name, Tools: tools, Err: err})
	}
	return found
}

// Offers reports whether an entry of tools.allow (mcp__<server>, or
// mcp__<server>__<tool>) names a tool some server offers.
func Offers(found []Server, server, tool string) bool {
	for _, s := range found {
		if s.Name == server && s.Err == nil && (tool == "" && len(s.Tools) > 0 || slices.Contains(s.Tools, tool)) {
			return true
		}
	}
	return false
}

func listTools(ctx context.Context, s brain.MCPServer, environ []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	// A stdio server's stderr goes to a file, which explains a failure
	// best. The server writes it itself: the transport's own copy of a
	// stderr pipe loses what a server wrote just before it exited.
	stderr, err := os.CreateTemp("", "brainbot-mcp-stderr-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(stderr.Name())
	defer stderr.Close()
	c, err := newClient(s, environ, stderr)
	if err != nil {
		return nil, err
	}
	tools, err := initAndList(ctx, c)
	c.Close()
	if err != nil {
		if out, _ := os.ReadFile(stderr.Name()); len(bytes.TrimSpace(out)) > 0 {
			out = bytes.TrimSpace(out)
			err = fmt.Errorf("%w; its stderr: %s", err, out[len(out)-min(len(out), maxStderr):])
		}
	}
	return tools, err
}

// newClient makes the client of one server; a stdio server writes its
// stderr to the file stderr. The transport's Close waits for the server to
// exit, so once it returns, the file holds all the server wrote.
func newClient(s brain.MCPServer, environ []string, stderr *os.File) (*client.Client, error) {
	if s.Type == brain.ServerHTTP {
		t, err := transport.NewStreamableHTTP(s.URL, transport.WithHTTPHeaders(s.Headers))
		if err != nil {
			return nil, err
		}
		return client.NewClient(t), nil
	}
	env := slices.Clone(environ)
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	t := transport.NewStdioWithOptions(s.Command, nil, s.Args,
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			path, err := launch.LookPath(command, env)
			if err != nil {
				return nil, err
			}
			cmd := exec.CommandContext(ctx, path, args...)
			cmd.Env, cmd.Stderr = env, stderr
			return cmd, nil
		}))
	return client.NewClient(t), nil
}

func initAndList(ctx context.Context, c *client.Client) ([]string, error) {
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("did not start: %w", err)
	}
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "brainbot-check", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return nil, fmt.Errorf("did not answer initialize: %w", cause(ctx, err))
	}
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("did not list its tools: %w", cause(ctx, err))
	}
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names, nil
}

// cause names a timeout plainly.
func cause(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %v", Timeout)
	}
	return err
}
