package output

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// MaxPrefixLen bounds a sanitised prefix, keeping whole names far below the
// 255-byte limit of common filesystems.
const MaxPrefixLen = 128

// DefaultPrefix replaces a prefix that sanitises to nothing.
const DefaultPrefix = "output"

// SanitizePrefix turns an untrusted file name prefix into a safe one: only
// ASCII letters, digits, '_' and '-' survive (so no separators, dots or
// absolute paths), at most MaxPrefixLen bytes, and DefaultPrefix when
// nothing survives.
func SanitizePrefix(name string) string {
	safe := make([]byte, 0, min(len(name), MaxPrefixLen))
	for i := 0; i < len(name) && len(safe) < MaxPrefixLen; i++ {
		c := name[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' {
			safe = append(safe, c)
		}
	}
	if len(safe) == 0 {
		return DefaultPrefix
	}
	return string(safe)
}

// Save writes data atomically as <SanitizePrefix(prefix)>-<now in unix ms><ext>
// into dir (created with DirMode), with FileMode, and returns the path. An
// existing file is never replaced (a suffix is added instead).
func Save(dir, prefix, ext string, data []byte, now time.Time) (string, error) {
	if err := checkExt(ext); err != nil {
		return "", err
	}
	stem := SanitizePrefix(prefix) + "-" + strconv.FormatInt(now.UnixMilli(), 10)
	if ok, err := inside(dir, filepath.Join(dir, stem+ext)); err != nil || !ok {
		return "", fmt.Errorf("%w: %q in %s", ErrOutside, stem+ext, dir)
	}
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return "", fmt.Errorf("output: create %s: %w", dir, err)
	}
	tmp, err := writeTemp(dir, data)
	if err != nil {
		return "", err
	}
	path, err := linkNoClobber(tmp, dir, stem, ext)
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return path, nil
}

// writeTemp writes data to a hidden temporary file in dir (so it is on the
// destination's filesystem and no prefix search can match it).
func writeTemp(dir string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", fmt.Errorf("output: temporary file: %w", err)
	}
	name := f.Name()
	fail := func(err error) (string, error) {
		f.Close()
		os.Remove(name)
		return "", fmt.Errorf("output: write %s: %w", name, err)
	}
	if err := f.Chmod(FileMode); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		return "", fmt.Errorf("output: write %s: %w", name, err)
	}
	return name, nil
}
