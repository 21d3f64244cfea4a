package jsonrpc

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// CallMembers are the members of a tools/call's params that a reader acts
// on: the gateway reads name, arguments, server and _meta, a stdio server
// reads name, arguments and _meta. StrictCall refuses any other spelling
// of them.
var CallMembers = []string{"name", "arguments", "server", "_meta"}

// StrictCall is Strict for the params of a tools/call, with CallMembers:
// the one reading of a call's params that the gateway (shared/params) and
// `aegis wrap` (shared/wrap) both decide on.
func StrictCall(params json.RawMessage) error { return Strict(params, CallMembers...) }

// UnreadableError is why Strict refused a value; its message is written
// for a client and never echoes a value (a key, when named, is quoted and
// cut to 64 runes).
type UnreadableError struct{ Msg string }

func (e *UnreadableError) Error() string { return e.Msg }

// Strict returns an *UnreadableError when v, valid JSON, could be read
// differently by two conforming decoders, else nil. It refuses, in this
// order:
//
//   - bytes that are not UTF-8, and a string holding a lone UTF-16
//     surrogate escape (\uD800–\uDFFF not in a high+low pair): Go decodes
//     both to U+FFFD, other readers keep them (json.Valid lets both
//     through);
//   - a key that appears twice in one object anywhere in v, after
//     decoding escapes and under Unicode simple case folding (DuplicateKey):
//     decoders disagree on which one counts, and Go's encoding/json matches
//     a struct field whatever its case;
//   - when v is an object, a member whose key folds to one of members
//     without being spelt exactly so ("Arguments", "NAME"): a reader that
//     matches without regard to case takes it for that member, one that
//     reads exactly does not.
//
// One pass over the bytes for the first rule, one for the second; no
// allocation for small objects.
func Strict(v json.RawMessage, members ...string) error {
	if msg := textual(v); msg != "" {
		return &UnreadableError{Msg: msg}
	}
	if k, dup := DuplicateKey(v); dup {
		return &UnreadableError{Msg: "duplicate key " + QuoteKey(k) + " (parsers disagree on which one counts)"}
	}
	return Misspelt(v, members...)
}

// Misspelt is Strict's last rule alone, for a reader that ran Strict on a
// whole message and checks the members it reads at each level: an
// *UnreadableError when obj is an object with a member whose key folds to
// one of members without being spelt exactly so, else nil.
func Misspelt(obj json.RawMessage, members ...string) error {
	if len(members) == 0 || len(obj) == 0 || obj[0] != '{' {
		return nil
	}
	var err error
	_ = eachMember(obj, func(k string, _ json.RawMessage) error {
		for _, m := range members {
			// strings.EqualFold is Fold(k) == Fold(m) without the copies.
			if k != m && strings.EqualFold(k, m) {
				err = &UnreadableError{Msg: QuoteKey(k) + " must be spelled " + strconv.Quote(m)}
				return err
			}
		}
		return nil
	})
	return err
}

// textual reports why b, valid JSON, holds a string that has no single
// reading, or "" when every string has one. In valid JSON a backslash and
// a byte over 0x7F occur only inside strings, so no string state is kept.
func textual(b []byte) string {
	if !utf8.Valid(b) {
		return "a string holds bytes that are not valid UTF-8"
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		i++ // the escaped byte; valid JSON has one
		if i >= len(b) || b[i] != 'u' {
			continue
		}
		r, ok := hex4(b, i+1)
		if !ok {
			continue // not valid JSON: not ours to judge
		}
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return lone
		case r >= 0xD800 && r <= 0xDBFF:
			if i+2 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
				return lone
			}
			lo, ok := hex4(b, i+3)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return lone
			}
			i += 6
		}
	}
	return ""
}

const lone = `a string holds a lone UTF-16 surrogate escape (\uD800 to \uDFFF not in a high+low pair), which decoders read differently`

// hex4 reads the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// QuoteKey quotes a client's key for an error message, cut to 64 runes.
func QuoteKey(k string) string {
	if r := []rune(k); len(r) > 64 {
		k = string(r[:64]) + "…"
	}
	return strconv.Quote(k)
}
