package conversation

import (
	"strings"
	"testing"

	"brainbot/state"
)

// Callback data is ours only in the shape callbackData makes; forged or
// odd data is never read as a button.
func TestCallbackData(t *testing.T) {
	id := state.NewButtonsID()
	for place := range maxButtons {
		data := callbackData(id, place)
		if len(data) > 64 {
			t.Errorf("%q is over Telegram's 64 bytes", data)
		}
		if gotID, gotPlace, ok := parseCallbackData(data); !ok || gotID != id || gotPlace != place {
			t.Errorf("%q read as %q, %d, %v", data, gotID, gotPlace, ok)
		}
	}
	for _, forged := range []string{"", ".", id, id + ".", ".0", id + ".-1", id + ".51", id + ".01", id + ".+1", id + ". 1", id + ".1.2",
		strings.Repeat("x", 64)} {
		if _, _, ok := parseCallbackData(forged); ok {
			t.Errorf("forged data %q read as a button", forged)
		}
	}
}
