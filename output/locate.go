package output

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Locate returns the newest regular file in dir whose name starts with
// prefix+"-" and ends with ext: the file a tool wrote for the request that
// generated prefix. When reported (the path the tool answered, may be empty)
// names such a file directly inside dir, it is used without scanning.
// Otherwise dir is read once; only matching entries are stat'ed, so the cost
// does not grow with unrelated files beyond the directory read. The error
// wraps ErrNotFound when nothing matches.
func Locate(dir, prefix, ext, reported string) (string, error) {
	if prefix == "" {
		return "", errors.New("output: Locate needs a prefix")
	}
	if err := checkExt(ext); err != nil {
		return "", err
	}
	if path, ok := reportedFile(dir, prefix, ext, reported); ok {
		return path, nil
	}
	f, err := os.Open(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%w: %s does not exist", ErrNotFound, dir)
		}
		return "", fmt.Errorf("output: read %s: %w", dir, err)
	}
	defer f.Close()
	var (
		best     string
		bestTime time.Time
	)
	// One pass over the names in directory order, in batches: no sorting,
	// no stat of unrelated entries, bounded memory in a crowded folder.
	for {
		names, err := f.Readdirnames(256)
		for _, name := range names {
			if !matches(name, prefix, ext) {
				continue
			}
			info, err := os.Lstat(filepath.Join(dir, name))
			if err != nil || !info.Mode().IsRegular() {
				continue // removed since the read, or not a file
			}
			mt := info.ModTime()
			// Names carry the write time in ms; on equal mtimes the
			// larger name is the later one.
			if best == "" || mt.After(bestTime) || mt.Equal(bestTime) && name > best {
				best, bestTime = name, mt
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("output: read %s: %w", dir, err)
		}
	}
	if best == "" {
		return "", fmt.Errorf("%w: %s-*%s in %s", ErrNotFound, prefix, ext, dir)
	}
	return filepath.Join(dir, best), nil
}

func matches(name, prefix, ext string) bool {
	return len(name) > len(prefix)+1+len(ext) && strings.HasPrefix(name, prefix+"-") && strings.HasSuffix(name, ext)
}

// reportedFile checks the path a tool reported: a regular file directly
// inside dir whose name agrees with prefix and ext.
func reportedFile(dir, prefix, ext, reported string) (string, bool) {
	if reported == "" || !matches(filepath.Base(reported), prefix, ext) {
		return "", false
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	absReported, err := filepath.Abs(reported)
	if err != nil || filepath.Dir(absReported) != absDir {
		return "", false
	}
	fi, err := os.Lstat(absReported)
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	return filepath.Join(dir, filepath.Base(absReported)), true
}
