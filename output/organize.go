package output

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Organize moves the generated file at path (directly inside
// root/<kind dir>) to root/<kind dir>/bot-<botID>/user-<userID>/, keeping its
// name, or adding a numeric suffix when that name is taken: it never
// overwrites. userID is the sender's: a chat's negative id for messages
// sent as that chat (user--1001234567890/). Folders are created with DirMode, the file gets FileMode. It
// returns the final path.
func Organize(root, path string, kind Kind, botID string, userID int64) (string, error) {
	if kind.Dir() == "" {
		return "", fmt.Errorf("output: unknown kind %v", kind)
	}
	if !botIDPattern.MatchString(botID) {
		return "", fmt.Errorf("output: invalid bot id %q", botID)
	}
	if userID == 0 {
		return "", fmt.Errorf("output: invalid user id %d", userID)
	}
	kindDir := filepath.Join(root, kind.Dir())
	absKindDir, err := filepath.Abs(kindDir)
	if err != nil {
		return "", fmt.Errorf("output: %w", err)
	}
	absPath, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("output: %w", err)
	}
	if filepath.Dir(absPath) != absKindDir {
		return "", fmt.Errorf("%w: %s is not a file in %s", ErrOutside, path, kindDir)
	}
	fi, err := os.Lstat(absPath)
	if err != nil {
		return "", fmt.Errorf("output: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("output: %s is not a regular file", path)
	}
	dst := filepath.Join(kindDir, "bot-"+botID, "user-"+strconv.FormatInt(userID, 10))
	if err := os.MkdirAll(dst, DirMode); err != nil {
		return "", fmt.Errorf("output: create %s: %w", dst, err)
	}
	if err := os.Chmod(absPath, FileMode); err != nil {
		return "", fmt.Errorf("output: %w", err)
	}
	name := filepath.Base(absPath)
	ext := filepath.Ext(name)
	return linkNoClobber(absPath, dst, strings.TrimSuffix(name, ext), ext)
}

// prefixed is the name a tool gives a request's file: its Prefix, with
// the bot and the user it was made for.
var prefixed = regexp.MustCompile(`^bot-([a-z0-9_-]{1,64}?)-user-(-?[0-9]+)-[0-9]+`)

// Organized is where the file a tool reported at path (directly inside
// a kind's folder, named by its request's Prefix) is now: Organize moves
// it under bot-<id>/user-<uid>/ once the reply is sent. found is false
// when it is at neither place (not organised yet and gone, pruned, or
// forgotten); path is then returned as it is.
func Organized(path string) (where string, found bool) {
	dir, name := filepath.Split(path)
	if m := prefixed.FindStringSubmatch(name); m != nil && isKindDir(filepath.Base(dir)) {
		moved := filepath.Join(dir, "bot-"+m[1], "user-"+m[2], name)
		if _, err := os.Lstat(moved); err == nil {
			return moved, true
		}
	}
	_, err := os.Lstat(path)
	return path, err == nil
}

func isKindDir(name string) bool { return name == Audio.Dir() || name == Image.Dir() }
