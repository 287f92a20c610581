package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sourceStrings are the strings brainbot's Go sources (tests aside) can
// log: each string literal, and each concatenation with a literal in it,
// its other parts as "\x00".
func sourceStrings(t *testing.T) (all []string, literal map[string]bool, zapDurations []string) {
	t.Helper()
	literal = map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "../.." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, ok := stringLit(n); ok {
					literal[s] = true
					all = append(all, s)
				}
			case *ast.BinaryExpr:
				if s := concatenation(n); strings.Trim(s, "\x00") != "" {
					all = append(all, s)
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Duration" && len(n.Args) == 2 {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "zap" {
						key, _ := n.Args[0].(*ast.BasicLit)
						if s, ok := stringLit(key); !ok || !strings.HasSuffix(s, "_ms") {
							zapDurations = append(zapDurations, fset.Position(n.Pos()).String())
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return all, literal, zapDurations
}

func stringLit(n *ast.BasicLit) (string, bool) {
	if n == nil || n.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(n.Value)
	return s, err == nil
}

// concatenation is a + b + ... with what is not a string literal as "\x00".
func concatenation(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			return concatenation(e.X) + concatenation(e.Y)
		}
	case *ast.BasicLit:
		if s, ok := stringLit(e); ok {
			return s
		}
	case *ast.ParenExpr:
		return concatenation(e.X)
	}
	return "\x00"
}

// quotedLine is a log message as the docs quote it: "..." stands for
// what the quote leaves out, at its end, its start or within.
func quotedLine(q string) *regexp.Regexp {
	q = strings.Join(strings.Fields(q), " ")
	head, tail := "^", "$"
	if s, ok := strings.CutSuffix(q, "..."); ok {
		q, tail = strings.TrimSpace(s), ""
	}
	if s, ok := strings.CutPrefix(q, "..."); ok {
		q, head = strings.TrimSpace(s), ""
	}
	parts := strings.Split(q, "...")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(strings.TrimSpace(p))
	}
	return regexp.MustCompile(head + strings.Join(parts, ".*") + tail)
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	fieldName  = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	// notFields are words the log table quotes that name no field: a
	// level, a program.
	notFields = map[string]bool{"debug": true, "sqlite3": true}
	// quotedLogs are the lines scaling.md quotes as logged: after "log
	// line", "logs" or "logs say", one quote or a list of them.
	quotedLogs = regexp.MustCompile("(?:log line|logs|logs say)\\s+((?:`[^`]+`(?:,\\s*|\\s+and\\s+|,\\s+and\\s+)?)+)")
)

// Each log line docs/observe.md's table and docs/scaling.md quote is
// logged by brainbot, and each field the table names is a string of the
// sources: the docs cannot drift from the code. Every duration field ends
// in _ms, as the docs promise.
func TestDocumentedLogLinesExist(t *testing.T) {
	all, literal, durations := sourceStrings(t)
	for _, at := range durations {
		t.Errorf("%s: a zap.Duration whose key does not end in _ms", at)
	}
	logged := func(quote string) bool {
		re := quotedLine(quote)
		for _, s := range all {
			if re.MatchString(s) {
				return true
			}
		}
		return false
	}
	rows := 0
	for _, row := range strings.Split(docSection(t, "Read the logs"), "\n") {
		cells := strings.Split(row, " | ")
		if !strings.HasPrefix(row, "| `") || len(cells) < 3 {
			continue
		}
		rows++
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			if !logged(m[1]) {
				t.Errorf("docs/observe.md quotes the log line %q: no such message in the sources", m[1])
			}
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[len(cells)-1], -1) {
			if fieldName.MatchString(m[1]) && !notFields[m[1]] && !literal[m[1]] {
				t.Errorf("docs/observe.md names %q for the line %s: no such string in the sources", m[1], cells[0])
			}
		}
	}
	if rows < 20 {
		t.Fatalf("read %d rows of docs/observe.md's log table: the table moved", rows)
	}
	scaling, err := os.ReadFile("../../docs/scaling.md")
	if err != nil {
		t.Fatal(err)
	}
	quotes := 0
	for _, list := range quotedLogs.FindAllStringSubmatch(string(scaling), -1) {
		for _, m := range backticked.FindAllStringSubmatch(list[1], -1) {
			quotes++
			field, value, isField := strings.Cut(m[1], ": ")
			if !logged(m[1]) && !(isField && literal[field] && literal[value]) {
				t.Errorf("docs/scaling.md quotes the log line %q: no such message in the sources", m[1])
			}
		}
	}
	if quotes < 5 {
		t.Fatalf("found %d quoted log lines in docs/scaling.md: the test no longer finds them", quotes)
	}
}
