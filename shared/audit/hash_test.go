package audit

import (
	"bytes"
	"encoding/json"
	"testing"
)

// reference is the straightforward canonical form: decode with numbers
// kept as written, re-encode (sorted keys, HTML characters as they are).
// Canonical must agree with it byte for byte: approvals and the
// idempotency ledger store these hashes.
func reference(raw json.RawMessage) ([]byte, bool) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if e.Encode(v) != nil {
		return nil, false
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), true
}

var canonicalSeeds = []string{
	`{}`, `[]`, `null`, `true`, `0`, `-0`, `1.50`, `1E5`, `"x"`,
	`{"b":1,"a":[1,2,{"d":null,"c":"x"}]}`,
	` { "z" : { "y" : [ ] } , "a" : "" } `,
	`{"a":1,"a":2}`, `{"a":{"x":1},"b":2,"a":[3]}`,
	`{"\u00e9":"caf\u00e9","é":"café"}`,
	`{"k":"line\nbreak\ttab\u0001"}`, `{"k":"quote \" and \\ backslash"}`,
	`{"k":"<tag> & \u003c"}`, `{"k":"\u2028\u2029"}`, `{"k":"\ud83d\ude00 😀"}`,
	`{"k":"\ud800"}`, "{\"k\":\"\xff\xfe\"}", `{"":1," ":2}`,
	`[1,"two",[3,[4,{"five":5}]],true,false,null]`,
	`{"b":{"d":4,"c":3},"a":{"f":[{"h":1,"g":2}]}}`,
}

func TestCanonicalMatchesReference(t *testing.T) {
	for _, s := range canonicalSeeds {
		want, ok := reference(json.RawMessage(s))
		got, err := Canonical(json.RawMessage(s))
		if !ok {
			continue
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Canonical(%q) = %q, %v; want %q", s, got, err, want)
		}
	}
	k, err := GenerateParamsKey()
	if err != nil {
		t.Fatal(err)
	}
	if k.Hash(json.RawMessage(`{"a":1,"b":2}`)) != k.Hash(json.RawMessage(` {"b":2, "a":1}`)) {
		t.Error("key order changes the hash")
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		want, ok := reference(b)
		if !ok {
			return
		}
		got, err := Canonical(b)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Canonical(%q) = %q, %v; want %q", b, got, err, want)
		}
	})
}

func BenchmarkHashParams(b *testing.B) {
	raw := json.RawMessage(`{"to":"acct-42","amount":125.50,"memo":"invoice 2026-11","tags":["a","b"],"meta":{"k":"v","n":1}}`)
	k, err := GenerateParamsKey()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		k.Hash(raw)
	}
}
