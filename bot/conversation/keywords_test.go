package conversation

import "testing"

func TestAsksForImage(t *testing.T) {
	kw := []string{"image", "picture", "photo", "draw", "generate", "create a"}
	for text, want := range map[string]bool{
		"Draw me a cat":              true,
		"can you GENERATE something": true,
		"create   a logo":            true,
		"a photo, please":            true,
		"(picture)":                  true,
		"I want to withdraw money":   false,
		"photography tips":           false,
		"regenerate the answer":      false,
		"recreate all":               false,
		"images":                     false,
		"create an account":          false,
		"hello":                      false,
	} {
		if got := asksForImage(text, kw); got != want {
			t.Errorf("asksForImage(%q) = %v, want %v", text, got, want)
		}
	}
	if !asksForImage("нарисуй кота", []string{"нарисуй"}) || asksForImage("перерисуй", []string{"рисуй"}) {
		t.Error("non-ASCII keywords are not matched as whole words")
	}
}
