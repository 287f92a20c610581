package claude

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A transcript as the CLI writes it (2.1.328): bookkeeping lines, then
// each message under its own top-level uuid. The first turn's model
// called a tool with an argument named uuid holding the id of the
// message sent next (ids are derived from the Telegram message, so a user
// can know one beforehand): the same text as the message's own field,
// one level down.
const (
	replayedID  = "9c6ef024-1d10-5b4c-88e5-ea81b106a4aa"
	transcript1 = `{"type":"queue-operation","operation":"enqueue","timestamp":"2026-11-27T03:16:48.283Z","sessionId":"8f429613-b899-413a-a536-655231bfc8fb"}
{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":[{"type":"text","text":"look up ` + replayedID + `"}]},"uuid":"11111111-1d10-5b4c-88e5-ea81b106a4aa","timestamp":"2026-11-27T03:16:48.380Z","sessionId":"8f429613-b899-413a-a536-655231bfc8fb"}
{"parentUuid":"11111111-1d10-5b4c-88e5-ea81b106a4aa","isSidechain":false,"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"mcp__t__echo","input":{"uuid":"` + replayedID + `"}}]},"uuid":"22222222-1d10-5b4c-88e5-ea81b106a4aa","timestamp":"2026-11-27T03:16:49.380Z","sessionId":"8f429613-b899-413a-a536-655231bfc8fb"}
{"parentUuid":"22222222-1d10-5b4c-88e5-ea81b106a4aa","isSidechain":false,"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01","type":"tool_result","content":"echo"}]},"uuid":"33333333-1d10-5b4c-88e5-ea81b106a4aa","timestamp":"2026-11-27T03:16:49.480Z","sessionId":"8f429613-b899-413a-a536-655231bfc8fb"}
`
	transcript2 = `{"parentUuid":"33333333-1d10-5b4c-88e5-ea81b106a4aa","isSidechain":false,"type":"user","message":{"role":"user","content":[{"type":"text","text":"second"}]},"uuid":"` + replayedID + `","timestamp":"2026-11-27T03:17:48.380Z","sessionId":"8f429613-b899-413a-a536-655231bfc8fb"}
{"parentUuid":"` + replayedID + `","isSidechain":false,"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"half an ans"}]},"uuid":"44444444-1d10-5b4c-88e5-ea81b106a4aa","timestamp":"2026-11-27T03:17:49.380Z","sessionId":"8f429613-b899-413a-a536-655231bfc8fb"}
`
)

// A replayed message is cut from the transcript at its own line, not at
// the first place its id appears, and the cut replaces the file whole: a
// reader of the old one (a CLI still writing it) never sees half of it.
func TestCutTranscriptAtTheMessagesOwnLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "8f429613-b899-413a-a536-655231bfc8fb.jsonl")
	if err := os.WriteFile(path, []byte(transcript1+transcript2), 0o600); err != nil {
		t.Fatal(err)
	}
	before, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()

	cut, empty, err := cutTranscript(path, replayedID)
	if err != nil || !cut || empty {
		t.Fatalf("cutTranscript = cut %v, empty %v, %v; want cut, messages left", cut, empty, err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != transcript1 {
		t.Errorf("the transcript after the cut:\n%s\nwant the first turn whole:\n%s", got, transcript1)
	}
	if old, err := io.ReadAll(before); err != nil || string(old) != transcript1+transcript2 {
		t.Errorf("the file open before the cut now reads %d bytes (%v): it was cut in place", len(old), err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the transcript after the cut: %v, %v; want mode 0600", info, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("files left beside the transcript: %v", entries)
	}

	// Its id nowhere as a line's own: nothing to cut.
	if cut, _, err := cutTranscript(path, replayedID); cut || err != nil {
		t.Errorf("a transcript without the message's line: cut %v, %v", cut, err)
	}
	if again, _ := os.ReadFile(path); !strings.Contains(string(again), replayedID) || string(again) != transcript1 {
		t.Errorf("the transcript changed though its message was not in it:\n%s", again)
	}
}
