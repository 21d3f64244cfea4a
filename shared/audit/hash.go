package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sort"
	"unicode/utf8"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
)

// Canonical returns raw JSON in canonical form: object keys sorted (byte
// order; of duplicated keys the last wins), no insignificant whitespace,
// strings escaped as encoding/json writes them (HTML characters as they
// are), numbers as written. Two params that differ only in key order,
// spacing or string escaping have the same canonical form. It walks the
// bytes once, without decoding into Go values: it runs on every call.
func Canonical(raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return []byte("null"), nil
	}
	if !json.Valid(raw) {
		return nil, errors.New("audit: params are not valid JSON")
	}
	return appendCanonical(make([]byte, 0, len(raw)), raw), nil
}

type member struct {
	key string
	val json.RawMessage
}

func appendCanonical(dst []byte, v json.RawMessage) []byte {
	switch v[0] {
	case '{':
		var ms []member
		jsonrpc.Members(v, func(k string, val json.RawMessage) { ms = append(ms, member{validUTF8(k), val}) })
		sort.SliceStable(ms, func(i, j int) bool { return ms[i].key < ms[j].key })
		dst = append(dst, '{')
		first := true
		for i := range ms {
			if i+1 < len(ms) && ms[i+1].key == ms[i].key {
				continue // a later duplicate wins
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendString(dst, ms[i].key)
			dst = append(dst, ':')
			dst = appendCanonical(dst, ms[i].val)
		}
		return append(dst, '}')
	case '[':
		dst = append(dst, '[')
		first := true
		jsonrpc.Elements(v, func(e json.RawMessage) {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendCanonical(dst, e)
		})
		return append(dst, ']')
	case '"':
		if plain(v[1 : len(v)-1]) {
			return append(dst, v...)
		}
		var s string
		_ = json.Unmarshal(v, &s)
		return appendString(dst, s)
	default: // a number as written, true, false, null
		return append(dst, v...)
	}
}

// plain reports whether s (string contents, unescaped or not) is written by
// encoding/json exactly as it is: no escapes, no control characters, valid
// UTF-8, no U+2028 or U+2029.
func plain(s []byte) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '\\' || c == '"' {
			return false
		}
		if c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xa8 || s[i+2] == 0xa9) {
			return false
		}
	}
	return utf8.Valid(s)
}

// validUTF8 replaces each invalid UTF-8 byte of s with U+FFFD, as
// encoding/json's decoder does (object keys reach here undecoded).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b []byte
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return string(b)
}

// appendString writes s (valid UTF-8) as encoding/json does with HTML
// escaping off.
func appendString(dst []byte, s string) []byte {
	if plain([]byte(s)) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	_ = e.Encode(s)
	return append(dst, bytes.TrimRight(buf.Bytes(), "\n")...)
}

// PolicyHashNone is the policy_hash of the empty policy set, the set in
// force when there is none: the gateway's until it has a policy engine,
// and `aegis wrap`'s without --policy. It is PolicyHash(nil), the SHA-256
// of zero bytes. It is the only hash of the empty set.
const PolicyHashNone = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// PolicyHash is a record's policy_hash for a policy set whose canonical
// form (its owner defines it; wrap's is in docs/wrap.md) is canon: the hex
// SHA-256 of canon. A policy set is configuration, not a caller's data,
// so it is not keyed.
func PolicyHash(canon []byte) string { return hashHex(canon) }

// IsHash reports whether s is in the format of policy_hash: 64 lower-case
// hex digits, no prefix. (params_hash is keyed: IsParamsHash.)
func IsHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
