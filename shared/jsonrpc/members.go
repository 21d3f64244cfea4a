package jsonrpc

import (
	"bytes"
	"encoding/json"
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
	// One pass over the bytes, with the keys of each open object on a
	// stack: linear in the size, whatever the depth. The keys of the open
	// objects are in one list (keys), each object's from its start; they
	// are the bytes of v where no escape needs decoding, so that nothing
	// is allocated for the usual small objects.
	type object struct {
		start int                 // its keys are keys[start:], while few
		seen  map[string]struct{} // past a few keys, a set of folded keys
		arr   bool                // an array: no keys
	}
	var stackRoom [8]object
	var keyRoom [32][]byte
	stack, keys := stackRoom[:0], keyRoom[:0]
	for i := 0; i < len(v); {
		switch v[i] {
		case '{', '[':
			stack = append(stack, object{start: len(keys), arr: v[i] == '['})
			i++
		case '}', ']':
			if n := len(stack); n > 0 {
				keys = keys[:stack[n-1].start]
				stack = stack[:n-1]
			}
			i++
		case '"':
			end := skipString(v, i)
			if n := len(stack); n > 0 && !stack[n-1].arr {
				if j := skipSpace(v, end); j < len(v) && v[j] == ':' { // a key
					k := v[i+1 : end-1]
					if bytes.IndexByte(k, '\\') >= 0 {
						d, err := decodeKey(v[i:end])
						if err != nil {
							return "", false // not valid JSON: not ours to judge
						}
						k = []byte(d)
					}
					o := &stack[n-1]
					switch {
					case o.seen != nil:
						f := Fold(string(k))
						if _, ok := o.seen[f]; ok {
							return string(k), true
						}
						o.seen[f] = struct{}{}
					case containsFold(keys[o.start:], k):
						return string(k), true
					case len(keys)-o.start == 16:
						o.seen = make(map[string]struct{}, 32)
						for _, s := range keys[o.start:] {
							o.seen[Fold(string(s))] = struct{}{}
						}
						o.seen[Fold(string(k))] = struct{}{}
						keys = keys[:o.start]
					default:
						keys = append(keys, k)
					}
				}
			}
			i = end
		default:
			i++
		}
	}
	return "", false
}

// containsFold reports whether keys holds one equal to k under simple
// case folding, invalid UTF-8 read as U+FFFD (bytes.EqualFold: the
// equality Fold's representatives stand for).
func containsFold(keys [][]byte, k []byte) bool {
	for _, s := range keys {
		if bytes.EqualFold(s, k) {
			return true
		}
	}
	return false
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
