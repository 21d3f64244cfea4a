package jsonrpc

import (
	"encoding/json"
	"slices"
	"unicode"
	"unicode/utf8"
)

// Members calls fn for every member of the JSON object obj, in order and
// duplicates included, with the decoded key and the exact bytes of the value.
// obj must be valid JSON; anything but an object calls fn never.
func Members(obj json.RawMessage, fn func(key string, val json.RawMessage)) {
	if len(obj) == 0 || obj[0] != '{' {
		return
	}
	_ = eachMember(obj, func(k string, v json.RawMessage) error {
		fn(k, v)
		return nil
	})
}

// Elements calls fn for every element of the JSON array arr, in order, with
// the exact bytes of the element. arr must be valid JSON; anything but an
// array calls fn never.
func Elements(arr json.RawMessage, fn func(val json.RawMessage)) {
	if len(arr) == 0 || arr[0] != '[' {
		return
	}
	i := skipSpace(arr, 1)
	if i < len(arr) && arr[i] == ']' {
		return
	}
	for i < len(arr) {
		i = skipSpace(arr, i)
		end := skipValue(arr, i)
		fn(arr[i:end:end])
		i = skipSpace(arr, end)
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		i++ // ','
	}
}

// DuplicateKey returns a key that appears twice in one object anywhere in
// v (nested objects and arrays included), and whether there is one. Keys
// are compared as decoders compare them at their most lenient: after
// decoding escapes, with invalid UTF-8 read as U+FFFD, and without regard
// to case (Go's encoding/json matches struct fields case-insensitively,
// with Unicode folding: "Name", "NAME" and "name" are one field to it).
// Parsers disagree on which duplicate counts (Go's encoding/json takes the
// last, others the first), so a message with one could be checked as one
// thing and run as another. v must be valid JSON.
func DuplicateKey(v json.RawMessage) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	var (
		dup   string
		found bool
	)
	switch v[0] {
	case '{':
		var keys []string
		var seen map[string]struct{} // past a few keys, a set
		Members(v, func(k string, val json.RawMessage) {
			if found {
				return
			}
			f := Fold(k)
			switch {
			case seen != nil:
				if _, ok := seen[f]; ok {
					dup, found = k, true
					return
				}
				seen[f] = struct{}{}
			case slices.Contains(keys, f):
				dup, found = k, true
				return
			case len(keys) == 16:
				seen = make(map[string]struct{}, 32)
				for _, s := range keys {
					seen[s] = struct{}{}
				}
				seen[f] = struct{}{}
			default:
				keys = append(keys, f)
			}
			dup, found = DuplicateKey(val)
		})
	case '[':
		Elements(v, func(val json.RawMessage) {
			if !found {
				dup, found = DuplicateKey(val)
			}
		})
	}
	return dup, found
}

// Fold maps s to one representative of the strings equal to it under
// Unicode simple case folding (strings.EqualFold), reading invalid UTF-8
// as U+FFFD: two keys a lenient decoder would take for one fold to the
// same string. The representative of each rune is the smallest of its
// folding orbit, which for ASCII letters is the upper case.
func Fold(s string) string {
	lower := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return foldRunes(s)
		}
		lower = lower || ('a' <= c && c <= 'z')
	}
	if !lower {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return string(b)
}

func foldRunes(s string) string {
	b := make([]rune, 0, len(s))
	for _, r := range s { // invalid bytes come out as U+FFFD
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b = append(b, m)
	}
	return string(b)
}
