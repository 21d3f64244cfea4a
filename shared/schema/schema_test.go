package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
)

// logBuf is a concurrency-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newCheck(mode Mode) (*Check, *logBuf) {
	lb := &logBuf{}
	return New(mode, &Options{Logger: slog.New(slog.NewJSONHandler(lb, nil))}), lb
}

// toolCall is a resolved tools/call of tool "t" with the given inputSchema
// ("" = none) and arguments ("" = absent).
func toolCall(inputSchema, args string) *pipeline.Call {
	def := `{"name":"t"}`
	if inputSchema != "" {
		def = `{"name":"t","description":"d","inputSchema":` + inputSchema + `}`
	}
	params := `{"name":"t"}`
	if args != "" {
		params = `{"name":"t","arguments":` + args + `}`
	}
	return &pipeline.Call{
		Method: "tools/call", Tool: "t", UpstreamTool: "t", CorrelationID: "corr-1",
		Tenant: registry.Tenant{ID: "acme"}, Server: &registry.Server{Tenant: "acme", Name: "srv"},
		ToolDef: json.RawMessage(def), Params: json.RawMessage(params),
	}
}

const order = `{
  "type": "object",
  "properties": {
    "customer": {"type": "object", "properties": {"id": {"type": "string"}, "tier": {"enum": ["free", "pro"]}}, "required": ["id"]},
    "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}}, "required": ["sku", "qty"], "additionalProperties": false}},
    "note": {"type": "string", "maxLength": 8},
    "tags": {"type": "object", "additionalProperties": {"type": "string"}}
  },
  "required": ["customer"],
  "additionalProperties": false
}`

