package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestDecodeKeepsExactBytes(t *testing.T) {
	body := `{ "params" : {"z":1, "a" : [1.0, "\u00e9"]}, "id" : 1e3 , "method":"tools/call","jsonrpc":"2.0"}`
	req, derr := Decode([]byte(body))
	if derr != nil {
		t.Fatal(derr)
	}
	if string(req.ID) != "1e3" || string(req.Params) != `{"z":1, "a" : [1.0, "\u00e9"]}` || req.Method != "tools/call" {
		t.Fatalf("got id %s params %s method %s", req.ID, req.Params, req.Method)
	}
}

func TestDecodeEscapedKeys(t *testing.T) {
	// "\u006dethod" is "method": the decoder must see it as such.
	req, derr := Decode([]byte(`{"jsonrpc":"2.0","id":1,"\u006dethod":"ping"}`))
	if derr != nil || req.Method != "ping" {
		t.Fatalf("escaped key: %v %+v", derr, req)
	}
	// Case differs: not "method" (encoding/json would accept "Method").
	if _, derr := Decode([]byte(`{"jsonrpc":"2.0","id":1,"Method":"ping"}`)); derr == nil {
		t.Fatal(`"Method" accepted as "method"`)
	}
}

func TestEdit(t *testing.T) {
	obj := json.RawMessage(`{"name":"a.b", "arguments":{"x":1},"server":"s","_meta":{"k":[1]}}`)
	got := Edit(Edit(obj, "name", json.RawMessage(`"b"`)), "server", nil)
	want := `{"name":"b","arguments":{"x":1},"_meta":{"k":[1]}}`
	if string(got) != want {
		t.Fatalf("got %s want %s", got, want)
	}
	if got := Edit(json.RawMessage(`{}`), "cursor", json.RawMessage(`"c"`)); string(got) != `{"cursor":"c"}` {
		t.Fatalf("add to empty: %s", got)
	}
}

func TestErrorFrame(t *testing.T) {
	f := Error(json.RawMessage(`"x"`), &WireError{Code: CodeInvalidParams, Message: "bad", Data: json.RawMessage(`{"k":1}`)})
	if string(f) != `{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"bad","data":{"k":1}}}` {
		t.Fatalf("frame %s", f)
	}
	if !errors.Is(&WireError{Code: CodeParseError, Message: "a"}, &WireError{Code: CodeParseError}) ||
		errors.Is(&WireError{Code: CodeParseError}, &WireError{Code: CodeInvalidRequest}) {
		t.Fatal("wire errors do not compare by code")
	}
}

// FuzzDecode: the decoder never panics; what it accepts is a single object
// with a valid id, and every frame built from its verdict is valid JSON.
func FuzzDecode(f *testing.F) {
	seeds := []string{
		// shapes from the JSON test suite (y_, n_ and i_ cases)
		`[]`, `{}`, `[1,]`, `{"a":1,}`, `[1e999]`, `["\ud800"]`, `{"\u0000":1}`, "\xef\xbb\xbf{}",
		`[-0]`, `[0.1e+2]`, `[1.5e-9999]`, `["\u00e9\uD834\uDD1E"]`, `{"a":"b","a":"c"}`, `[`, `]`, `"`, `nul`,
		`[123456789012345678901234567890]`, `{"a" 1}`, `{'a':1}`, "[\"\t\"]", `["\x"]`, `[.5]`, `[01]`, `[NaN]`,
		strings.Repeat("[", 500), strings.Repeat("[", 100) + strings.Repeat("]", 100),
		// requests
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","method":"x","params":null}`,
		`{"jsonrpc":"2.0","id":[1],"method":"x"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"} trailing`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, derr := Decode(b)
		if derr != nil {
			if req != nil {
				t.Fatal("both a request and an error")
			}
			if !json.Valid(derr.ID) {
				t.Fatalf("error id not JSON: %q", derr.ID)
			}
			if c := derr.Err.Code; c != CodeParseError && c != CodeInvalidRequest {
				t.Fatalf("decode error with code %d", c)
			}
			if frame := Error(derr.ID, derr.Err); !json.Valid(frame) {
				t.Fatalf("invalid error frame %q", frame)
			}
			return
		}
		if !json.Valid(bytes.TrimSpace(b)) || req.Method == "" {
			t.Fatalf("accepted %q", b)
		}
		id := req.ReplyID()
		if !json.Valid(id) || (id[0] != '"' && id[0] != 'n' && id[0] != '-' && (id[0] < '0' || id[0] > '9')) {
			t.Fatalf("accepted id %q", id)
		}
		if req.Params != nil && req.Params[0] != '{' && req.Params[0] != '[' {
			t.Fatalf("accepted params %q", req.Params)
		}
		if frame := Result(id, json.RawMessage(`{}`)); !json.Valid(frame) {
			t.Fatalf("invalid result frame %q", frame)
		}
	})
}

