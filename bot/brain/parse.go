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
	"strconv"
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
	d := &decoder{file: path, lines: make(fieldLines), failed: make(map[string]bool)}
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
	d.decode(root, reflect.ValueOf(b).Elem(), "")
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

// yamlErrorLine matches yaml.v3's syntax errors, "yaml: line 3: ...".
var yamlErrorLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses data as exactly one YAML document holding a mapping and
// returns that mapping, or nil after recording why not.
func (d *decoder) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) {
		d.addf(1, "", "empty file; a brain needs at least name, telegram and system_prompt")
		return nil
	}
	if err != nil {
		d.addSyntaxError(err)
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		d.addf(extra.Line, "", "more than one YAML document (---); a brain file holds one")
		return nil
	case !errors.Is(err, io.EOF):
		d.addSyntaxError(err)
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
		d.addf(1, "", "empty file; a brain needs at least name, telegram and system_prompt")
		return nil
	case root.Kind != yaml.MappingNode:
		d.addf(root.Line, "", "a brain file must be a mapping of fields (name: ..., system_prompt: ...), got %s", describe(root))
		return nil
	}
	return root
}

func (d *decoder) addSyntaxError(err error) {
	if m := yamlErrorLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1]) // the pattern admits digits only
		d.addf(line, "", "YAML syntax: %s", m[2])
		return
	}
	d.addf(1, "", "YAML syntax: %s", strings.TrimPrefix(err.Error(), "yaml: "))
}
