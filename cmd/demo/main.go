// Command demo is `make demo`: an offline end-to-end run of brainbot that
// a newcomer can watch. It starts brainbot with the example brains against
// stand-ins for Telegram, the model and OpenAI — the Claude Code CLI and
// everything of ours between Telegram and OpenAI are real — sends a text, a
// voice and an image request as Telegram users would, then asks the example
// panel a question in a group, and prints what each bot answered. It exits
// 0 when all of it worked.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image"
	_ "image/png" // decode the image reply to print its size
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"brainbot/bot/telegramtest"
	"brainbot/cmd/internal/stack"
	"brainbot/mcp/audio"
	"brainbot/output"
)

func main() {
	var o options
	flag.StringVar(&o.brainbot, "brainbot", "", "the brainbot executable (default: built from this repository into the run's folder)")
	flag.StringVar(&o.claudeCmd, "claude", os.Getenv("CLAUDE_CMD"), "the Claude Code CLI (default: $CLAUDE_CMD, else the pinned one `make claude-cli` installs under .cache/)")
	flag.StringVar(&o.brains, "brains", "", "folder of the example brains (default: brains/ of this repository)")
	flag.StringVar(&o.panels, "panels", "", "folder of the example panels (default: panels/ of this repository)")
	flag.BoolVar(&o.keep, "keep", false, "keep the run's folder (brains, data, logs) and print where it is")
	flag.BoolVar(&o.verbose, "v", false, "also print brainbot's logs")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, o); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

// options are the command line; empty paths are found in the repository.
type options struct {
	brainbot, claudeCmd, brains, panels string
	keep, verbose                       bool
}

// exchange is one message of the demo and how to judge its answer.
type exchange struct {
	bot, says string
	user      int64
	// want names what a working bot answers with.
	want string
}

var script = []exchange{
	{bot: "narrator", user: 1001, says: "Tell me a story about a lighthouse.", want: "sendMessage"},
	{bot: "narrator", user: 1001, says: "And what happened next?", want: "sendMessage"},
	{bot: "voice", user: 1002, says: "Good morning! How are you?", want: "sendVoice"},
	{bot: "painter", user: 1003, says: "Please draw a lighthouse at dusk.", want: "sendPhoto"},
	{bot: "painter", user: 1003, says: "What colours suit a seascape?", want: "sendMessage"},
}

func run(ctx context.Context, out io.Writer, o options) error {
	dir, err := os.MkdirTemp("", "brainbot-demo-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintf(out, "run folder: %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if err := o.complete(ctx, out, dir); err != nil {
		return err
	}
	brains, err := readYAML(o.brains)
	if err != nil {
		return err
	}
	panels, err := readYAML(o.panels)
	if err != nil {
		return err
	}
	cfg := stack.Config{Brainbot: o.brainbot, ClaudeCmd: o.claudeCmd, Dir: dir, Brains: brains, Panels: panels}
	if o.verbose {
		cfg.Logs = os.Stderr
	}
	s, err := stack.New(cfg)
	if err != nil {
		return err
	}
	defer s.Close()

	fmt.Fprintf(out, "brainbot demo: %d example brains from %s, stand-in Telegram/model/OpenAI, real Claude Code CLI\n\n", len(brains), o.brains)
	start := time.Now()
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.Start(startCtx); err != nil {
		return err
	}
	fmt.Fprintf(out, "brainbot started; every bot polling Telegram after %v\n\n", time.Since(start).Round(time.Millisecond))

	failed := 0
	for _, ex := range script {
		fmt.Fprintf(out, "user %d → %s: %s\n", ex.user, ex.bot, ex.says)
		askCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		reply, err := s.Ask(askCtx, ex.bot, ex.user, ex.says)
		cancel()
		if err != nil {
			return err
		}
		ok := answered(ex, reply)
		if !ok {
			failed++
		}
		for _, c := range reply.Calls {
			fmt.Fprintf(out, "  %s ← %s\n", ex.bot, describe(s, ex, c.Method, c.Files, stack.Rendered(c)))
		}
		fmt.Fprintf(out, "  %s in %v (CLI start %s, turn 1 %s, turn 2 %s, telegram %s)\n\n", verdict(ok, ex.want),
			reply.Elapsed.Round(time.Millisecond), ms(reply.Summary, "claude_startup_ms"), ms(reply.Summary, "turn1_ms"),
			ms(reply.Summary, "turn2_ms"), ms(reply.Summary, "send_ms"))
	}
	ok, err := askPanel(ctx, out, s)
	if err != nil {
		return err
	}
	if !ok {
		failed++
	}
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if code, err := s.Stop(stopCtx, syscall.SIGTERM); err != nil || code != 0 {
		return fmt.Errorf("brainbot did not stop cleanly on SIGTERM: exit %d, %v", code, err)
	}
	fmt.Fprintf(out, "brainbot stopped on SIGTERM. Total %v.\n", time.Since(start).Round(time.Millisecond))
	if failed > 0 {
		return fmt.Errorf("%d of %d exchanges did not get the answer they should", failed, len(script)+1)
	}
	fmt.Fprintln(out, "All exchanges answered as they should.")
	return nil
}

// readYAML reads the example files of a folder (brains, which name their
// tokens <ID>_TOKEN, set by the stack; or panels), by file name.
func readYAML(dir string) (map[string]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("no .yaml files in %s: %v", dir, err)
	}
	files := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		files[filepath.Base(p)] = string(b)
	}
	return files, nil
}

