package claudetest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// offlineSection is the part of brains/README.md that tells a bot author
// what the scripted model (`make chat`, `make demo`) understands.
const offlineSection = "## Rehearsing offline: what the stand-in model understands"

// The directives the scripted model obeys are the ones brains/README.md
// lists, no more, no fewer: each is a string literal "#word" in the
// model's source (model*.go), and each is a `#word` in the README's
// table.
func TestDirectivesAreDocumented(t *testing.T) {
	inCode := modelDirectives(t)
	inDoc := documentedDirectives(t, filepath.Join("..", "..", "brains", "README.md"))
	for _, d := range inCode {
		if !slices.Contains(inDoc, d) {
			t.Errorf("the model obeys %s, which brains/README.md (%q) does not list", d, offlineSection)
		}
	}
	for _, d := range inDoc {
		if !slices.Contains(inCode, d) {
			t.Errorf("brains/README.md lists %s, which the model does not obey", d)
		}
	}
}

var directiveLiteral = regexp.MustCompile(`^#[a-z]+ ?$`)

// modelDirectives are the directives in the string literals of the
// model's source files, sorted.
func modelDirectives(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("model*.go")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && directiveLiteral.MatchString(s) {
					found = append(found, strings.TrimSpace(s))
				}
			}
			return true
		})
	}
	if len(found) == 0 {
		t.Fatal("no directive found in the model's source")
	}
	slices.Sort(found)
	return slices.Compact(found)
}

var documentedDirective = regexp.MustCompile("^\\| `(#[a-z]+)")

// documentedDirectives are the directives that start a row of the table
// in the README's offline section, sorted.
func documentedDirectives(t *testing.T, readme string) []string {
	t.Helper()
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n"+offlineSection+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", readme, offlineSection)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var found []string
	for line := range strings.Lines(section) {
		if m := documentedDirective.FindStringSubmatch(line); m != nil {
			found = append(found, m[1])
		}
	}
	slices.Sort(found)
	return slices.Compact(found)
}
