package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	"brainbot/output"
	"brainbot/toolspec"
)

// MaxImageBytes caps an image, decoded or downloaded.
const MaxImageBytes = 20 << 20

// NewImageServer is the "image-gen" MCP server with the generate_image tool.
func NewImageServer(cfg Config) *server.MCPServer {
	return newServer(toolspec.ImageServer, imageTool(cfg))
}

func imageTool(cfg Config) server.ServerTool {
	return server.ServerTool{Tool: imageToolSchema(), Handler: newImageGen(cfg).handle}
}

func newImageGen(cfg Config) *imageGen {
	return &imageGen{cfg: cfg.withDefaults(), client: openai.NewClientWithConfig(cfg.OpenAI)}
}

// imageToolSchema is generate_image as MCP clients see it; its lists and
// defaults are toolspec's.
func imageToolSchema() mcpgo.Tool {
	var sizes, qualities, styles []string
	for _, m := range toolspec.ImageModels() {
		sizes = append(sizes, fmt.Sprintf("%s: %s (default %s)", m.Name, strings.Join(m.Sizes, ", "), m.DefaultSize))
		if len(m.Qualities) > 0 {
			qualities = append(qualities, m.Name+": "+strings.Join(m.Qualities, ", "))
		}
		if len(m.Styles) > 0 {
			styles = append(styles, m.Name+": "+strings.Join(m.Styles, ", "))
		}
	}
	return mcpgo.NewTool(toolspec.ImageToolName,
		mcpgo.WithDescription("Generate an image with OpenAI and save it as a PNG file. Returns JSON with image_path."),
		mcpgo.WithString("prompt", mcpgo.Required(), mcpgo.Description("What the image shows.")),
		mcpgo.WithString("model", mcpgo.Description(fmt.Sprintf("Image model (default %s).", toolspec.DefaultImageModel)),
			mcpgo.Enum(toolspec.ImageModelNames()...)),
		mcpgo.WithString("size", mcpgo.Description(strings.Join(sizes, "; ")+
			". The dall-e-2 default is 256x256, as for brains; this tool defaulted to 1024x1024 before 2026-11.")),
		mcpgo.WithString("quality", mcpgo.Description(strings.Join(qualities, "; ")+". Ignored by other models.")),
		mcpgo.WithString("style", mcpgo.Description(strings.Join(styles, "; ")+". Ignored by other models.")),
		mcpgo.WithString("filename", mcpgo.Description("File name prefix; the tool appends -<unix ms>"+toolspec.ImageExt+".")),
		mcpgo.WithBoolean("include_base64", mcpgo.Description("Also return the image as base64 (default false).")),
	)
}

type imageGen struct {
	cfg    Config
	client *openai.Client
}

func (g *imageGen) handle(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	args, problem := imageArgsOf(req)
	if problem != "" {
		return mcpgo.NewToolResultError(problem), nil
	}
	return g.create(ctx, g.cfg.Log, args), nil
}

// imageArgsOf reads and checks the arguments a client chose, filling in
// toolspec's defaults; problem says what is wrong with them. Options the
// model does not have are dropped rather than refused: they come from a
// brain written for another model.
func imageArgsOf(req mcpgo.CallToolRequest) (args toolspec.ImageArgs, problem string) {
	prompt, err := req.RequireString("prompt")
	if err != nil || strings.TrimSpace(prompt) == "" {
		return args, "prompt is required and must not be empty"
	}
	name := req.GetString("model", toolspec.DefaultImageModel)
	model, ok := toolspec.LookupImageModel(name)
	if !ok {
		return args, fmt.Sprintf("unknown model %q (one of %s)", name, strings.Join(toolspec.ImageModelNames(), ", "))
	}
	args = toolspec.ImageArgs{
		Prompt:        prompt,
		ImageSettings: toolspec.ImageSettings{Model: name, Size: req.GetString("size", model.DefaultSize)},
		Filename:      req.GetString("filename", ""),
		IncludeBase64: req.GetBool("include_base64", false),
	}
	if !slices.Contains(model.Sizes, args.Size) {
		return args, fmt.Sprintf("size %q not supported by %s (one of %s)", args.Size, name, strings.Join(model.Sizes, ", "))
	}
	if q := req.GetString("quality", ""); q != "" && len(model.Qualities) > 0 {
		if !slices.Contains(model.Qualities, q) {
			return args, fmt.Sprintf("quality %q not supported by %s (one of %s)", q, name, strings.Join(model.Qualities, ", "))
		}
		args.Quality = q
	}
	if st := req.GetString("style", ""); st != "" && len(model.Styles) > 0 {
		if !slices.Contains(model.Styles, st) {
			return args, fmt.Sprintf("style %q not supported by %s (one of %s)", st, name, strings.Join(model.Styles, ", "))
		}
		args.Style = st
	}
	return args, ""
}

