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
)

// MaxImageBytes caps an image, decoded or downloaded.
const MaxImageBytes = 20 << 20

// imageModel is what a model accepts.
type imageModel struct {
	sizes     []string
	qualities []string // empty: the parameter is not sent
	styles    []string // empty: the parameter is not sent
	// base64Only models always answer b64_json and reject response_format.
	base64Only bool
}

var imageModels = map[string]imageModel{
	openai.CreateImageModelDallE2: {sizes: []string{"256x256", "512x512", "1024x1024"}},
	openai.CreateImageModelDallE3: {sizes: []string{"1024x1024", "1792x1024", "1024x1792"},
		qualities: []string{"standard", "hd"}, styles: []string{"vivid", "natural"}},
	openai.CreateImageModelGptImage1: {sizes: []string{"1024x1024", "1536x1024", "1024x1536", "auto"},
		qualities: []string{"low", "medium", "high", "auto"}, base64Only: true},
}

type imageResult struct {
	Success       bool   `json:"success"`
	ImagePath     string `json:"image_path"`
	RevisedPrompt string `json:"revised_prompt"`
	Bytes         int    `json:"bytes"`
	Model         string `json:"model"`
	Size          string `json:"size"`
	Base64        string `json:"image_base64,omitempty"`
}

// NewImageServer is the "image-gen" MCP server with the generate_image tool.
func NewImageServer(cfg Config) *server.MCPServer {
	return newServer("image-gen", imageTool(cfg))
}

func imageTool(cfg Config) server.ServerTool {
	g := &imageGen{cfg: cfg.withDefaults(), client: openai.NewClientWithConfig(cfg.OpenAI)}
	tool := mcpgo.NewTool("generate_image",
		mcpgo.WithDescription("Generate an image with OpenAI and save it as a PNG file. Returns JSON with image_path."),
		mcpgo.WithString("prompt", mcpgo.Required(), mcpgo.Description("What the image shows.")),
		mcpgo.WithString("model", mcpgo.Description("dall-e-2 (default), dall-e-3 or gpt-image-1."),
			mcpgo.Enum(openai.CreateImageModelDallE2, openai.CreateImageModelDallE3, openai.CreateImageModelGptImage1)),
		mcpgo.WithString("size", mcpgo.Description("dall-e-2: 256x256, 512x512, 1024x1024; dall-e-3: 1024x1024, 1792x1024, 1024x1792; gpt-image-1: 1024x1024, 1536x1024, 1024x1536, auto. Default 1024x1024.")),
		mcpgo.WithString("quality", mcpgo.Description("dall-e-3: standard or hd; gpt-image-1: low, medium, high or auto. Ignored by dall-e-2.")),
		mcpgo.WithString("style", mcpgo.Description("dall-e-3 only: vivid or natural. Ignored by other models.")),
		mcpgo.WithString("filename", mcpgo.Description("File name prefix; the tool appends -<unix ms>.png.")),
		mcpgo.WithBoolean("include_base64", mcpgo.Description("Also return the image as base64 (default false).")),
	)
	return server.ServerTool{Tool: tool, Handler: g.handle}
}

type imageGen struct {
	cfg    Config
	client *openai.Client
}

func (g *imageGen) handle(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	prompt, err := req.RequireString("prompt")
	if err != nil || strings.TrimSpace(prompt) == "" {
		return mcpgo.NewToolResultError("prompt is required and must not be empty"), nil
	}
	modelName := req.GetString("model", openai.CreateImageModelDallE2)
	model, ok := imageModels[modelName]
	if !ok {
		return mcpgo.NewToolResultError(fmt.Sprintf("unknown model %q (dall-e-2, dall-e-3 or gpt-image-1)", modelName)), nil
	}
	size := req.GetString("size", openai.CreateImageSize1024x1024)
	if !slices.Contains(model.sizes, size) {
		return mcpgo.NewToolResultError(fmt.Sprintf("size %q not supported by %s (one of %s)", size, modelName, strings.Join(model.sizes, ", "))), nil
	}
	apiReq := openai.ImageRequest{Prompt: prompt, Model: modelName, Size: size, N: 1}
	// Options a model does not have are dropped rather than refused: they
	// come from a brain written for another model.
	if q := req.GetString("quality", ""); q != "" && len(model.qualities) > 0 {
		if !slices.Contains(model.qualities, q) {
			return mcpgo.NewToolResultError(fmt.Sprintf("quality %q not supported by %s (one of %s)", q, modelName, strings.Join(model.qualities, ", "))), nil
		}
		apiReq.Quality = q
	}
	if st := req.GetString("style", ""); st != "" && len(model.styles) > 0 {
		if !slices.Contains(model.styles, st) {
			return mcpgo.NewToolResultError(fmt.Sprintf("style %q not supported by %s (one of %s)", st, modelName, strings.Join(model.styles, ", "))), nil
		}
		apiReq.Style = st
	}
	if !model.base64Only {
		apiReq.ResponseFormat = openai.CreateImageResponseFormatB64JSON
	}
	log := g.cfg.Log.With(zap.String("tool", "generate_image"), zap.String("model", modelName), zap.String("size", size))
	log.Debug("image requested", zap.String("prompt", prompt))

	img, revised, err := g.generate(ctx, apiReq)
	if err != nil {
		reason := openAIFailure(err, g.cfg.Timeout)
		log.Warn("image failed", zap.String("reason", reason))
		return mcpgo.NewToolResultError(reason), nil
	}
	path, err := output.Save(filepath.Join(g.cfg.DataDir, output.Image.Dir()), req.GetString("filename", ""), ".png", img, g.cfg.Now())
	if err != nil {
		log.Error("saving image failed", zap.Error(err))
		return mcpgo.NewToolResultError("saving the image failed: " + err.Error()), nil
	}
	res := imageResult{Success: true, ImagePath: path, RevisedPrompt: revised, Bytes: len(img), Model: modelName, Size: size}
	if req.GetBool("include_base64", false) {
		res.Base64 = base64.StdEncoding.EncodeToString(img)
	}
	log.Info("image saved", zap.String("path", path), zap.Int("bytes", len(img)))
	return jsonResult(res), nil
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