func TestCheck(t *testing.T) {
	tests := []struct {
		name, schema, args string
		wantPtr, wantKw    string // "" wantKw: allowed
	}{
		{name: "valid", schema: order, args: `{"customer":{"id":"c1"},"items":[{"sku":"a","qty":2}],"note":"hi"}`},
		{name: "no inputSchema", schema: "", args: `{"anything":1}`},
		{name: "empty schema", schema: `{}`, args: `{"anything":1}`},
		{name: "absent arguments are {}", schema: `{"type":"object","required":["q"]}`, args: "", wantPtr: "", wantKw: "required"},
		{name: "null arguments are {}", schema: `{"type":"object","required":["q"]}`, args: `null`, wantPtr: "", wantKw: "required"},
		{name: "absent arguments valid", schema: `{"type":"object","properties":{"q":{"type":"string"}}}`, args: ""},
		{name: "missing required", schema: order, args: `{"note":"x"}`, wantPtr: "", wantKw: "required"},
		{name: "wrong type", schema: order, args: `{"customer":{"id":7}}`, wantPtr: "/customer/id", wantKw: "type"},
		{name: "nested pointer in array", schema: order, args: `{"customer":{"id":"c"},"items":[{"sku":"a","qty":1},{"sku":"b","qty":0}]}`, wantPtr: "/items/1/qty", wantKw: "minimum"},
		{name: "nested required", schema: order, args: `{"customer":{"tier":"pro"}}`, wantPtr: "/customer", wantKw: "required"},
		{name: "enum", schema: order, args: `{"customer":{"id":"c","tier":"gold"}}`, wantPtr: "/customer/tier", wantKw: "enum"},
		{name: "maxLength", schema: order, args: `{"customer":{"id":"c"},"note":"far too long"}`, wantPtr: "/note", wantKw: "maxLength"},
		{name: "additionalProperties", schema: order, args: `{"customer":{"id":"c"},"extra":1}`, wantPtr: "", wantKw: "additionalProperties"},
		{name: "additionalProperties in array item", schema: order, args: `{"customer":{"id":"c"},"items":[{"sku":"a","qty":1,"x":1}]}`, wantPtr: "/items/0", wantKw: "additionalProperties"},
		// A member the schema does not declare is the caller's word: it is
		// never echoed, not even as a pointer token.
		{name: "undeclared name redacted", schema: order, args: `{"customer":{"id":"c"},"tags":{"AKIAIOSFODNN7EXAMPLE":5}}`, wantPtr: "/tags/*", wantKw: "type"},
		{name: "false subschema", schema: `{"properties":{"rm":false}}`, args: `{"rm":true}`, wantPtr: "/rm", wantKw: "false"},
		{name: "anyOf reported as anyOf", schema: `{"properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`, args: `{"v":1.5}`, wantPtr: "/v", wantKw: "anyOf"},
		{name: "oneOf", schema: `{"properties":{"v":{"oneOf":[{"type":"number"},{"type":"integer"}]}}}`, args: `{"v":1}`, wantPtr: "/v", wantKw: "oneOf"},
		{name: "allOf descended", schema: `{"allOf":[{"required":["a"]},{"properties":{"b":{"type":"string"}}}]}`, args: `{"a":1,"b":2}`, wantPtr: "/b", wantKw: "type"},
		{name: "local $ref resolved", schema: `{"$defs":{"id":{"type":"string","pattern":"^[a-z]+$"}},"properties":{"id":{"$ref":"#/$defs/id"}}}`, args: `{"id":"ABC"}`, wantPtr: "/id", wantKw: "pattern"},
		{name: "local $ref valid", schema: `{"$defs":{"id":{"type":"string"}},"properties":{"id":{"$ref":"#/$defs/id"}}}`, args: `{"id":"abc"}`},
		{name: "escaped pointer token", schema: `{"properties":{"a/b~c":{"type":"string"}}}`, args: `{"a/b~c":1}`, wantPtr: "/a~1b~0c", wantKw: "type"},
		{name: "first by location", schema: order, args: `{"customer":{"id":1,"tier":"x"},"note":"much too long","zz":1}`, wantPtr: "", wantKw: "additionalProperties"},
		{name: "first by name then keyword", schema: order, args: `{"customer":{"id":1,"tier":"x"},"note":"much too long"}`, wantPtr: "/customer/id", wantKw: "type"},
		{name: "draft-07 schema", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"n":{"type":"integer"}}}`, args: `{"n":"1"}`, wantPtr: "/n", wantKw: "type"},
		{name: "format is an annotation in 2020-12", schema: `{"properties":{"e":{"type":"string","format":"email"}}}`, args: `{"e":"not-an-email"}`},
		{name: "format asserted in draft-07", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"e":{"type":"string","format":"email"}}}`, args: `{"e":"not-an-email"}`, wantPtr: "/e", wantKw: "format"},
		{name: "large integer kept exact", schema: `{"properties":{"n":{"type":"integer","maximum":9007199254740993}}}`, args: `{"n":9007199254740994}`, wantPtr: "/n", wantKw: "maximum"},
		// Schemas the gateway cannot compile: the call is not validated.
		{name: "does not compile: bad type", schema: `{"type":"objekt","required":["q"]}`, args: `{}`},
		{name: "does not compile: ECMA lookahead", schema: `{"properties":{"p":{"type":"string","pattern":"^(?!x)"}}}`, args: `{"p":1}`},
		{name: "does not compile: unknown $schema", schema: `{"$schema":"https://example.com/my-dialect","required":["q"]}`, args: `{}`},
		{name: "does not compile: dangling local $ref", schema: `{"properties":{"a":{"$ref":"#/$defs/missing"}}}`, args: `{"a":1}`},
		{name: "does not compile: relative $ref", schema: `{"properties":{"a":{"$ref":"other.json"}}}`, args: `{"a":1}`},
	}
	for _, tc := range tests {
		for _, mode := range []Mode{Block, Monitor} {
			t.Run(tc.name+modeName(mode), func(t *testing.T) {
				k, lb := newCheck(mode)
				call := toolCall(tc.schema, tc.args)
				err := k.Check(context.Background(), call)
				if tc.wantKw == "" || mode == Monitor {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
				}
				wantFound := []audit.Finding(nil)
				if tc.wantKw != "" {
					act := audit.ActionBlocked
					if mode == Monitor {
						act = audit.ActionLogged
					}
					wantFound = []audit.Finding{{At: audit.AtArguments, Kind: FindingKind, Rule: tc.wantKw, Action: act}}
				}
				if !slices.Equal(call.Findings, wantFound) {
					t.Fatalf("audit findings %+v, want %+v", call.Findings, wantFound)
				}
				if tc.wantKw == "" {
					if strings.Contains(lb.String(), "arguments fail") {
						t.Fatalf("logged a violation: %s", lb)
					}
					if uncompiled := strings.HasPrefix(tc.name, "does not compile"); uncompiled != strings.Contains(lb.String(), "does not compile") {
						t.Fatalf("want uncompiled %v, log: %s", uncompiled, lb)
					}
					return
				}
				if mode == Monitor {
					var rec struct{ Level, Pointer, Keyword, Tool, Server string }
					if err := json.Unmarshal([]byte(lb.String()), &rec); err != nil {
						t.Fatalf("log %q: %v", lb, err)
					}
					if rec.Level != "WARN" || rec.Pointer != tc.wantPtr || rec.Keyword != tc.wantKw || rec.Tool != "t" || rec.Server != "srv" {
						t.Fatalf("monitor log %+v, want pointer %q keyword %q", rec, tc.wantPtr, tc.wantKw)
					}
					return
				}
				var r *refusal.Refusal
				if !errors.As(err, &r) {
					t.Fatalf("got %v, want a refusal", err)
				}
				if r.Code != refusal.CodeInvalidParams || r.Fields["pointer"] != tc.wantPtr || r.Fields["keyword"] != tc.wantKw {
					t.Fatalf("got %d %v, want -32602 pointer %q keyword %q", r.Code, r.Fields, tc.wantPtr, tc.wantKw)
				}
				if lb.String() != "" {
					t.Fatalf("block mode logged: %s", lb)
				}
			})
		}
	}
}

