package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// envName is what an environment variable brainbot reads looks like in
// its code: brainbot's own, the Bot API's, OpenAI's, the Claude CLI's.
var envName = regexp.MustCompile(`^(BRAINBOT|TELEGRAM|OPENAI|CLAUDE|ANTHROPIC)_[A-Z0-9_]+$`)

// The package doc cannot drift from the code: it lists every command of
// Run's switch, every setting with the flag that mirrors it, and every
// variable the package's code names; and it names no BRAINBOT_ variable
// that is not a setting.
func TestPackageDocListsEveryCommandAndVariable(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var doc string
	commands := map[string]bool{}
	literals := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			doc += f.Doc.Text()
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Recv != nil && n.Name.Name == "Run" {
					for _, c := range runCases(n) {
						commands[c] = true
					}
				}
			case *ast.BasicLit:
				if v, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && envName.MatchString(v) {
					literals[v] = true
				}
			}
			return true
		})
	}
	if len(commands) == 0 || len(literals) == 0 {
		t.Fatalf("found %d commands and %d variables in the code: the test no longer reads it", len(commands), len(literals))
	}
	lines := map[string]string{} // a listed name's line of the doc, by its first word
	for line := range strings.Lines(doc) {
		if rest, ok := strings.CutPrefix(line, "\t"); ok {
			if fields := strings.Fields(rest); len(fields) > 0 {
				lines[strings.TrimSuffix(fields[0], ",")] = rest
			}
		}
	}
	for c := range commands {
		if lines[c] == "" {
			t.Errorf("the package doc does not list the command %s", c)
		}
	}
	for _, s := range settings {
		line := lines[s.env]
		switch {
		case line == "":
			t.Errorf("the package doc does not list %s", s.env)
		case s.flag != "" && !strings.Contains(line, "(-"+s.flag+")"):
			t.Errorf("the package doc lists %s without its flag -%s: %q", s.env, s.flag, line)
		case s.flag == "" && strings.Contains(line, "(-"):
			t.Errorf("the package doc gives %s a flag: %q", s.env, line)
		}
	}
	for v := range literals {
		if !strings.Contains(doc, v) {
			t.Errorf("the package doc does not name %s, which the code does", v)
		}
	}
	for _, v := range regexp.MustCompile(`BRAINBOT_[A-Z0-9_]+`).FindAllString(doc, -1) {
		if !literals[v] {
			t.Errorf("the package doc names %s, which the code does not read", v)
		}
	}
}

// runCases returns the commands of Run's switch on its first argument,
// not its spellings with a dash (-h, --version).
func runCases(run *ast.FuncDecl) []string {
	var cases []string
	ast.Inspect(run.Body, func(n ast.Node) bool {
		sw, ok := n.(*ast.SwitchStmt)
		if !ok {
			return true
		}
		if tag, ok := sw.Tag.(*ast.Ident); !ok || tag.Name != "cmd" {
			return true
		}
		for _, stmt := range sw.Body.List {
			for _, e := range stmt.(*ast.CaseClause).List {
				if lit, ok := e.(*ast.BasicLit); ok {
					if c, err := strconv.Unquote(lit.Value); err == nil && !strings.HasPrefix(c, "-") {
						cases = append(cases, c)
					}
				}
			}
		}
		return false
	})
	return cases
}
