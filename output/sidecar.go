package output

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// SidecarExt is what the metadata file beside an organised file adds to
// its name: voice.mp3 has voice.mp3.json.
const SidecarExt = ".json"

// Metadata is what the sidecar of an organised file says about it, so that
// other programs can use the folders: who asked, what made it, what it is.
// Facts that are not known are left out of the JSON.
type Metadata struct {
	File      string    `json:"file"`  // the file's name, beside the sidecar
	Brain     string    `json:"brain"` // the brain's name
	BotID     string    `json:"bot_id"`
	Chat      int64     `json:"chat"`
	User      int64     `json:"user"`
	RequestID string    `json:"request_id"`
	Created   time.Time `json:"created"`
	Mode      string    `json:"mode"` // speech or image
	// Text is what a voice note says; Prompt is what a picture was drawn
	// from.
	Text   string `json:"text,omitempty"`
	Prompt string `json:"prompt,omitempty"`
	// The settings the file was made with.
	Model   string  `json:"model,omitempty"`
	Voice   string  `json:"voice,omitempty"`
	Speed   float64 `json:"speed,omitempty"`
	Format  string  `json:"format,omitempty"`
	Size    string  `json:"size,omitempty"`
	Quality string  `json:"quality,omitempty"`
	Style   string  `json:"style,omitempty"`
	// DurationSeconds is a voice note's length; Width and Height a
	// picture's.
	DurationSeconds float64 `json:"duration_seconds,omitempty"`
	Width           int     `json:"width,omitempty"`
	Height          int     `json:"height,omitempty"`
	Bytes           int64   `json:"bytes"`
	// CostUSD is what making the file cost at OpenAI, when its price is
	// known.
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// SidecarPath is the sidecar of the file at path.
func SidecarPath(path string) string { return path + SidecarExt }

// WriteSidecar writes m as the sidecar of the organised file at path,
// atomically (a reader sees no sidecar or all of it) and with FileMode;
// Prune removes it with its file. m.File is set to the file's name.
func WriteSidecar(path string, m Metadata) error {
	m.File = filepath.Base(path)
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("output: sidecar of %s: %w", path, err)
	}
	tmp, err := writeTemp(filepath.Dir(path), append(data, '\n'))
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, SidecarPath(path)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("output: sidecar of %s: %w", path, err)
	}
	return nil
}
