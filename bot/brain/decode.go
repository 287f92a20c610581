package brain

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// decoder walks a YAML node tree into a Go value, field by field, so that
// every problem carries its line and field path, decoding goes on after one,
// and an explicit zero can be told from an absent field: yaml.v3's own
// decoder (even with KnownFields) does none of the three.
type decoder struct {
	// kind names the file's kind in messages ("brain"), needs lists the
	// fields an empty file lacks, and shape shows what the file looks like.
	kind, needs, shape string
	file               string
	data               []byte // the file, to locate text inside a value
	errs               Errors
	// lines locates every field present in the file. Validation uses it to
	// point at the right line and to tell an explicit zero from an absent
	// field.
	lines fieldLines
	// failed holds the fields that could not be decoded: validation says
	// nothing more about them ("must be a number" is enough, without
	// "must be between 0.25 and 4" about the zero left behind).
	failed map[string]bool
	// schema is the type of the whole file, where an unknown field is
	// looked for in the other sections.
	schema reflect.Type
}

func newDecoder(kind, needs, shape, path string, data []byte) *decoder {
	return &decoder{kind: kind, needs: needs, shape: shape, file: path, data: data, lines: make(fieldLines), failed: make(map[string]bool)}
}

// reflectValue is the struct v points to.
func reflectValue(v any) reflect.Value { return reflect.ValueOf(v).Elem() }

func (d *decoder) addf(line int, field, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// fail records that the field at path could not be decoded.
func (d *decoder) fail(line int, path, format string, args ...any) {
	d.failed[path] = true
	d.addf(line, path, format, args...)
}

// reject records a rule the decoded field at path breaks, at the field's
// line, unless decoding it (or its section) already failed.
func (d *decoder) reject(path, format string, args ...any) {
	for p := path; ; p = parentPath(p) {
		if d.failed[p] {
			return
		}
		if p == "" {
			break
		}
	}
	d.addf(d.lines.line(path), path, format, args...)
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// decodeRoot stores the file's mapping n into v, the struct of the whole
// file.
func (d *decoder) decodeRoot(n *yaml.Node, v reflect.Value) {
	d.schema = v.Type()
	d.decode(n, v, "")
}

// decode stores n into v, the field at path. A null value leaves v at its
// zero value and counts as absent, like a missing key.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	d.lines[path] = n.Line

	if reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		if err := v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			d.fail(n.Line, path, "%s", err)
		}
		return
	}

	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n.Line, path, "must be a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.String:
		// Any scalar reads as text: `name: 2024` means the string "2024".
		if n.Kind != yaml.ScalarNode {
			d.fail(n.Line, path, "must be text, got %s", describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		d.decodeScalar(n, v, path, "true or false", "!!bool")
	case reflect.Int, reflect.Int64:
		d.decodeScalar(n, v, path, "a whole number", "!!int")
	case reflect.Float64:
		d.decodeScalar(n, v, path, "a number", "!!int", "!!float")
	default:
		// Only reachable when a field of a type this walker does not know
		// is added to Brain; the schema test decodes every field.
		panic(fmt.Sprintf("%s: no YAML decoding for %s (field %s)", d.kind, v.Type(), path))
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n.Line, path, "must be a mapping of fields, got %s", describe(n))
		return
	}
	fields := yamlFields(v.Type())
	firstLine := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		name := key.Value
		field := joinPath(path, name)
		if first, dup := firstLine[name]; dup {
			d.addf(key.Line, field, "defined twice (first at line %d)", first)
			continue
		}
		firstLine[name] = key.Line
		index, known := fields[name]
		if !known {
			d.addf(key.Line, field, "%s", d.unknownField(path, name, v.Type()))
			continue
		}
		d.decode(value, v.Field(index), field)
	}
}

// decodeMap decodes a mapping whose keys are names chosen by the author
// (mcp_servers, env, headers). Each entry is located at its key's line,
// where the author looks for it.
func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n.Line, path, "must be a mapping of names to values, got %s", describe(n))
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	firstLine := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		if key.Kind != yaml.ScalarNode {
			d.fail(key.Line, path, "must use names as keys, got %s", describe(key))
			continue
		}
		field := joinPath(path, key.Value)
		if first, dup := firstLine[key.Value]; dup {
			d.addf(key.Line, field, "defined twice (first at line %d)", first)
			continue
		}
		firstLine[key.Value] = key.Line
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(value, elem, field)
		d.lines[field] = key.Line
		m.SetMapIndex(reflect.ValueOf(key.Value), elem)
	}
	v.Set(m)
}