func modeName(m Mode) string {
	if m == Monitor {
		return "/monitor"
	}
	return "/block"
}

// TestNoEchoOfArguments: whatever the violation, the refusal's message and
// data and the monitor log carry nothing the caller sent.
func TestNoEchoOfArguments(t *testing.T) {
	const secret = "sk-live-SECRETVALUE123"
	for _, args := range []string{
		`{"customer":{"id":"c"},"` + secret + `":1}`,
		`{"customer":{"id":"c"},"tags":{"` + secret + `":1}}`,
		`{"customer":{"id":"` + secret + `","tier":"` + secret + `"}}`,
		`{"customer":{"id":"c"},"note":"` + secret + `"}`,
		`{"customer":{"id":"c"},"items":[{"sku":"a","qty":1,"` + secret + `":true}]}`,
	} {
		kb, _ := newCheck(Block)
		err := kb.Check(context.Background(), toolCall(order, args))
		var r *refusal.Refusal
		if !errors.As(err, &r) {
			t.Fatalf("%s: got %v", args, err)
		}
		if o := r.Object(refusal.LayerGateway); strings.Contains(o.Message+string(o.Data), "SECRET") {
			t.Fatalf("refusal echoes the arguments: %s %s", o.Message, o.Data)
		}
		km, lb := newCheck(Monitor)
		if err := km.Check(context.Background(), toolCall(order, args)); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(lb.String(), "SECRET") {
			t.Fatalf("monitor log echoes the arguments: %s", lb)
		}
	}
}

// TestNoFetch: a $ref to anything outside the schema is never loaded, from
// the network or the file system; the schema does not compile, the call is
// not validated, and it is logged once for its hash.
func TestNoFetch(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(file, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{srv.URL + "/s.json", "file://" + file, "//" + strings.TrimPrefix(srv.URL, "http://") + "/s.json"} {
		t.Run(ref, func(t *testing.T) {
			k, lb := newCheck(Block)
			s := `{"properties":{"a":{"$ref":"` + ref + `"}}}`
			for i := 0; i < 3; i++ {
				// {"a":1} would fail {"type":"string"} had it been loaded.
				if err := k.Check(context.Background(), toolCall(s, `{"a":1}`)); err != nil {
					t.Fatalf("refused: %v", err)
				}
			}
			if n := strings.Count(lb.String(), "does not compile"); n != 1 {
				t.Fatalf("logged %d times, want once: %s", n, lb)
			}
			if !strings.Contains(lb.String(), `"level":"WARN"`) || !strings.Contains(lb.String(), `"schema_hash"`) {
				t.Fatalf("log: %s", lb)
			}
		})
	}
	if hits.Load() != 0 {
		t.Fatalf("the schema server was fetched %d times", hits.Load())
	}
}

func TestMetaSchemasNeedNoFetch(t *testing.T) {
	k, _ := newCheck(Block)
	for _, s := range []string{
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","required":["q"]}`,
		`{"$schema":"https://json-schema.org/draft/2019-09/schema","required":["q"]}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","required":["q"]}`,
	} {
		var r *refusal.Refusal
		if err := k.Check(context.Background(), toolCall(s, `{}`)); !errors.As(err, &r) || r.Fields["keyword"] != "required" {
			t.Fatalf("%s: got %v, want required", s, err)
		}
	}
}

func TestCacheBounds(t *testing.T) {
	schemaOf := func(i int) []byte { // 30 bytes each
		return []byte(`{"type":"object","title":"` + string(rune('a'+i)) + `"}`)
	}
	sz := len(schemaOf(0))
	tests := []struct {
		name                   string
		maxEntries, maxBytes   int
		insert                 int
		wantEntries, wantBytes int
	}{
		{name: "by count", maxEntries: 3, maxBytes: 1 << 20, insert: 5, wantEntries: 3, wantBytes: 3 * sz},
		{name: "by bytes", maxEntries: 100, maxBytes: 2*sz + sz/2, insert: 5, wantEntries: 2, wantBytes: 2 * sz},
		{name: "under both", maxEntries: 10, maxBytes: 10 * sz, insert: 4, wantEntries: 4, wantBytes: 4 * sz},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := NewCache(tc.maxEntries, tc.maxBytes)
			for i := 0; i < tc.insert; i++ {
				if e, ins := k.get(schemaOf(i)); !ins || e.err != nil {
					t.Fatalf("schema %d: inserted %v err %v", i, ins, e.err)
				}
				if _, ins := k.get(schemaOf(i)); ins {
					t.Fatalf("schema %d compiled twice", i)
				}
				if n, b := k.Len(); n > tc.maxEntries || b > tc.maxBytes {
					t.Fatalf("after %d: %d entries, %d bytes: over the caps", i, n, b)
				}
			}
			if n, b := k.Len(); n != tc.wantEntries || b != tc.wantBytes {
				t.Fatalf("%d entries, %d bytes; want %d, %d", n, b, tc.wantEntries, tc.wantBytes)
			}
			// The newest are kept (hits), the oldest went first.
			for i := tc.insert - tc.wantEntries; i < tc.insert; i++ {
				if _, ins := k.get(schemaOf(i)); ins {
					t.Fatalf("schema %d, among the newest, was evicted", i)
				}
			}
			if tc.insert > tc.wantEntries {
				if _, ins := k.get(schemaOf(0)); !ins {
					t.Fatal("schema 0, the oldest, was kept")
				}
			}
		})
	}
}

