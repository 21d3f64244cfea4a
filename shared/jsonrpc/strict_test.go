package jsonrpc

import (
	"errors"
	"strings"
	"testing"
)

// TestStrictCall: the one reading of a tools/call's params that the
// gateway (shared/params) and aegis wrap decide on.
func TestStrictCall(t *testing.T) {
	for _, tc := range []struct{ name, params, err string }{
		{"clean", `{"name":"echo","arguments":{"path":"/tmp/x","n":[1,{"a":"é"}]},"_meta":{"aegis/step":1}}`, ""},
		{"surrogate pair", `{"name":"echo","arguments":{"x":"\ud83d\ude00"}}`, ""},
		{"other members spelt freely", `{"name":"echo","Extra":1}`, ""},
		{"arguments and a case twin", `{"name":"read","arguments":{"path":"/etc/passwd"},"ARGUMENTS":{}}`, `duplicate key "ARGUMENTS"`},
		{"escaped twin", `{"name":"read","argument\u0073":{},"arguments":{}}`, `duplicate key "arguments"`},
		{"duplicate inside arguments", `{"name":"read","arguments":{"path":"a","path":"b"}}`, `duplicate key "path"`},
		{"case twin inside arguments", `{"name":"read","arguments":{"path":"a","PATH":"b"}}`, `duplicate key "PATH"`},
		{"misspelt member", `{"name":"read","Arguments":{"path":"a"}}`, `"Arguments" must be spelled "arguments"`},
		{"misspelt name", `{"NAME":"read"}`, `"NAME" must be spelled "name"`},
		{"lone surrogate", `{"name":"read","arguments":{"x":"\udc00"}}`, "lone UTF-16 surrogate"},
		{"not UTF-8", "{\"name\":\"read\",\"arguments\":{\"x\":\"\xff\"}}", "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := StrictCall([]byte(tc.params))
			var ue *UnreadableError
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("err %v, want an UnreadableError with %q", err, tc.err)
			}
		})
	}
	if err := Misspelt([]byte(`{"Tools":[]}`), "tools"); err == nil {
		t.Error("Misspelt let Tools pass for tools")
	}
}

// Misspelt compares with strings.EqualFold rather than Fold: the two must
// agree on every pair, or a spelling Fold takes for one would pass.
func TestEqualFoldIsFold(t *testing.T) {
	words := []string{"name", "NAME", "Name", "nAmE", "naMe ", "arguments", "ARGUMENTS", "argumentſ",
		"_meta", "_META", "_Meta", "ſerver", "server", "SERVER", "K", "k", "\u212a", "ß", "ẞ", "\xff", "\xfe",
		"\xffname", "\xfename", "İ", "i", "ı", "I", "µ", "Μ", "μ", "", "a\u0301", "á"}
	for _, a := range words {
		for _, b := range words {
			if got, want := strings.EqualFold(a, b), Fold(a) == Fold(b); got != want {
				t.Errorf("%q, %q: EqualFold %v, Fold equal %v", a, b, got, want)
			}
		}
	}
}
