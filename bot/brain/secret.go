package brain

import (
	"net/url"
	"slices"
	"strings"
	"unicode"
)

// A brain file is often committed, so a credential written in it where a
// ${VAR} reference belongs is refused. Which literal values count as one
// is a guess, made so that the settings a server needs (a path, a word, a
// number, a time zone, a URL without credentials) pass, and what
// credentials look like does not:
//
//   - any value, but one made with references, of a variable or header
//     whose name says it holds one (API_KEY, X-Api-Key, DB_PASSWORD,
//     Authorization...);
//   - a value with a word that starts as the credentials of well-known
//     services do (sk-..., ghp_..., xoxb-..., AKIA..., a JWT, "Bearer ...");
//   - a URL with a password, or a query parameter named like a credential;
//   - a long random-looking string: 16 letters and digits or more in a
//     row, mixed as random strings mix them.
//
// A path (/..., ./..., ../..., ~/...) is never one by its value.

// secretNameWords are the words (between _ and -) of a name that says its
// value is a credential; KEY says so only as the name's last word
// (API_KEY, not KEY_FILE).
var secretNameWords = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PASSPHRASE", "PWD", "APIKEY",
	"CREDENTIAL", "CREDENTIALS", "AUTHORIZATION", "COOKIE", "PAT"}

// secretPrefixes begin the credentials of well-known services: OpenAI and
// Anthropic (sk-), Stripe, GitHub, GitLab, Slack, AWS access keys, Google
// API keys, JWTs, bearer tokens and PEM keys.
var secretPrefixes = []string{"sk-", "sk_", "pk_live_", "rk_live_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
	"glpat-", "xoxb-", "xoxp-", "xoxa-", "xapp-", "AKIA", "AIza", "eyJ", "Bearer ", "-----BEGIN"}

// randomRun is how many letters and digits in a row a random-looking
// string has at least.
const randomRun = 16

// looksSecret reports whether the value of the env variable or header
// name, written in the brain file (literal: its ${VAR} references taken
// out), looks like a credential.
func looksSecret(name, literal string, referenced bool) bool {
	v := strings.TrimSpace(literal)
	switch {
	case v == "" || isPath(v):
		return false
	case !referenced && secretName(name):
		return true
	case strings.Contains(v, "://"):
		return urlHasCredentials(v)
	}
	return startsLikeAKey(v) || randomLooking(v)
}

// startsLikeAKey reports whether a word of v (at its start, or after a
// character that is no letter or digit) begins as a well-known key does,
// with a word of six characters or more right after the prefix.
func startsLikeAKey(v string) bool {
	for i := range len(v) {
		if i > 0 && isAlnum(rune(v[i-1])) {
			continue
		}
		for _, p := range secretPrefixes {
			if rest, ok := strings.CutPrefix(v[i:], p); ok && len(firstWord(rest)) >= 6 {
				return true
			}
		}
	}
	return false
}

func firstWord(s string) string {
	if words := strings.Fields(s); len(words) > 0 {
		return words[0]
	}
	return ""
}

func isPath(v string) bool {
	return slices.ContainsFunc([]string{"/", "./", "../", "~/"}, func(p string) bool { return strings.HasPrefix(v, p) })
}

// secretName reports whether a variable or header name says its value is
// a credential.
func secretName(name string) bool {
	words := strings.FieldsFunc(strings.ToUpper(name), func(r rune) bool { return r == '_' || r == '-' })
	if len(words) == 0 {
		return false
	}
	return words[len(words)-1] == "KEY" || slices.ContainsFunc(words, func(w string) bool { return slices.Contains(secretNameWords, w) })
}

// urlHasCredentials: a user's password, or a query parameter named like
// a credential (?api_key=..., ?token=...).
func urlHasCredentials(v string) bool {
	u, err := url.Parse(v)
	if err != nil {
		return true // not a URL after all, and not one to guess about
	}
	if _, ok := u.User.Password(); ok {
		return true
	}
	for k := range u.Query() {
		if secretName(k) || strings.EqualFold(k, "key") || strings.EqualFold(k, "sig") || strings.EqualFold(k, "signature") {
			return true
		}
	}
	return false
}

// randomLooking reports whether v has a run of randomRun letters and
// digits or more that mixes them as a random string does: it switches
// between letters and digits at least three times (a word with a number
// after it, build20240101, does not).
func randomLooking(v string) bool {
	for _, run := range strings.FieldsFunc(v, func(r rune) bool { return !isAlnum(r) }) {
		if len(run) < randomRun {
			continue
		}
		switches := 0
		for i := 1; i < len(run); i++ {
			if unicode.IsDigit(rune(run[i])) != unicode.IsDigit(rune(run[i-1])) {
				switches++
			}
		}
		if switches >= 3 {
			return true
		}
	}
	return false
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}
