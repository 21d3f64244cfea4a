package jsonrpc

import (
	"encoding/json"
	"slices"
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
// v (nested objects and arrays included), compared after decoding escapes,
// and whether there is one. Parsers disagree on which duplicate counts (Go's
// encoding/json takes the last, others the first), so a message with one
// could be checked as one thing and run as another. v must be valid JSON.
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
			switch {
			case seen != nil:
				if _, ok := seen[k]; ok {
					dup, found = k, true
					return
				}
				seen[k] = struct{}{}
			case slices.Contains(keys, k):
				dup, found = k, true
				return
			case len(keys) == 16:
				seen = make(map[string]struct{}, 32)
				for _, s := range keys {
					seen[s] = struct{}{}
				}
				seen[k] = struct{}{}
			default:
				keys = append(keys, k)
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