func describe(s *stack.Stack, ex exchange, method string, files map[string]telegramtest.File, text string) string {
	switch method {
	case "sendVoice":
		f := files["voice"]
		d, err := voiceDuration(f.Data)
		length := d.Round(100 * time.Millisecond).String()
		if err != nil {
			length = "unknown length: " + err.Error()
		}
		return fmt.Sprintf("voice note %s (%d bytes, %s), organised as %s", f.Name, len(f.Data), length,
			organised(s, "audio-output", ex.bot, ex.user))
	case "sendPhoto", "sendDocument":
		f := files["photo"]
		if method == "sendDocument" {
			f = files["document"]
		}
		size := "not an image"
		if cfg, _, err := image.DecodeConfig(bytes.NewReader(f.Data)); err == nil {
			size = fmt.Sprintf("%dx%d", cfg.Width, cfg.Height)
		}
		return fmt.Sprintf("image %s (%d bytes, %s), organised as %s", f.Name, len(f.Data), size,
			organised(s, "image-output", ex.bot, ex.user))
	}
	return fmt.Sprintf("%q", text)
}

// voiceDuration measures an OGG/Opus or MP3 voice note.
func voiceDuration(b []byte) (time.Duration, error) {
	if bytes.HasPrefix(b, []byte("OggS")) {
		return audio.OggOpusDuration(b)
	}
	return audio.MP3Duration(b)
}

// organised returns the newest organised file of a bot's user, and says
// whether its sidecar is beside it.
func organised(s *stack.Stack, kind, bot string, user int64) string {
	dir := filepath.Join(s.DataDir, kind, "bot-"+bot, fmt.Sprintf("user-%d", user))
	entries, _ := os.ReadDir(dir)
	for _, e := range slices.Backward(entries) {
		if strings.HasSuffix(e.Name(), output.SidecarExt) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		rel, _ := filepath.Rel(s.DataDir, path)
		if _, err := os.Stat(output.SidecarPath(path)); err == nil {
			return "$BRAINBOT_DATA/" + rel + " (with its " + output.SidecarExt + " sidecar)"
		}
		return "$BRAINBOT_DATA/" + rel
	}
	return "(nothing in " + dir + ")"
}

// answered says whether the bot answered as a working one does: one reply
// of the kind wanted, and a request that went well. A bot that fails
// still answers, with its brain's error text: that is no success.
func answered(ex exchange, reply stack.Reply) bool {
	return reply.Summary.Str("outcome") == "ok" && len(reply.Calls) == 1 && reply.Calls[0].Method == ex.want
}

func verdict(ok bool, want string) string {
	if ok {
		return "ok: answered with " + strings.TrimPrefix(want, "send")
	}
	return "FAILED: wanted one " + want + " from a request that went well"
}

// ms formats a duration field of the summary line; "-" for a step that
// did not happen (turn 2 of a text reply).
func ms(l stack.Line, key string) string {
	if v := l.Float(key); v > 0 {
		return fmt.Sprintf("%.0fms", v)
	}
	return "-"
}
