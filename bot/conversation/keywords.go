package conversation

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// asksForImage reports whether text contains one of the keywords as a whole
// word or phrase, ignoring case and runs of white space: "draw" matches
// "Draw me a cat" but not "withdraw"; "photo" does not match "photography".
func asksForImage(text string, keywords []string) bool {
	words := strings.Fields(strings.ToLower(text))
	norm := " " + strings.Join(words, " ") + " "
	for _, kw := range keywords {
		kw = strings.Join(strings.Fields(strings.ToLower(kw)), " ")
		if kw != "" && containsWord(norm, kw) {
			return true
		}
	}
	return false
}

// containsWord finds kw in s where neither neighbour is a letter or digit.
func containsWord(s, kw string) bool {
	for from := 0; ; {
		i := strings.Index(s[from:], kw)
		if i < 0 {
			return false
		}
		i += from
		before, after := lastRune(s[:i]), firstRune(s[i+len(kw):])
		if !isWordRune(before) && !isWordRune(after) {
			return true
		}
		from = i + 1
	}
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// firstRune and lastRune see a space at the ends of s.
func firstRune(s string) rune {
	if s == "" {
		return ' '
	}
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

func lastRune(s string) rune {
	if s == "" {
		return ' '
	}
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}
