package cliproc

import (
	"strings"
	"testing"
)

func TestTailBuffer(t *testing.T) {
	tb := newTailBuffer(16)
	tb.Write([]byte("first line\nsecond\n"))
	tb.Write([]byte("third\n"))
	if got := tb.String(); got != "second\nthird" {
		t.Errorf("tail %q, want the last whole lines", got)
	}
	tb.Write([]byte(strings.Repeat("x", 40)))
	if got := tb.String(); got != strings.Repeat("x", 16) {
		t.Errorf("tail %q after a long write", got)
	}
}
