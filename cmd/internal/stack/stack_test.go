package stack

import (
	"testing"

	"brainbot/bot/brain"
)

// TestTokenIsWellFormed keeps the stand-in tokens acceptable to brainbot's
// token checks.
func TestTokenIsWellFormed(t *testing.T) {
	for _, id := range []string{"narrator", "voice", "painter", "a-very-long-brain-id_of_forty-characters"} {
		if err := brain.ValidToken(Token(id)); err != nil {
			t.Errorf("Token(%q): %v", id, err)
		}
	}
	if Token("narrator") == Token("voice") {
		t.Error("two bots share a token")
	}
}
