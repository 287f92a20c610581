package brain

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// tokenForm describes a BotFather token to authors and admins.
const tokenForm = "BotFather token (<bot id>:<35 letters, digits, _ or ->)"

// ErrMalformedToken is wrapped by ValidToken's errors.
var ErrMalformedToken = errors.New("not a " + tokenForm)

// The parts of a BotFather token, "7000000001:AAE5kq0Lx-...": the bot's
// numeric id, a colon, and 35 characters of the URL-safe base64 alphabet.
var (
	tokenBotID  = regexp.MustCompile(`^[0-9]+$`)
	tokenSecret = regexp.MustCompile(`^[A-Za-z0-9_-]*$`)
)

const tokenSecretLen = 35

// ValidToken reports whether token has the form of a BotFather token, and
// if not, what is wrong with it. The error never quotes the token: it ends
// up in logs and CI output.
func ValidToken(token string) error {
	if problem := tokenProblem(token); problem != "" {
		return fmt.Errorf("%w: %s", ErrMalformedToken, problem)
	}
	return nil
}

func tokenProblem(token string) string {
	id, secret, found := strings.Cut(token, ":")
	switch {
	case token == "":
		return "it is empty"
	case strings.ContainsAny(token, " \t\r\n"):
		// Most often a newline from `$(cat token.txt)` inside quotes, or
		// a placeholder sentence left in the file.
		return "it holds a space or line break"
	case !found:
		return "it has no colon"
	case !tokenBotID.MatchString(id):
		return "the part before the colon must be the bot's numeric id"
	case !tokenSecret.MatchString(secret):
		return "the part after the colon may hold only letters, digits, _ and -"
	case len(secret) != tokenSecretLen:
		return fmt.Sprintf("the part after the colon has %d characters, want %d", len(secret), tokenSecretLen)
	}
	return ""
}

// ResolveTokens resolves the token of each brain (see Brain.ResolveToken)
// and returns them by brain ID. Brains whose token variable is unset or
// empty are left out: `brainbot run` skips them.
func ResolveTokens(brains []*Brain, lookup func(string) (string, bool)) map[string]string {
	tokens := make(map[string]string, len(brains))
	for _, b := range brains {
		if token, err := b.ResolveToken(lookup); err == nil {
			tokens[b.ID] = token
		}
	}
	return tokens
}

// CheckTokens finds the problems that only resolved tokens show, tokens
// being brain ID → token as ResolveTokens returns them: a token variable
// that holds no BotFather token, and two brains polling one token through
// different variables (LoadDir catches the same variable, or the same
// inline token, without the environment). The second brain of a pair, in
// the order of brains, gets the error. Brains without a token are skipped.
func CheckTokens(brains []*Brain, tokens map[string]string) error {
	var errs Errors
	owner := make(map[string]*Brain, len(tokens))
	for _, b := range brains {
		token, ok := tokens[b.ID]
		if !ok {
			continue
		}
		if problem := tokenProblem(token); problem != "" {
			errs = append(errs, b.tokenError("%s does not hold a %s: %s", b.tokenName(), tokenForm, problem))
			continue
		}
		if first, taken := owner[token]; taken {
			errs = append(errs, b.tokenError("%s holds the same token as %s of %s; Telegram allows one bot per token",
				b.tokenName(), first.tokenName(), first.Path))
			continue
		}
		owner[token] = b
	}
	return errs.err()
}

// tokenName names where the brain's token comes from, without showing it.
func (b *Brain) tokenName() string {
	if b.Telegram.TokenEnv != "" {
		return b.Telegram.TokenEnv
	}
	return "the inline token"
}

// tokenError is a problem with the brain's token, on the line that names it.
func (b *Brain) tokenError(format string, args ...any) *Error {
	field := "telegram.token"
	if b.Telegram.TokenEnv != "" {
		field = "telegram.token_env"
	}
	return b.Problem(field, format, args...)
}

// Problem is a problem of the brain found after it was parsed (a conflict
// with another file, a server that does not start), located at the field
// path as the file has it: "tools.allow[1]", "mcp_servers.clock".
func (b *Brain) Problem(path, format string, args ...any) *Error {
	return &Error{File: b.Path, Line: b.lines.line(path), Field: path, Msg: fmt.Sprintf(format, args...)}
}
