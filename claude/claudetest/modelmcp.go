package claudetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"brainbot/toolspec"
)

// Minimal file contents the stand-in MCP tools write: enough for a type
// sniffer (an MPEG audio frame header, the PNG signature), not real media.
var (
	standInMP3 = []byte{0xFF, 0xFB, 0x90, 0x64, 0x00, 0x00, 0x00, 0x00}
	standInPNG = []byte("\x89PNG\r\n\x1a\n")
)

// Environment of a stand-in MCP server process: its name and the folder its
// tools write into.
const (
	standInNameEnv = "CLAUDETEST_STANDIN_MCP"
	standInDirEnv  = "CLAUDETEST_STANDIN_MCP_DIR"
)

// StandInMCPConfig is an --mcp-config file naming the stand-in servers
// "tts" and "image-gen", each started as this test binary with helperArgs
// (e.g. "-test.run=^TestStandInMCPProcess$") and writing into dir. The
// named test must call RunStandInMCPIfRequested.
func StandInMCPConfig(dir string, helperArgs ...string) []byte {
	servers := map[string]any{}
	for _, name := range []string{toolspec.SpeechServer, toolspec.ImageServer} {
		servers[name] = map[string]any{
			"type": "stdio", "command": os.Args[0], "args": helperArgs,
			"env": map[string]string{standInNameEnv: name, standInDirEnv: dir},
		}
	}
	cfg, _ := json.Marshal(map[string]any{"mcpServers": servers}) // strings only: cannot fail
	return cfg
}

// RunStandInMCPIfRequested makes a test binary started by the CLI through
// StandInMCPConfig serve the stand-in MCP server on stdio and exit (the
// os/exec helper-process pattern); otherwise it returns at once.
func RunStandInMCPIfRequested() {
	name := os.Getenv(standInNameEnv)
	if name == "" {
		return
	}
	if err := ServeStandInMCP(context.Background(), name, os.Getenv(standInDirEnv), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ServeStandInMCP serves a stdio MCP server named like one of ours ("tts"
// with tool text_to_speech, "image-gen" with generate_image) on in and out
// until in ends. Its tools write <filename>-<unix ms>.mp3|.png into dir
// and answer our MCP servers' JSON ({"success":true,"audio_path":...} or
// {"success":true,"image_path":...}). It lets tests of the model and the
// driver run the real CLI's tool flow without the brainbot binary; a
// filename that would leave dir is refused with a tool error, as ours do.
func ServeStandInMCP(ctx context.Context, name, dir string, in io.Reader, out io.Writer) error {
	s := server.NewMCPServer("claudetest-"+name, "0.0.1", server.WithToolCapabilities(false))
	switch name {
	case toolspec.SpeechServer:
		s.AddTool(mcpgo.NewTool(toolspec.SpeechToolName,
			mcpgo.WithDescription("Convert text to speech and save it as an audio file."),
			mcpgo.WithString("text", mcpgo.Required()),
			mcpgo.WithString("voice"), mcpgo.WithNumber("speed"), mcpgo.WithString("model"),
			mcpgo.WithString("format"), mcpgo.WithString("filename"), mcpgo.WithBoolean("include_base64"),
		), standInHandler(dir, ".mp3", "audio_path", standInMP3))
	case toolspec.ImageServer:
		s.AddTool(mcpgo.NewTool(toolspec.ImageToolName,
			mcpgo.WithDescription("Generate an image and save it as a PNG file."),
			mcpgo.WithString("prompt", mcpgo.Required()),
			mcpgo.WithString("model"), mcpgo.WithString("size"), mcpgo.WithString("quality"),
			mcpgo.WithString("style"), mcpgo.WithString("filename"), mcpgo.WithBoolean("include_base64"),
		), standInHandler(dir, ".png", "image_path", standInPNG))
	default:
		return fmt.Errorf("claudetest: no stand-in MCP server named %q", name)
	}
	return server.NewStdioServer(s).Listen(ctx, in, out)
}

func standInHandler(dir, ext, pathKey string, content []byte) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		filename := req.GetString("filename", "file")
		if filename != filepath.Base(filename) || strings.HasPrefix(filename, ".") {
			return mcpgo.NewToolResultError("invalid filename " + filename), nil
		}
		path := filepath.Join(dir, fmt.Sprintf("%s-%d%s", filename, time.Now().UnixMilli(), ext))
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return mcpgo.NewToolResultError(err.Error()), nil
		}
		answer, err := json.Marshal(map[string]any{"success": true, pathKey: path})
		if err != nil {
			return nil, err
		}
		return mcpgo.NewToolResultText(string(answer)), nil
	}
}
