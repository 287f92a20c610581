package claude

import (
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner is a single-pass, validating JSON reader over one stdout line.
//
// The CLI's lines are mostly fields the driver never reads (init's tool and
// plugin lists, usage blocks, model statistics). encoding/json validates a
// whole line and then decodes it in a second pass through a generic state
// machine; this scanner validates as it skips and decodes only the few
// values the driver asks for, which makes parsing several times faster.
// It accepts exactly the documents json.Valid accepts (FuzzParseEvent checks
// that) and decodes strings the way encoding/json does.
type scanner struct {
	b     []byte
	i     int
	depth int
}

// maxDepth matches encoding/json's nesting limit, so both reject the same
// documents and a hostile line cannot exhaust the stack.
const maxDepth = 10000

// syntaxError reports where a line stopped being JSON.
type syntaxError struct {
	Offset int
	msg    string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("offset %d: %s", e.Offset, e.msg) }

func (s *scanner) fail(msg string) error { return &syntaxError{Offset: s.i, msg: msg} }

func (s *scanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value validates the value at s.i, moves past it and returns its raw bytes.
func (s *scanner) value() ([]byte, error) {
	s.skipSpace()
	start := s.i
	if s.i >= len(s.b) {
		return nil, s.fail("unexpected end of line")
	}
	var err error
	switch c := s.b[s.i]; {
	case c == '{':
		err = s.object(nil)
	case c == '[':
		err = s.array(nil)
	case c == '"':
		err = s.skipString()
	case c == 't':
		err = s.literal("true")
	case c == 'f':
		err = s.literal("false")
	case c == 'n':
		err = s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		err = s.number()
	default:
		err = s.fail(fmt.Sprintf("invalid character %q", c))
	}
	return s.b[start:s.i], err
}

// object validates the object at s.i. With a non-nil member it calls
// member(key, raw value) for every member; keys are decoded.
func (s *scanner) object(member func(key, val []byte) error) error {
	if s.depth++; s.depth > maxDepth {
		return s.fail("nesting too deep")
	}
	defer func() { s.depth-- }()
	s.i++ // '{'
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.skipSpace()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.fail("expected object key")
		}
		var key []byte
		var err error
		if member != nil {
			key, err = s.str()
		} else {
			err = s.skipString()
		}
		if err != nil {
			return err
		}
		s.skipSpace()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.fail("expected ':'")
		}
		s.i++
		val, err := s.value()
		if err != nil {
			return err
		}
		if member != nil {
			if err := member(key, val); err != nil {
				return err
			}
		}
		s.skipSpace()
		if s.i >= len(s.b) {
			return s.fail("unterminated object")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.fail("expected ',' or '}'")
		}
	}
}

// array validates the array at s.i, calling element for each raw element
// when it is non-nil.
func (s *scanner) array(element func(val []byte) error) error {
	if s.depth++; s.depth > maxDepth {
		return s.fail("nesting too deep")
	}
	defer func() { s.depth-- }()
	s.i++ // '['
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		val, err := s.value()
		if err != nil {
			return err
		}
		if element != nil {
			if err := element(val); err != nil {
				return err
			}
		}
		s.skipSpace()
		if s.i >= len(s.b) {
			return s.fail("unterminated array")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.fail("expected ',' or ']'")
		}
	}
}

func (s *scanner) literal(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return s.fail("invalid literal")
	}
	s.i += len(word)
	return nil
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// number validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return s.fail("invalid number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.fail("invalid number")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.fail("invalid number")
		}
	}
	return nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skipString validates the string at s.i without decoding it.
func (s *scanner) skipString() error {
	s.i++ // opening quote
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return nil
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return s.fail("unterminated string")
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if len(s.b)-s.i < 6 || !isHex(s.b[s.i+2]) || !isHex(s.b[s.i+3]) || !isHex(s.b[s.i+4]) || !isHex(s.b[s.i+5]) {
					return s.fail("invalid \\u escape")
				}
				s.i += 6
			default:
				return s.fail("invalid escape")
			}
		case c < 0x20:
			return s.fail("control character in string")
		default:
			s.i++
		}
	}
	return s.fail("unterminated string")
}

// str validates and decodes the string at s.i. Without escapes or
// non-ASCII bytes the result aliases the line.
func (s *scanner) str() ([]byte, error) {
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		c := s.b[j]
		if c == '"' {
			s.i = j + 1
			return s.b[start:j], nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
	}
	if err := s.skipString(); err != nil {
		return nil, err
	}
	return unescape(s.b[start : s.i-1]), nil
}

// unescape decodes the body of a valid JSON string exactly as encoding/json
// does, including its replacement of invalid UTF-8 and lone surrogates
// with U+FFFD.
func unescape(body []byte) []byte {
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		c := body[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(body[i:])
			out = utf8.AppendRune(out, r) // RuneError for invalid bytes
			i += size
			continue
		}
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch e := body[i+1]; e {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(body[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(body) && body[i] == '\\' && body[i+1] == 'u' {
					if pair := utf16.DecodeRune(r, hex4(body[i+2:])); pair != utf8.RuneError {
						out = utf8.AppendRune(out, pair)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, e)
		}
		i += 2
	}
	return out
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

var errNotObject = errors.New("line is not a JSON object")

// members validates that raw is exactly one JSON object (surrounding white
// space allowed) and calls member for each of its members.
func members(raw []byte, member func(key, val []byte) error) error {
	s := scanner{b: raw}
	s.skipSpace()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return errNotObject
	}
	if err := s.object(member); err != nil {
		return err
	}
	s.skipSpace()
	if s.i != len(s.b) {
		return s.fail("data after the object")
	}
	return nil
}

// elements calls element for each element of the already validated array
// raw; it does nothing when raw is not an array.
func elements(raw []byte, element func(val []byte) error) error {
	if len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	s := scanner{b: raw}
	return s.array(element)
}

// stringValue decodes an already validated raw value; ok is false when it
// is not a string (null included).
func stringValue(raw []byte) (v string, ok bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	s := scanner{b: raw}
	b, err := s.str()
	if err != nil {
		return "", false
	}
	return string(b), true
}
