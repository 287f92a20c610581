package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"go.uber.org/zap"
)

// A message sent again to its session (replayed after a restart cut its
// first attempt short) must reach the model once. The CLI records each
// user message in the session's transcript under the uuid its stdin line
// carries (Request.MessageID), and on --resume answers a line whose uuid
// it already has with nothing at all (checked on 2.1.328: a
// command_lifecycle "completed" line, no turn, no result). So before such
// a message is sent again, the transcript is cut back to just before its
// first copy: the unfinished turn, and an answer that may never have
// reached the user, are gone, and the message is asked as if for the
// first time.

// rewind cuts req's session transcript back to before req.MessageID when
// an earlier attempt left it there, and ends a process of the
// conversation that may hold it. A session left with no message at all
// is started anew under its id (req.Resume false).
func (d *Driver) rewind(req *Request, log *zap.Logger) error {
	if !req.Retry || !req.Resume || req.MessageID == "" || req.SessionID == "" {
		return nil
	}
	path := d.SessionFile(req.BotID, req.SessionID)
	cut, empty, err := cutTranscript(path, req.MessageID)
	if err != nil || !cut {
		return err
	}
	// A warm process of the conversation has the message in memory.
	d.End(req.Conversation)
	if empty {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("claude: start the session anew: %w", err)
		}
		req.Resume = false
	}
	log.Info("claude: message sent before; its unfinished turn is dropped from the session",
		zap.String("session", req.SessionID), zap.Bool("new_session", empty))
	return nil
}

// cutTranscript cuts the transcript at path back to before the line of
// the entry whose own uuid is id: its top-level field, not the id quoted
// one level down (a tool's argument, a tool's result) in an earlier line.
// cut: it was there; empty: no message entry is left (the CLI would not
// resume the session). A missing transcript is no error: there is nothing
// to cut. The cut transcript replaces the file whole (a new file renamed
// over it), so neither a crash nor a CLI still writing the old one leaves
// half a transcript.
func cutTranscript(path, id string) (cut, empty bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("claude: read the session transcript: %w", err)
	}
	at, found := entryLine(data, id)
	if !found {
		return false, false, nil
	}
	kept := data[:at]
	if err := writeAtomic(path, kept); err != nil {
		return false, false, fmt.Errorf("claude: cut the session transcript: %w", err)
	}
	return true, !bytes.Contains(kept, []byte(`"parentUuid":`)), nil
}

// entryLine finds the offset of the transcript line whose top-level uuid
// is id.
func entryLine(transcript []byte, id string) (at int, found bool) {
	quoted := []byte(`"` + id + `"`)
	for rest := transcript; len(rest) > 0; {
		line, next, _ := bytes.Cut(rest, []byte("\n"))
		if bytes.Contains(line, quoted) { // most lines are not parsed
			var entry map[string]json.RawMessage
			if json.Unmarshal(line, &entry) == nil && bytes.Equal(entry["uuid"], quoted) {
				return len(transcript) - len(rest), true
			}
		}
		rest = next
	}
	return 0, false
}
