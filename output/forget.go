package output

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// RemoveUser deletes the files generated for user with bot ("": every
// bot), of every kind: their organised folder (<kind dir>/bot-<id>/user-<id>/,
// sidecars included) and the files not organised yet, named by Prefix.
// It returns how many files it deleted.
func RemoveUser(root, botID string, userID int64) (removed int, err error) {
	if botID != "" && !botIDPattern.MatchString(botID) {
		return 0, fmt.Errorf("output: invalid bot id %q", botID)
	}
	bot, user := "bot-"+botID, "user-"+strconv.FormatInt(userID, 10)
	if botID == "" {
		bot = "bot-*"
	}
	for _, kind := range []Kind{Audio, Image} {
		dir := filepath.Join(root, kind.Dir())
		// The patterns hold only ids checked above: Glob cannot fail.
		folders, _ := filepath.Glob(filepath.Join(dir, bot, user))
		scratch, _ := filepath.Glob(filepath.Join(dir, bot+"-"+user+"-*"))
		for _, folder := range folders {
			n, err := countFiles(folder)
			if err != nil {
				return removed, err
			}
			if err := os.RemoveAll(folder); err != nil {
				return removed, fmt.Errorf("output: %w", err)
			}
			removed += n
		}
		for _, f := range scratch {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				return removed, fmt.Errorf("output: %w", err)
			}
			removed++
		}
	}
	return removed, nil
}

// countFiles counts the files directly in dir.
func countFiles(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("output: %w", err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			n++
		}
	}
	return n, nil
}