func TestDuplicateKey(t *testing.T) {
	many := func(n, dupAt int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			k := i
			if i == dupAt {
				k = 3
			}
			fmt.Fprintf(&b, `"k%d":%d`, k, i)
		}
		return b.String() + "}"
	}
	for _, c := range []struct {
		in   string
		dup  string
		want bool
	}{
		{`{}`, "", false},
		{`{"a":1,"b":2}`, "", false},
		{`{"name":"echo","name":"transfer"}`, "name", true},
		{`{"name":"echo","na\u006de":"transfer"}`, "name", true},
		{`{"a":{"x":1,"y":{"z":1,"z":2}}}`, "z", true},
		{`{"a":[1,{"q":1},{"q":1,"q":2}]}`, "q", true},
		{`[{"a":1},{"a":1}]`, "", false}, // the same key in two objects is fine
		{`{"a":{"a":{"a":1}}}`, "", false},
		{`"x"`, "", false},
		{`{"name":"work","Name":"other"}`, "Name", true},                 // Go's encoding/json: one field
		{`{"arguments":{},"argumentſ":{"amount":1}}`, "argumentſ", true}, // ſ folds to s
		{`{"kind":1,"\u212aind":2}`, "Kind", true},                       // Kelvin sign folds to k
		{"{\"a\xff\":1,\"a\xfe\":2}", "a\xfe", true},                     // invalid UTF-8: both U+FFFD
		{`{"b\ufffd":1,"B\uFFFD":2}`, "B\ufffd", true},
		{`{"straße":1,"STRASSE":2}`, "", false}, // not a simple fold: two keys to Go too
		{strings.Repeat(`{"a":`, 100) + `{"x":"a\"b","x\"":1}` + strings.Repeat(`}`, 100), "", false},
		{strings.Repeat(`{"a":[`, 60) + `{"x":1,"y":"}","X":2}` + strings.Repeat(`]}`, 60), "X", true},
		{`{"a":{"k":1},"b":{"k":1},"k":[{"k":1}]}`, "", false}, // one key per object
		{`{"s":"\"k\":1","k":2}`, "", false},                   // a key-like string value is not a key
		{many(100, -1), "", false},
		{many(40, 30), "k3", true}, // past the small-set threshold
		{many(10, 8), "k3", true},
	} {
		dup, ok := DuplicateKey(json.RawMessage(c.in))
		if dup != c.dup || ok != c.want {
			t.Errorf("DuplicateKey(%.60s) = %q, %v; want %q, %v", c.in, dup, ok, c.dup, c.want)
		}
	}
}

func TestFoldMatchesEqualFold(t *testing.T) {
	words := []string{"name", "NAME", "Name", "naMe", "k", "K", "\u212a", "s", "S", "\u017f", "σ", "Σ", "ς",
		"θ", "Θ", "ϑ", "straße", "STRASSE", "a\xff", "a\ufffd", "", "_meta", "_META", "ǅ", "ǆ", "Ǆ", "µ", "μ", "Μ"}
	for _, a := range words {
		for _, b := range words {
			if got, want := Fold(a) == Fold(b), strings.EqualFold(a, b); got != want {
				t.Errorf("Fold(%q) == Fold(%q) is %v; strings.EqualFold says %v", a, b, got, want)
			}
		}
	}
}

// BenchmarkDuplicateKey: one pass, whatever the depth (1 MiB nested 120 deep).
func BenchmarkDuplicateKey(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 1<<20 {
		sb.WriteString(strings.Repeat(`{"k":[`, 60) + `{"a":1,"b":2}` + strings.Repeat(`]}`, 60) + ",")
	}
	doc := json.RawMessage("[" + strings.TrimSuffix(sb.String(), ",") + "]")
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, dup := DuplicateKey(doc); dup {
			b.Fatal("no duplicate expected")
		}
	}
}

// duplicateKeyRef is DuplicateKey written the slow, plain way, over
// encoding/json's tokens: a stack of the folded keys of each open object.
func duplicateKeyRef(v []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(v))
	type level struct {
		obj    bool
		keys   map[string]bool
		expect bool // in an object, the next string token is a key
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		top := (*level)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].expect = true
				}
				continue
			}
			k := Fold(strings.ToValidUTF8(tok.(string), "\uFFFD"))
			if top.keys[k] {
				return true
			}
			top.keys[k] = true
			top.expect = false
			continue
		}
		switch d := tok.(type) {
		case json.Delim:
			switch d {
			case '{':
				stack = append(stack, &level{obj: true, keys: map[string]bool{}, expect: true})
				continue
			case '[':
				stack = append(stack, &level{})
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].expect = true
		}
		if len(stack) == 0 && !dec.More() {
			return false
		}
	}
}

// DuplicateKey agrees with the plain reference on any valid JSON.
func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{`{"a":1,"A":2}`, `{"a":{"b":1,"B":2}}`, `[{"a":1},{"a":1}]`, `{"\u0061":1,"a":2}`, `{"k":"x","K":"y"}`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"A":18}`,
		`{"\xff":1,"\xfe":2}`, `{"ſ":1,"S":2}`, `{"K":1,"k":2}`, `{"a":[{"a":1}],"b":{"a":{"a":2}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if !json.Valid(v) {
			return
		}
		_, got := DuplicateKey(v)
		if want := duplicateKeyRef(v); got != want {
			t.Fatalf("DuplicateKey(%q) = %v, the reference says %v", v, got, want)
		}
	})
}