func TestCacheEvictsOldestFirst(t *testing.T) {
	k := NewCache(2, 1<<20)
	a, b, c := []byte(`{"title":"a"}`), []byte(`{"title":"b"}`), []byte(`{"title":"c"}`)
	k.get(a)
	k.get(b)
	k.get(a) // a hit does not refresh: the order is insertion order
	k.get(c)
	if _, ins := k.get(b); ins {
		t.Fatal("b, the second inserted, was evicted")
	}
	k2 := NewCache(2, 1<<20)
	k2.get(a)
	k2.get(b)
	k2.get(c)
	if _, ins := k2.get(a); !ins {
		t.Fatal("a, the oldest, was kept")
	}
}

func TestCacheOversizeSchema(t *testing.T) {
	k := NewCache(10, 64)
	big := []byte(`{"type":"object","required":["q"],"description":"` + strings.Repeat("x", 100) + `"}`)
	e, ins := k.get(big)
	if !ins || !errors.Is(e.err, errTooLarge) || e.sch != nil {
		t.Fatalf("oversize: inserted %v err %v", ins, e.err)
	}
	if n, b := k.Len(); n != 1 || b != 0 {
		t.Fatalf("oversize entry: %d entries, %d bytes; want 1, 0", n, b)
	}
	if _, ins := k.get(big); ins {
		t.Fatal("oversize schema looked at twice")
	}
	// Through the check: not validated, logged once.
	lb := &logBuf{}
	chk := New(Block, &Options{Cache: NewCache(10, 64), Logger: slog.New(slog.NewJSONHandler(lb, nil))})
	for i := 0; i < 2; i++ {
		if err := chk.Check(context.Background(), toolCall(string(big), `{}`)); err != nil {
			t.Fatalf("oversize schema refused: %v", err)
		}
	}
	if strings.Count(lb.String(), "does not compile") != 1 {
		t.Fatalf("log: %s", lb)
	}
}

// TestConcurrent: one check, many goroutines, several schemas and a small
// cache that evicts all the time (run with -race).
func TestConcurrent(t *testing.T) {
	lb := &logBuf{}
	k := New(Block, &Options{Cache: NewCache(2, 1<<20), Logger: slog.New(slog.NewJSONHandler(lb, nil))})
	schemas := []string{order, `{"required":["x"]}`, `{"properties":{"q":{"type":"string"}}}`, `{"type":"objekt"}`}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				s := schemas[(g+i)%len(schemas)]
				err := k.Check(context.Background(), toolCall(s, `{"q":1}`))
				var r *refusal.Refusal
				switch s {
				case `{"type":"objekt"}`:
					if err != nil {
						t.Errorf("uncompilable schema refused: %v", err)
					}
				default:
					if !errors.As(err, &r) || r.Code != refusal.CodeInvalidParams {
						t.Errorf("%s: got %v", s, err)
					}
				}
			}
		}(g)
	}
	wg.Wait()
	if n, _ := k.cache.Len(); n > 2 {
		t.Fatalf("%d entries over a cap of 2", n)
	}
}

func TestDeclaredNames(t *testing.T) {
	var doc any
	if err := json.Unmarshal([]byte(`{"properties":{"a":{"properties":{"b":{}}}},"required":["c"],"$defs":{"x":{"properties":{"d":{}},"dependentRequired":{"e":["f"]}}},"items":[{"properties":{"g":{}}}]}`), &doc); err != nil {
		t.Fatal(err)
	}
	got := declaredNames(doc)
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		if !got[n] {
			t.Errorf("%q not declared", n)
		}
	}
	if got["x"] || got["properties"] || got["$defs"] {
		t.Errorf("keywords or $defs names taken as property names: %v", got)
	}
}