// create draws args.Prompt with args' settings, saves the image under
// args.Filename and answers the tool's result; it logs to log.
func (g *imageGen) create(ctx context.Context, log *zap.Logger, args toolspec.ImageArgs) *mcpgo.CallToolResult {
	apiReq := openai.ImageRequest{Prompt: args.Prompt, Model: args.Model, Size: args.Size, N: 1,
		Quality: args.Quality, Style: args.Style}
	// gpt-image models always answer b64_json and reject response_format;
	// the others answer a URL unless asked for b64_json.
	if !strings.HasPrefix(args.Model, "gpt-image") {
		apiReq.ResponseFormat = openai.CreateImageResponseFormatB64JSON
	}
	log = log.With(zap.String("tool", toolspec.ImageToolName), zap.String("model", args.Model), zap.String("size", args.Size))
	log.Debug("image requested", zap.String("prompt", args.Prompt))

	img, revised, err := g.generate(ctx, apiReq)
	if err != nil {
		reason := openAIFailure(err, g.cfg.Timeout)
		log.Warn("image failed", zap.String("reason", reason))
		return mcpgo.NewToolResultError(reason)
	}
	path, err := output.Save(filepath.Join(g.cfg.DataDir, output.Image.Dir()), args.Filename, toolspec.ImageExt, img, g.cfg.Now())
	if err != nil {
		log.Error("saving image failed", zap.Error(err))
		return mcpgo.NewToolResultError("saving the image failed: " + err.Error())
	}
	res := toolspec.ImageResult{Success: true, ImagePath: path, RevisedPrompt: revised, Bytes: len(img), Model: args.Model, Size: args.Size}
	if args.IncludeBase64 {
		res.Base64 = base64.StdEncoding.EncodeToString(img)
	}
	log.Info("image saved", zap.String("path", path), zap.Int("bytes", len(img)))
	return jsonResult(res)
}

// generate makes the image call and fetches the image, within one deadline.
func (g *imageGen) generate(ctx context.Context, req openai.ImageRequest) (img []byte, revised string, err error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	resp, err := g.client.CreateImage(ctx, req)
	if err != nil {
		return nil, "", err
	}
	if len(resp.Data) == 0 {
		return nil, "", errors.New("no image in the answer")
	}
	item := resp.Data[0]
	switch {
	case item.B64JSON != "":
		if base64.StdEncoding.DecodedLen(len(item.B64JSON)) > MaxImageBytes {
			return nil, "", fmt.Errorf("image larger than %d bytes", MaxImageBytes)
		}
		img, err = base64.StdEncoding.DecodeString(item.B64JSON)
		if err != nil {
			return nil, "", fmt.Errorf("bad b64_json: %w", err)
		}
	case item.URL != "":
		img, err = g.download(ctx, item.URL)
		if err != nil {
			return nil, "", err
		}
	default:
		return nil, "", errors.New("answer has neither b64_json nor url")
	}
	if _, err := png.DecodeConfig(bytes.NewReader(img)); err != nil {
		return nil, "", fmt.Errorf("answer is not a PNG image: %w", err)
	}
	return img, item.RevisedPrompt, nil
}

// download fetches an image URL OpenAI answered, at most MaxImageBytes.
func (g *imageGen) download(ctx context.Context, rawURL string) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("image url %q is not http(s)", rawURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := g.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("image download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("image download: %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "image/") && ct != "application/octet-stream" {
		return nil, fmt.Errorf("image download: content type %q", ct)
	}
	if resp.ContentLength > MaxImageBytes {
		return nil, fmt.Errorf("image download: %d bytes, more than %d", resp.ContentLength, MaxImageBytes)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxImageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("image download: %w", err)
	}
	if len(b) > MaxImageBytes {
		return nil, fmt.Errorf("image download: more than %d bytes", MaxImageBytes)
	}
	return b, nil
}
