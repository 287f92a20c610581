package brain

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
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
// the order of brains, gets the error (HeldFirst puts the brain that has
// a token first). Brains without a token are skipped.
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
			errs = append(errs, SameToken(b, first))
			continue
		}
		owner[token] = b
	}
	return errs.err()
}

// SameToken is the problem of brain b, whose token is holder's: holder
// keeps it (the first of two brains in CheckTokens, the one running at
// run time).
func SameToken(b, holder *Brain) *Error {
	return b.tokenError("%s holds the same token as %s of %s; Telegram allows one bot per token",
		b.tokenName(), holder.tokenName(), holder.Path)
}

// tokenName names where the brain's token comes from, without showing it.
func (b *Brain) tokenName() string {
	switch t := b.Telegram; {
	case t.TokenEnv != "":
		return t.TokenEnv
	case t.TokenFile != "":
		return "token file " + t.TokenFile
	}
	return "the inline token"
}

// tokenField is the field that names the brain's token source.
func (b *Brain) tokenField() string {
	switch t := b.Telegram; {
	case t.TokenEnv != "":
		return "telegram.token_env"
	case t.TokenFile != "":
		return "telegram.token_file"
	}
	return "telegram.token"
}

// tokenError is a problem with the brain's token, on the line that names it.
func (b *Brain) tokenError(format string, args ...any) *Error {
	return b.Problem(b.tokenField(), format, args...)
}

// CredentialsDirectory is the variable systemd sets to the folder of a
// unit's credentials (LoadCredential=); a token_file may start with it.
const CredentialsDirectory = "CREDENTIALS_DIRECTORY"

// credentialsPrefixes are how a token_file may name that folder.
var credentialsPrefixes = []string{"$" + CredentialsDirectory + "/", "${" + CredentialsDirectory + "}/"}

// maxTokenFile bounds what is read of a token file: a token is under 50
// bytes, so a bigger file is the wrong file.
const maxTokenFile = 1 << 10

// tokenFilePath is where the brain's token file is: $CREDENTIALS_DIRECTORY
// expanded by lookup, a relative path taken from the brain file's folder.
func (b *Brain) tokenFilePath(lookup func(string) (string, bool)) (string, error) {
	name := b.Telegram.TokenFile
	for _, prefix := range credentialsPrefixes {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		dir, _ := lookup(CredentialsDirectory)
		if dir == "" {
			return "", &NoTokenError{Source: "token file " + name, Field: "telegram.token_file", File: b.Path,
				Reason: "names $" + CredentialsDirectory + ", which is not set (systemd sets it for a unit with LoadCredential=)",
				Short:  "$" + CredentialsDirectory + " not set",
				Fix:    "give the service the token with LoadCredential=, or name the token file by its path"}
		}
		return filepath.Join(dir, rest), nil
	}
	if filepath.IsAbs(name) {
		return name, nil
	}
	return filepath.Join(filepath.Dir(b.Path), name), nil
}

// readTokenFile reads the token of the brain's token_file. A missing or
// empty file is a NoTokenError; the other errors name the file too.
func (b *Brain) readTokenFile(lookup func(string) (string, bool)) (string, error) {
	path, err := b.tokenFilePath(lookup)
	if err != nil {
		return "", err
	}
	missing := func(reason string) error {
		return &NoTokenError{Source: "token file " + path, Field: "telegram.token_file", File: b.Path,
			Reason: reason, Short: "token file " + path + " " + reason,
			Fix: "write the token to " + path + ", then save the brain file again: no restart needed"}
	}
	// Without O_NONBLOCK, opening a named pipe waits for a writer: check,
	// a reload and a stop would hang on it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", missing("does not exist")
	case err != nil:
		return "", fmt.Errorf("telegram.token_file in %s: %w", b.Path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	switch {
	case err != nil:
		return "", fmt.Errorf("telegram.token_file in %s: %w", b.Path, err)
	case !info.Mode().IsRegular():
		return "", fmt.Errorf("telegram.token_file in %s: %s is %s, not a regular file", b.Path, path, fileKind(info.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("telegram.token_file in %s: %w", b.Path, err) // a *PathError: it names the file
	case len(data) > maxTokenFile:
		return "", fmt.Errorf("telegram.token_file in %s: %s holds more than %d bytes: not a token file", b.Path, path, maxTokenFile)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", missing("is empty")
	}
	return token, nil
}

// fileKind names what a file that is not a regular file is.
func fileKind(mode fs.FileMode) string {
	switch {
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// TokenFileWarning is a warning for the admin when the brain's token file
// may be read by every user of the machine (a token is the bot: whoever
// reads it can answer as the bot, or stop it), and "" otherwise or when
// the brain has no token file.
func (b *Brain) TokenFileWarning(lookup func(string) (string, bool)) string {
	if b.Telegram.TokenFile == "" {
		return ""
	}
	path, err := b.tokenFilePath(lookup)
	if err != nil {
		return ""
	}
	info, err := os.Stat(path)
	if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o004 == 0 {
		return "" // ResolveToken reports what is wrong with the file
	}
	return fmt.Sprintf("token file %s is readable by every user of this machine (mode %#o): chmod o-r %s", path, info.Mode().Perm(), path)
}

// Problem is a problem of the brain found after it was parsed (a conflict
// with another file, a server that does not start), located at the field
// path as the file has it: "tools.allow[1]", "mcp_servers.clock".
func (b *Brain) Problem(path, format string, args ...any) *Error {
	return &Error{File: b.Path, Line: b.lines.line(path), Field: path, Msg: fmt.Sprintf(format, args...)}
}
