// Package output is where the files of the tts and image-gen tools land and
// how the bot finds and files them.
//
// The tools write <prefix>-<unix ms><ext> into a flat folder per kind
// (BRAINBOT_DATA/audio-output, BRAINBOT_DATA/image-output) with Save. The
// prefix comes from a language model, so Save sanitises it (SanitizePrefix)
// and verifies that the final path is inside the folder. The bot finds the
// file with Locate (the prefix it generated is unique per request, so
// concurrent requests never pick each other's files) and moves it with
// Organize into <kind dir>/bot-<id>/user-<uid>/.
//
// Every publication is atomic and never overwrites: the bytes go to a hidden
// temporary file in the destination folder and are then hard-linked under
// their final name (which fails instead of replacing an existing file; a
// numeric suffix is added on collision). Readers therefore see either no file
// or the whole file. Hard links need source and destination on one
// filesystem, which holds because everything lives under one data root.
//
// Beside each organised file the bot writes a JSON sidecar
// (<file>.json, WriteSidecar) with what made it, so other programs can use
// the folders.
//
// Retention is off by default: Prune with a zero Retention removes nothing.
// With MaxAge set it removes files older than that; with MaxBytes set it
// removes the oldest organised files until the organised files of that kind
// fit. Files still in the flat folder (not yet organised) are only subject to
// MaxAge, since a fresh one may belong to a request in flight.
package output

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Kind is the kind of generated file; it decides the folder.
type Kind int

const (
	Audio Kind = iota + 1
	Image
)

// Dir is the folder name of the kind below the data root.
func (k Kind) Dir() string {
	switch k {
	case Audio:
		return "audio-output"
	case Image:
		return "image-output"
	}
	return ""
}

func (k Kind) String() string {
	switch k {
	case Audio:
		return "audio"
	case Image:
		return "image"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Directory modes: the data root may be shared with a group (e.g. a web
// server serving media), never with the world.
const (
	DirMode  os.FileMode = 0o750
	FileMode os.FileMode = 0o640
)

// ErrNotFound is returned (wrapped) by Locate when no file matches.
var ErrNotFound = errors.New("output: no generated file found")

// ErrOutside is returned (wrapped) when a path would leave its folder.
var ErrOutside = errors.New("output: path outside its output folder")

// botIDPattern is the id syntax of brains; ids become folder names.
var botIDPattern = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// extPattern keeps extensions to something like ".mp3".
var extPattern = regexp.MustCompile(`^\.[a-z0-9]{1,8}$`)

func checkExt(ext string) error {
	if !extPattern.MatchString(ext) {
		return fmt.Errorf("output: invalid extension %q", ext)
	}
	return nil
}

// inside reports whether path is strictly inside dir (both made absolute).
func inside(dir, path string) (bool, error) {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return false, err
	}
	absPath, err := filepath.Abs(path)
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(absDir, absPath)
	if err != nil {
		return false, nil
	}
	return rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel), nil
}

// maxCollisions bounds the suffixes tried when a name is taken; reaching it
// means something is badly wrong (a name generator stuck on one value).
const maxCollisions = 1000

// linkNoClobber gives the file at src the name dir/<stem><ext>, or
// dir/<stem>-<n><ext> when that is taken, without ever replacing a file,
// then removes src. It returns the final path.
func linkNoClobber(src, dir, stem, ext string) (string, error) {
	for n := 0; n < maxCollisions; n++ {
		name := stem + ext
		if n > 0 {
			name = stem + "-" + strconv.Itoa(n) + ext
		}
		dst := filepath.Join(dir, name)
		err := os.Link(src, dst)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("output: link %s: %w", dst, err)
		}
		if err := os.Remove(src); err != nil {
			return "", fmt.Errorf("output: remove %s after linking: %w", src, err)
		}
		return dst, nil
	}
	return "", fmt.Errorf("output: %d names taken for %s%s in %s", maxCollisions, stem, ext, dir)
}

// Prefix is the file name prefix of one request's generated file:
// bot-<botID>-user-<userID>-<t in unix ms>. The tool appends -<unix ms>
// and the extension when it writes; Locate finds the file by it, and
// Organize files it under the same bot and user.
func Prefix(botID string, userID int64, t time.Time) string {
	return "bot-" + botID + "-user-" + strconv.FormatInt(userID, 10) + "-" + strconv.FormatInt(t.UnixMilli(), 10)
}
