package brain

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// validID is the form of a bot id, which is also the brain's file name.
var validID = regexp.MustCompile(`^[a-z0-9_-]+$`)

// Parse reads, decodes and validates one brain file. Problems in the file
// come back as Errors (every one of them, each with file:line); a file that
// cannot be read gives a wrapped *fs.PathError.
//
// Parse does not look at the environment: a brain whose token_env variable
// is unset is still valid (CI checks brains without secrets). See
// Brain.ResolveToken.
func Parse(path string) (*Brain, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read brain file: %w", err)
	}
	return ParseBytes(path, data)
}

// ParseBytes is Parse for a file already read: path names the file in
// errors and gives the bot id.
func ParseBytes(path string, data []byte) (*Brain, error) {
	d := newDecoder("brain", "name, telegram and system_prompt", "name: ..., system_prompt: ...", path, data)
	id := fileID(filepath.Base(path))
	switch {
	case !isBrainFileName(filepath.Base(path)):
		d.addf(1, "", "a brain file name must end in .yaml or .yml")
	case !validID.MatchString(id):
		d.addf(1, "", "bot id %q (the file name) may use only a-z, 0-9, _ and -", id)
	}

	root := d.document(data)
	if root == nil {
		return nil, d.errs.err()
	}
	b := &Brain{ID: id, Path: path}
	d.decodeRoot(root, reflect.ValueOf(b).Elem())
	applyDefaults(b, d.lines)
	d.validate(b)
	if err := d.errs.err(); err != nil {
		return nil, err
	}
	b.lines = d.lines
	return b, nil
}

// isBrainFileName reports whether a directory entry is a brain file rather
// than something else in the folder: dotfiles (.#x.yaml lock files, hidden
// editor swap files) and editor backups (x.yaml~, x.yaml.swp) are not.
func isBrainFileName(name string) bool {
	return !strings.HasPrefix(name, ".") &&
		(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"))
}

// fileID is the bot id a brain file name gives: narrator.yaml → narrator.
func fileID(name string) string {
	return strings.TrimSuffix(strings.TrimSuffix(name, ".yaml"), ".yml")
}

// IDOf is the bot id of the brain file at path: brains/narrator.yaml →
// narrator.
func IDOf(path string) string { return fileID(filepath.Base(path)) }

// yamlErrorLine matches yaml.v3's syntax errors, "yaml: line 3: ...".
var yamlErrorLine = regexp.MustCompile(`^yaml: (?:line \d+: )?(.*)$`)

// document parses data as exactly one YAML document holding a mapping and
// returns that mapping, or nil after recording why not.
func (d *decoder) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) {
		d.addf(1, "", "empty file; a %s needs at least %s", d.kind, d.needs)
		return nil
	}
	if err != nil {
		d.addSyntaxError(data, err)
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		d.addf(extra.Line, "", "more than one YAML document (---); a %s file holds one", d.kind)
		return nil
	case !errors.Is(err, io.EOF):
		d.addSyntaxError(data, err)
		return nil
	}

	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.AliasNode {
		root = root.Alias
	}
	switch {
	case root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null":
		d.addf(1, "", "empty file; a %s needs at least %s", d.kind, d.needs)
		return nil
	case root.Kind != yaml.MappingNode:
		d.addf(root.Line, "", "a %s file must be a mapping of fields (%s), got %s", d.kind, d.shape, describe(root))
		return nil
	}
	return root
}

// addSyntaxError records err, yaml.v3's syntax error in data, on the line
// the author has to fix. yaml.v3 reports many problems on the line before
// the block that holds them ("did not find expected key" for a field
// indented one space less than the one above it points at the section's
// first field, or at the section itself), so its line is not used: the
// problem is on the first line whose addition makes data fail that way.
func (d *decoder) addSyntaxError(data []byte, err error) {
	problem := syntaxProblem(err)
	line := syntaxLine(data, problem)
	if tabIndented(data, line) {
		// yaml.v3 words a tab three ways, by where it is: one mistake, one
		// message.
		d.addf(line, "", "YAML syntax: this line is indented with a tab: indent with spaces, not tabs")
		return
	}
	d.addf(line, "", "YAML syntax: %s%s", problem, syntaxHints[problem])
}

// tabIndented reports whether line n (from 1) of data has a tab in its
// indentation.
func tabIndented(data []byte, n int) bool {
	lines := bytes.Split(data, []byte("\n"))
	if n < 1 || n > len(lines) {
		return false
	}
	indent := lines[n-1][:len(lines[n-1])-len(bytes.TrimLeft(lines[n-1], " \t"))]
	return bytes.IndexByte(indent, '\t') >= 0
}

// syntaxHints explain yaml.v3's wording of the mistakes authors make most.
var syntaxHints = map[string]string{
	"did not find expected key":                      " (is this line indented like the fields beside it?)",
	"mapping values are not allowed in this context": " (is this line indented more than the field above it? A value holding \": \" needs quotes)",
	"found character that cannot start any token":    " (a value starting with @ or ` needs quotes)",
	"found unexpected end of stream":                 " (a quote opened on this line is never closed: end the value with the same quote, \" or ')",
}

// syntaxProblem is a yaml.v3 error's message without its "yaml: line N: ".
func syntaxProblem(err error) string {
	if m := yamlErrorLine.FindStringSubmatch(err.Error()); m != nil {
		return m[1]
	}
	return err.Error()
}

// syntaxLine finds the first line n such that data's first n lines fail to
// parse with problem, by bisection: a prefix that ends before the problem
// parses (or fails otherwise, at its truncated end) and one that holds it
// fails the same way. An unclosed quote or bracket is found on the line
// that opens it.
func syntaxLine(data []byte, problem string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	fails := func(n int) bool {
		return firstSyntaxProblem(bytes.Join(lines[:n], nil)) == problem
	}
	lo, hi := 1, len(lines) // fails(hi) holds: it is the whole file
	for lo < hi {
		if mid := (lo + hi) / 2; fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}

// firstSyntaxProblem is the problem of the first syntax error in data's
// documents, "" if there is none.
func firstSyntaxProblem(data []byte) string {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		switch err := dec.Decode(&doc); {
		case errors.Is(err, io.EOF):
			return ""
		case err != nil:
			return syntaxProblem(err)
		}
	}
}
