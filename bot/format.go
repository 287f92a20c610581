package bot

import (
	"html"
	"regexp"
	"strings"
	"unicode/utf16"
)

// maxMessageLen is Telegram's limit for one message, in UTF-16 code units.
const maxMessageLen = 4096

// splitMessage cuts text into parts of at most limit UTF-16 units, at the
// last paragraph break that fits, else the last line break, else the last
// space, else anywhere (between runes).
func splitMessage(text string, limit int) []string {
	var parts []string
	for {
		text = strings.TrimSpace(text)
		if text == "" {
			return parts
		}
		fit := prefixWithin(text, limit)
		if fit == len(text) {
			return append(parts, text)
		}
		cut := fit
		for _, sep := range []string{"\n\n", "\n", " "} {
			if i := strings.LastIndex(text[:fit], sep); i > 0 {
				cut = i
				break
			}
		}
		parts = append(parts, text[:cut])
		text = text[cut:]
	}
}

// prefixWithin is the byte length of text's longest prefix of whole runes
// that is at most limit UTF-16 units long.
func prefixWithin(text string, limit int) int {
	units := 0
	for i, r := range text {
		units += utf16.RuneLen(r)
		if units > limit {
			return i
		}
	}
	return len(text)
}

var (
	fence      = regexp.MustCompile("(?s)```([A-Za-z0-9_+-]*)\n?(.*?)```")
	inlineCode = regexp.MustCompile("`([^`\n]+)`")
	link       = regexp.MustCompile(`\[([^\]\n]+)\]\((https?://[^\s)]+)\)`)
	bold       = regexp.MustCompile(`\*\*([^*\n]+?)\*\*`)
	starItalic = regexp.MustCompile(`(^|[^\w*])\*([^*\s](?:[^*\n]*?[^*\s])?)\*($|[^\w*])`)
	underItal  = regexp.MustCompile(`(^|[^\w])_([^_\s](?:[^_\n]*?[^_\s])?)_($|[^\w])`)
)

// markdownToHTML converts the Markdown Claude writes to Telegram's HTML:
// everything is escaped, then only fenced and inline code, links to http(s)
// URLs, **bold**, *italic* and _italic_ become tags. Anything else stays
// literal text, so the result never carries markup Claude did not mean.
func markdownToHTML(md string) string {
	var out strings.Builder
	last := 0
	for _, m := range fence.FindAllStringSubmatchIndex(md, -1) {
		out.WriteString(inlineToHTML(md[last:m[0]]))
		lang, code := md[m[2]:m[3]], md[m[4]:m[5]]
		if lang != "" {
			out.WriteString(`<pre><code class="language-` + lang + `">` + html.EscapeString(code) + "</code></pre>")
		} else {
			out.WriteString("<pre>" + html.EscapeString(code) + "</pre>")
		}
		last = m[1]
	}
	out.WriteString(inlineToHTML(md[last:]))
	return out.String()
}

// inlineToHTML converts text outside code fences; inline code spans are
// kept out of the other conversions.
func inlineToHTML(s string) string {
	var out strings.Builder
	last := 0
	for _, m := range inlineCode.FindAllStringSubmatchIndex(s, -1) {
		out.WriteString(emphasisToHTML(s[last:m[0]]))
		out.WriteString("<code>" + html.EscapeString(s[m[2]:m[3]]) + "</code>")
		last = m[1]
	}
	out.WriteString(emphasisToHTML(s[last:]))
	return out.String()
}

func emphasisToHTML(s string) string {
	s = html.EscapeString(s)
	s = link.ReplaceAllString(s, `<a href="$2">$1</a>`)
	s = bold.ReplaceAllString(s, "<b>$1</b>")
	// Twice: a match consumes the boundary character the next one needs
	// ("*a* *b*").
	for range 2 {
		s = starItalic.ReplaceAllString(s, "$1<i>$2</i>$3")
		s = underItal.ReplaceAllString(s, "$1<i>$2</i>$3")
	}
	return s
}
