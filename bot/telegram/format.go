package telegram

import (
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
)

// MaxMessageLen is Telegram's limit for one message, in UTF-16 code units.
const MaxMessageLen = 4096

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
	// bareURL is a URL in running text (Telegram links it by itself); a
	// sentence's punctuation or a closing * or _ after it is not part of it.
	bareURL    = regexp.MustCompile(`https?://[^\s<]*[^\s<*_.,;:!?)]`)
	bold       = regexp.MustCompile(`\*\*([^*\n]+?)\*\*`)
	starItalic = regexp.MustCompile(`(^|[^\w*])\*([^*\s](?:[^*\n]*?[^*\s])?)\*($|[^\w*])`)
	underItal  = regexp.MustCompile(`(^|[^\w])_([^_\s](?:[^_\n]*?[^_\s])?)_($|[^\w])`)
	// heldPiece is a placeholder of pieces.hold: escaped text has no "<".
	heldPiece = regexp.MustCompile(`<(\d+)>`)
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

// emphasisToHTML escapes s and converts its links and emphasis.
func emphasisToHTML(s string) string {
	var p pieces
	return p.restore(p.convert(html.EscapeString(s)))
}

// pieces holds the converted parts of a text while the rest is converted.
// Each conversion replaces what it matched by a placeholder, so that no
// later pattern looks inside it: a * or _ in a URL never becomes markup,
// and every tag pair encloses whole pieces, so tags always nest properly.
type pieces []string

func (p *pieces) hold(converted string) string {
	*p = append(*p, converted)
	return fmt.Sprintf("<%d>", len(*p)-1)
}

// restore puts the held pieces back in place of their placeholders.
func (p *pieces) restore(s string) string {
	return heldPiece.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.Atoi(m[1 : len(m)-1]) // the pattern admits digits only
		return p.restore((*p)[n])
	})
}

// convert converts escaped text: links to http(s) URLs, then bare URLs
// (kept as they are), **bold**, *italic* and _italic_, each with the text
// it encloses converted in turn.
func (p *pieces) convert(s string) string {
	s = link.ReplaceAllStringFunc(s, func(m string) string {
		sub := link.FindStringSubmatch(m)
		return p.hold(`<a href="` + sub[2] + `">` + p.convert(sub[1]) + "</a>")
	})
	s = bareURL.ReplaceAllStringFunc(s, p.hold)
	s = bold.ReplaceAllStringFunc(s, func(m string) string {
		return p.hold("<b>" + p.convert(bold.FindStringSubmatch(m)[1]) + "</b>")
	})
	// Twice: a match consumes the boundary character the next one needs
	// ("*a* *b*").
	for range 2 {
		for _, italic := range []*regexp.Regexp{starItalic, underItal} {
			s = italic.ReplaceAllStringFunc(s, func(m string) string {
				sub := italic.FindStringSubmatch(m)
				return sub[1] + p.hold("<i>"+p.convert(sub[2])+"</i>") + sub[3]
			})
		}
	}
	return s
}
