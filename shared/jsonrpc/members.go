package jsonrpc

import "encoding/json"

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
