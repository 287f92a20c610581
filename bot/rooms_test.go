package bot

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// listed is what `go list -json` says of a package.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

// listModule lists every package of the module, as go list sees it.
func listModule(t *testing.T) []listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "brainbot/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
}

// importsAny reports whether p imports (directly) a path with one of the
// prefixes.
func importsAny(p listed, prefixes ...string) bool {
	return slices.ContainsFunc(p.Imports, func(imp string) bool {
		return slices.ContainsFunc(prefixes, func(prefix string) bool { return imp == prefix || strings.HasPrefix(imp, prefix+"/") })
	})
}

const (
	stateContract    = "brainbot/state"
	sqliteBackend    = "brainbot/state/sqlite"
	jetstreamBackend = "brainbot/state/jetstream"
	sqliteLib        = "modernc.org/sqlite"
	telegramLib      = "github.com/go-telegram/bot"
	natsLib          = "github.com/nats-io"
	claudePkg        = "brainbot/claude"
	transport        = "brainbot/bot/telegram"
)

// The rooms keep to themselves (docs/architecture.md): one transport
// speaks the Bot API and knows neither Claude nor NATS; no package but
// cmd's knows Claude together with Telegram's library or NATS; only the
// cluster's packages speak NATS; the conversation, the intake, the
// journal and the panels know neither the transport's library nor NATS;
// the shared words (message) are the standard library's alone; the
// CLI's protocol (claude/streamjson) starts no process, the package
// that runs it (claude/cliproc) does not speak it, and the pool of
// processes kept ready (claude/pool) knows no Request; and no
// package holds more than 15% of the production lines.
func TestRoomsKeepToThemselves(t *testing.T) {
	pkgs := listModule(t)
	lines := map[string]int{}
	total := 0
	for _, p := range pkgs {
		path := p.ImportPath
		if importsAny(p, telegramLib) && path != transport && !strings.HasPrefix(path, transport+"/") {
			t.Errorf("%s imports %s: only the transport (%s) may", path, telegramLib, transport)
		}
		if path == transport && importsAny(p, claudePkg, natsLib) {
			t.Errorf("the transport imports Claude or NATS: %v", p.Imports)
		}
		if !strings.HasPrefix(path, "brainbot/cmd/") && importsAny(p, claudePkg) && importsAny(p, telegramLib, natsLib) {
			t.Errorf("%s imports %s together with Telegram's library or NATS", path, claudePkg)
		}
		if importsAny(p, natsLib) && path != jetstreamBackend && !strings.HasPrefix(path, jetstreamBackend+"/") {
			t.Errorf("%s imports NATS: only the JetStream backend's packages may", path)
		}
		for _, room := range []string{"brainbot/bot/conversation", "brainbot/bot/intake", "brainbot/bot/panel/host"} {
			if path == room && importsAny(p, telegramLib, natsLib, transport) {
				t.Errorf("%s imports the transport or NATS: %v", path, p.Imports)
			}
		}
		// The tool side serves tools and knows no brain, nor anything of bot.
		if path == "brainbot/mcp" || strings.HasPrefix(path, "brainbot/mcp/") {
			for _, dep := range p.Deps {
				if dep == "brainbot/bot" || strings.HasPrefix(dep, "brainbot/bot/") {
					t.Errorf("%s links %s: the tool side may not", path, dep)
				}
			}
		}
		// The process is run, not spoken: its package knows nothing of
		// the protocol, which starts no process.
		if path == "brainbot/claude/cliproc" && importsAny(p, "brainbot/claude/streamjson") {
			t.Errorf("claude/cliproc imports the protocol: %v", p.Imports)
		}
		if path == "brainbot/claude/streamjson" && slices.ContainsFunc(p.Deps, func(dep string) bool { return dep == "os/exec" || strings.HasPrefix(dep, "brainbot/") }) {
			t.Errorf("claude/streamjson links os/exec or another package of brainbot: %v", p.Deps)
		}
		// The pool keeps processes and knows no Request: it links
		// nothing of claude, neither the driver nor the protocol.
		if path == "brainbot/claude/pool" {
			if of := slices.DeleteFunc(slices.Clone(p.Deps), func(dep string) bool { return dep != claudePkg && !strings.HasPrefix(dep, claudePkg+"/") }); len(of) > 0 {
				t.Errorf("claude/pool links the driver or another package of claude: %v", of)
			}
		}
		if path == "brainbot/message" && slices.ContainsFunc(p.Imports, func(imp string) bool { return strings.Contains(imp, ".") || strings.HasPrefix(imp, "brainbot/") }) {
			t.Errorf("message imports beyond the standard library: %v", p.Imports)
		}
		for _, f := range p.GoFiles {
			data, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			lines[path] += bytes.Count(data, []byte("\n"))
		}
		total += lines[path]
	}
	for path, n := range lines {
		if 100*n > 15*total {
			t.Errorf("%s holds %d of %d production lines (%.1f%%), more than 15%%", path, n, total, 100*float64(n)/float64(total))
		}
	}
	for _, p := range pkgs {
		if p.ImportPath == "brainbot/cmd/demo" && slices.Contains(p.Deps, "testing") {
			t.Error("cmd/demo links package testing (and its flags)")
		}
	}
}

// The state wing (docs/architecture.md): the contract (state) needs only
// the shared words; each backend is linked by itself, its test helper and
// cmd alone (cmd/brainbot chooses one); nothing else knows which backend
// it runs on.
func TestStateBackendsKeepToThemselves(t *testing.T) {
	for _, p := range listModule(t) {
		path := p.ImportPath
		inCmd := strings.HasPrefix(path, "brainbot/cmd/")
		if path == stateContract && slices.ContainsFunc(p.Imports, func(imp string) bool {
			return strings.Contains(imp, ".") || strings.HasPrefix(imp, "brainbot/") && imp != "brainbot/message"
		}) {
			t.Errorf("the state contract imports beyond the standard library and message: %v", p.Imports)
		}
		// The shared words are a room of their own below both sides: the
		// state wing links nothing of the Telegram side's.
		if (path == stateContract || strings.HasPrefix(path, stateContract+"/")) && slices.ContainsFunc(p.Deps, func(dep string) bool {
			return dep == "brainbot/bot" || strings.HasPrefix(dep, "brainbot/bot/")
		}) {
			t.Errorf("%s links the Telegram side (brainbot/bot/...): the state wing may not", path)
		}
		for _, backend := range []struct{ pkg, lib string }{{sqliteBackend, sqliteLib}, {jetstreamBackend, "github.com/nats-io/nats.go"}} {
			own := path == backend.pkg || strings.HasPrefix(path, backend.pkg+"/")
			if !own && !inCmd && slices.Contains(p.Deps, backend.lib) {
				t.Errorf("%s links %s: only %s and cmd may", path, backend.lib, backend.pkg)
			}
			if !own && !inCmd && importsAny(p, backend.pkg) {
				t.Errorf("%s imports the backend %s: only cmd chooses one", path, backend.pkg)
			}
		}
	}
}

// docs/architecture.md's table names every package and its job, so a
// newcomer finds each one there.
func TestEveryPackageHasItsRowInTheArchitecture(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range listModule(t) {
		path := strings.TrimPrefix(p.ImportPath, "brainbot/")
		if !bytes.Contains(doc, []byte("| `"+path+"` |")) {
			t.Errorf("docs/architecture.md has no row for %s", path)
		}
	}
}
