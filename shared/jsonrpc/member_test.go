package jsonrpc

import (
	"encoding/json"
	"testing"
)

// FuzzMember: Member and StringMember, which compare keys and read
// strings without decoding when nothing is escaped, agree with
// encoding/json's reading of the same object (first occurrence of an
// exact, case-sensitive key).
func FuzzMember(f *testing.F) {
	for _, s := range []string{
		`{"name":"echo"}`, `{"n\u0061me":"echo"}`, `{"name":"\u0065cho"}`, `{"name":"a\"b"}`,
		"{\"name\":\"\xff\"}", `{"Name":"x","name":"y"}`, `{"name":1}`, `{"name":"x","name":"y"}`,
		`{ "name" : "spaced" }`, `{"nam":"x"}`, `{"name":""}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) || len(b) == 0 || b[0] != '{' {
			return
		}
		var want string
		found, isString := false, false
		_ = eachMember(b, func(k string, v json.RawMessage) error {
			if k == "name" && !found {
				found = true
				isString = json.Unmarshal(v, &want) == nil
			}
			return nil
		})
		got, ok := StringMember(b, "name")
		if ok != isString || got != want {
			t.Fatalf("StringMember(%q) = %q, %v; encoding/json reads %q, %v", b, got, ok, want, isString)
		}
		if (Member(b, "name") != nil) != found {
			t.Fatalf("Member(%q) found=%v, want %v", b, Member(b, "name") != nil, found)
		}
	})
}
