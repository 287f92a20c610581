package telegram

import (
	"strings"
	"testing"
	"unicode/utf16"
)

// markdownCases are Claude-shaped replies and the HTML sent for them; they
// also seed FuzzMarkdownToHTML.
var markdownCases = []struct{ in, want string }{
	{"plain <tag> & more", "plain &lt;tag&gt; &amp; more"},
	{"**bold** and *it* and _also_", "<b>bold</b> and <i>it</i> and <i>also</i>"},
	{"*a* *b*", "<i>a</i> <i>b</i>"},
	{"snake_case_name and 2*3*4", "snake_case_name and 2*3*4"},
	{"use `x < y` here", "use <code>x &lt; y</code> here"},
	{"`**not bold**`", "<code>**not bold**</code>"},
	{"```go\nif a < b {}\n```", `<pre><code class="language-go">if a &lt; b {}` + "\n</code></pre>"},
	{"```\nraw *x*\n```", "<pre>raw *x*\n</pre>"},
	{"[docs](https://example.com/a?b=1&c=2)", `<a href="https://example.com/a?b=1&amp;c=2">docs</a>`},
	{"[evil](javascript:alert(1))", "[evil](javascript:alert(1))"},
	{`[q](https://x.y/"onclick=)`, `<a href="https://x.y/&#34;onclick=">q</a>`},
	{"unbalanced **bold", "unbalanced **bold"},
	// Emphasis markers inside a URL are part of it.
	{"The plan is [in the drafts](https://example.com/docs/_drafts_/plan.md).",
		`The plan is <a href="https://example.com/docs/_drafts_/plan.md">in the drafts</a>.`},
	{"[Search](https://www.google.com/search?q=*lighthouse*) for more.",
		`<a href="https://www.google.com/search?q=*lighthouse*">Search</a> for more.`},
	{"[a](https://example.com/**x**) and **b**", `<a href="https://example.com/**x**">a</a> and <b>b</b>`},
	{"See https://example.com/docs/_drafts_/plan.md for *the plan*.",
		"See https://example.com/docs/_drafts_/plan.md for <i>the plan</i>."},
	{"_see [the notes](https://example.com/notes_)_", `<i>see <a href="https://example.com/notes_">the notes</a></i>`},
	{"*read https://example.com/a_b_ now*", "<i>read https://example.com/a_b_ now</i>"},
	{"*see https://example.com*", "<i>see https://example.com</i>"},
	{"[**Bold** link](https://example.com)", `<a href="https://example.com"><b>Bold</b> link</a>`},
	// Markers that cross stay text: tags must nest.
	{"**Note _this** one_", "<b>Note _this</b> one_"},
}

func TestMarkdownToHTML(t *testing.T) {
	for _, tc := range markdownCases {
		if got := markdownToHTML(tc.in); got != tc.want {
			t.Errorf("markdownToHTML(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func units(s string) int { return len(utf16.Encode([]rune(s))) }

func TestSplitMessage(t *testing.T) {
	para := strings.Repeat("a", 30)
	for _, tc := range []struct {
		name, in string
		limit    int
		want     []string
	}{
		{"fits", "short", 10, []string{"short"}},
		{"paragraph", para + "\n\nb\nc d", 36, []string{para, "b\nc d"}},
		{"line", "one line\ntwo line\nthree", 18, []string{"one line\ntwo line", "three"}},
		{"word", "alpha beta gamma", 11, []string{"alpha beta", "gamma"}},
		{"hard", "abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"utf16", "😀😀😀", 4, []string{"😀😀", "😀"}},
	} {
		got := splitMessage(tc.in, tc.limit)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	long := strings.Repeat("word ", 3000) + "\n\n" + strings.Repeat("x", 5000)
	parts := splitMessage(long, MaxMessageLen)
	total := 0
	for _, p := range parts {
		if units(p) > MaxMessageLen || p == "" {
			t.Fatalf("part of %d units", units(p))
		}
		total += len(strings.ReplaceAll(p, " ", ""))
	}
	if want := len(strings.ReplaceAll(strings.ReplaceAll(long, " ", ""), "\n", "")); total != want {
		t.Fatalf("split lost text: %d of %d characters", total, want)
	}
}
