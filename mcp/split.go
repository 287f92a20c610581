package mcp

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// within is as much of text as max characters hold: all of it when it
// is no longer, else up to its last sentence end within them, else its
// last whole word, else nothing (a word is not cut).
func within(text string, max int) string {
	if utf8.RuneCountInString(text) <= max {
		return text
	}
	if max <= 0 {
		return ""
	}
	head := text[:byteIndexOfRune(text, max)]
	for i := len(head); i > 0; {
		r, size := utf8.DecodeLastRuneInString(head[:i])
		if strings.ContainsRune(".!?…。！？", r) && startsWithSpace(text[i:]) {
			return strings.TrimSpace(head[:i])
		}
		i -= size
	}
	if startsWithSpace(text[len(head):]) {
		return strings.TrimSpace(head)
	}
	if i := strings.LastIndexFunc(head, isSpace); i > 0 {
		return strings.TrimSpace(head[:i])
	}
	return ""
}

// splitText cuts text into parts of at most limit characters (runes), at
// sentence ends where possible, else at spaces, else anywhere: every
// character of text except whitespace at the cuts is kept, in order.
func splitText(text string, limit int) []string {
	text = strings.TrimSpace(text)
	if utf8.RuneCountInString(text) <= limit {
		return []string{text}
	}
	var parts []string
	var cur strings.Builder
	curLen := 0
	flush := func() {
		if p := strings.TrimSpace(cur.String()); p != "" {
			parts = append(parts, p)
		}
		cur.Reset()
		curLen = 0
	}
	add := func(piece string) {
		n := utf8.RuneCountInString(piece)
		if curLen+n > limit {
			flush()
		}
		cur.WriteString(piece)
		curLen += n
	}
	for _, sentence := range sentences(text) {
		if utf8.RuneCountInString(sentence) <= limit {
			add(sentence)
			continue
		}
		for _, word := range words(sentence) {
			for utf8.RuneCountInString(word) > limit { // no space to cut at
				cut := byteIndexOfRune(word, limit-curLen)
				if curLen >= limit {
					flush()
					cut = byteIndexOfRune(word, limit)
				}
				add(word[:cut])
				word = word[cut:]
			}
			add(word)
		}
	}
	flush()
	return parts
}

// sentences splits after sentence-ending punctuation followed by space,
// and after line breaks; the pieces keep their trailing whitespace.
func sentences(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		next := i + size
		if r == '\n' || strings.ContainsRune(".!?…。！？", r) && (next == len(text) || startsWithSpace(text[next:])) {
			for next < len(text) && startsWithSpace(text[next:]) { // take the following whitespace along
				_, size := utf8.DecodeRuneInString(text[next:])
				next += size
			}
			out = append(out, text[start:next])
			start = next
		}
		i = next
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

func startsWithSpace(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsSpace(r)
}

// words splits after each run of whitespace, keeping it with the word.
func words(s string) []string {
	var out []string
	start := 0
	inSpace := false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if inSpace && !space {
			out = append(out, s[start:i])
			start = i
		}
		inSpace = space
	}
	return append(out, s[start:])
}

// byteIndexOfRune is the byte offset of the n-th rune of s (len(s) if
// shorter).
func byteIndexOfRune(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}
