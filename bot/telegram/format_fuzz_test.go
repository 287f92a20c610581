package telegram

import (
	"errors"
	"fmt"
	"html"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzMarkdownToHTML checks that whatever Claude writes, the HTML sent to
// Telegram is HTML Telegram accepts (see checkTelegramHTML): a reply that
// fails to parse is sent again as plain text, losing its formatting.
// Inputs the fuzzer found are kept in testdata/fuzz/FuzzMarkdownToHTML.
func FuzzMarkdownToHTML(f *testing.F) {
	for _, tc := range markdownCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, md string) {
		if !utf8.ValidString(md) {
			t.Skip("Claude's text comes through JSON: always valid UTF-8")
		}
		out := markdownToHTML(md)
		if err := checkTelegramHTML(out); err != nil {
			t.Fatalf("markdownToHTML(%q) = %q: %v", md, out, err)
		}
	})
}

func TestMarkdownCasesAreTelegramHTML(t *testing.T) {
	for _, tc := range markdownCases {
		if err := checkTelegramHTML(tc.want); err != nil {
			t.Errorf("%q: %v", tc.want, err)
		}
	}
}

func TestCheckTelegramHTMLRejects(t *testing.T) {
	for _, bad := range []string{
		"a < b", "a > b", "AT&T", "&nbsp;", "<b>x", "x</b>", "<b><i>x</b></i>",
		"<u>x</u>", `<a href=x>y</a>`, `<a href="javascript:x">y</a>`, `<a href="https://x/<i>">y</a>`,
		`<a href="https://x">y<a href="https://z">w</a></a>`, "<code><b>x</b></code>", "<pre><i>x</i></pre>",
		`<code class="language-go">x</code>`, `<pre><code class="x">y</code></pre>`, "<b >x</b>",
	} {
		if err := checkTelegramHTML(bad); err == nil {
			t.Errorf("checkTelegramHTML(%q) accepted it", bad)
		}
	}
}

var (
	// entity is what Telegram decodes after &: the named entities it
	// knows and numeric ones.
	entity   = regexp.MustCompile(`^&(lt|gt|amp|quot|#[0-9]+|#x[0-9a-fA-F]+);`)
	openHref = regexp.MustCompile(`^a href="([^"<>]*)"$`)
	openLang = regexp.MustCompile(`^code class="language-[A-Za-z0-9_+-]+"$`)
)

// checkTelegramHTML reports why Telegram's HTML parse mode would refuse s,
// or change what it shows: only the tags markdownToHTML means to write
// (b, i, code, pre, a with an http(s) href, code with a language class
// directly in pre), properly nested, nothing inside code or pre but that,
// no link in a link, and every <, > and & in text or attributes escaped.
func checkTelegramHTML(s string) error {
	var open []string
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			end := strings.IndexByte(s[i:], '>')
			if end < 0 {
				return fmt.Errorf("unescaped < at %d", i)
			}
			var err error
			if open, err = applyTag(open, s[i+1:i+end]); err != nil {
				return fmt.Errorf("at %d: %w", i, err)
			}
			i += end + 1
		case '>':
			return fmt.Errorf("unescaped > at %d", i)
		case '&':
			m := entity.FindString(s[i:])
			if m == "" {
				return fmt.Errorf("& at %d starts no entity", i)
			}
			i += len(m)
		default:
			i++
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("unclosed %v", open)
	}
	return nil
}

// applyTag checks one tag against the open ones and returns them updated.
func applyTag(open []string, tag string) ([]string, error) {
	if name, closing := strings.CutPrefix(tag, "/"); closing {
		if len(open) == 0 || open[len(open)-1] != name {
			return nil, fmt.Errorf("</%s> closes %v", name, open)
		}
		return open[:len(open)-1], nil
	}
	name, err := tagName(tag)
	if err != nil {
		return nil, err
	}
	parent := ""
	if len(open) > 0 {
		parent = open[len(open)-1]
	}
	switch {
	case parent == "code" || parent == "pre" && name != "code":
		return nil, fmt.Errorf("<%s> inside <%s>", tag, parent)
	case name == "a" && slices.Contains(open, "a"):
		return nil, errors.New("a link inside a link")
	case strings.HasPrefix(tag, "code ") && parent != "pre":
		return nil, errors.New("a language class outside pre")
	}
	return append(open, name), nil
}

// tagName checks an opening tag's attributes and returns its name.
func tagName(tag string) (string, error) {
	switch tag {
	case "b", "i", "code", "pre":
		return tag, nil
	}
	if openLang.MatchString(tag) {
		return "code", nil
	}
	m := openHref.FindStringSubmatch(tag)
	if m == nil {
		return "", fmt.Errorf("tag <%s> is not one markdownToHTML writes", tag)
	}
	if err := checkTelegramHTML(m[1]); err != nil {
		return "", fmt.Errorf("href: %w", err)
	}
	if href := html.UnescapeString(m[1]); !strings.HasPrefix(href, "https://") && !strings.HasPrefix(href, "http://") {
		return "", fmt.Errorf("href %q is not an http(s) URL", href)
	}
	return "a", nil
}
