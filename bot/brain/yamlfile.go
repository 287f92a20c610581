package brain

// YAMLFile lets files of other kinds (panels) be read with the rules brain
// files are: every problem with its file:line and field path, decoding
// going on after one, unknown and doubled fields refused, and an explicit
// zero told from an absent field.
type YAMLFile struct{ d *decoder }

// DecodeYAML decodes data, the file at path, into v (a pointer to a struct
// whose fields carry yaml tags). kind names the file's kind in messages
// ("panel"); needs lists the fields an empty file lacks, and shape shows
// the form of the file ("members: [...]"). Validate the
// result with Reject and Has, then take Err.
func DecodeYAML(kind, needs, shape, path string, data []byte, v any) *YAMLFile {
	d := newDecoder(kind, needs, shape, path, data)
	if root := d.document(data); root != nil {
		d.decodeRoot(root, reflectValue(v))
	}
	return &YAMLFile{d: d}
}

// Reject records a rule the field at path breaks, at its line (or its
// section's, when the file leaves it out), unless decoding it failed.
func (f *YAMLFile) Reject(path, format string, args ...any) { f.d.reject(path, format, args...) }

// Has reports whether the file sets the field at path.
func (f *YAMLFile) Has(path string) bool {
	_, ok := f.d.lines[path]
	return ok
}

// Failed reports whether the file could not be read as a mapping of
// fields at all (syntax, empty): there is nothing to validate.
func (f *YAMLFile) Failed() bool { return len(f.d.lines) == 0 && len(f.d.errs) > 0 }

// Err is every problem found, as Errors sorted by line, or nil.
func (f *YAMLFile) Err() error { return f.d.errs.err() }

// FileID is the id a YAML file name gives (narrator.yaml → narrator), and
// whether the name is such a file at all: dotfiles and editor backups are
// not.
func FileID(name string) (id string, ok bool) {
	return fileID(name), isBrainFileName(name)
}

// ValidID reports whether id may name a bot (a-z, 0-9, _ and -).
func ValidID(id string) bool { return validID.MatchString(id) }

// Line is the line of the field at path (or of its nearest section the
// file sets; 1 for none).
func (f *YAMLFile) Line(path string) int { return f.d.lines.line(path) }