// decodeScalar checks the node's resolved YAML tag before decoding, so that
// `enabled: yes` or `speed: "fast"` is an error rather than a guess.
func (d *decoder) decodeScalar(n *yaml.Node, v reflect.Value, path, want string, tags ...string) {
	if n.Kind != yaml.ScalarNode || !slices.Contains(tags, n.ShortTag()) {
		d.fail(n.Line, path, "must be %s, got %s", want, describe(n))
		return
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		d.fail(n.Line, path, "must be %s, got %s (%v)", want, describe(n), err)
	}
}

// describe names what the author wrote, for "must be X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.DocumentNode:
		return "a document"
	}
	return fmt.Sprintf("%q", n.Value)
}

// unknownField explains a field named name that the section at path (of
// type t) does not have: where the file's schema has a field of that name,
// most often a section's field indented one level too little; else the
// fields the section has.
func (d *decoder) unknownField(path, name string, t reflect.Type) string {
	homes := fieldPaths(d.schema, "", name)
	if len(homes) == 0 {
		if near := nearest(name, fieldNames(t)); len(near) > 0 {
			return fmt.Sprintf("unknown field; did you mean %s?", orList(near))
		}
		return "unknown field; want one of " + strings.Join(fieldNames(t), ", ")
	}
	switch {
	case len(homes) > 1:
		return fmt.Sprintf("unknown field here; did you mean %s? Write it indented under its section", orList(homes))
	case parentPath(homes[0]) == "":
		return "unknown field here; it is a field of the whole file: write it at the top level, not indented"
	}
	return fmt.Sprintf("unknown field here; did you mean %s? Write it indented under %s:", homes[0], parentPath(homes[0]))
}

// nearest are the names a misspelling of them could give name: those
// fewest edits away (a letter added, dropped, changed, or two swapped),
// within a third of name's length.
func nearest(name string, names []string) []string {
	best, within := 0, max(1, len(name)/3)
	var near []string
	for _, n := range names {
		switch d := editDistance(name, n); {
		case d > within || len(near) > 0 && d > best:
		case len(near) > 0 && d == best:
			near = append(near, n)
		default:
			best, near = d, []string{n}
		}
	}
	return near
}

// editDistance is the optimal string alignment distance between a and b:
// the letters added, dropped or changed, and the neighbours swapped, that
// turn a into b.
func editDistance(a, b string) int {
	// rows[i%3] holds the distances from a[:i] to each prefix of b.
	var rows [3][]int
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		prev2, prev, cur := rows[(i+1)%3], rows[(i-1)%3], rows[i%3]
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
	}
	return rows[len(a)%3][len(b)]
}

// fieldPaths lists the paths of the fields named name in t, a struct at
// path, and in its sections; the entries of a mapping of names
// (mcp_servers) are written <name>.
func fieldPaths(t reflect.Type, path, name string) []string {
	var paths []string
	for i := range t.NumField() {
		f := t.Field(i)
		fname := yamlName(f)
		if fname == "" {
			continue
		}
		fpath := joinPath(path, fname)
		if fname == name {
			paths = append(paths, fpath)
		}
		ft := f.Type
		if ft.Kind() == reflect.Map {
			ft, fpath = ft.Elem(), fpath+".<name>"
		}
		if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(unmarshalerType) {
			paths = append(paths, fieldPaths(ft, fpath, name)...)
		}
	}
	return paths
}

// orList joins words as "a", "a or b", "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// yamlFields maps the YAML names of t's fields to their indexes.
func yamlFields(t reflect.Type) map[string]int {
	fields := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			fields[name] = i
		}
	}
	return fields
}

// fieldNames lists t's YAML names in declaration order, the order the
// reference documents them in.
func fieldNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			names = append(names, name)
		}
	}
	return names
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

// parentPath is the section holding the field at path: "tts" for
// "tts.speed", "image.keywords" for "image.keywords[2]", "" at the top.
func parentPath(path string) string {
	return path[:max(strings.LastIndexAny(path, ".["), 0)]
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}
