package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// TestJSONRPCEdgeCases pins what /v1/invoke answers to each kind of body.
func TestJSONRPCEdgeCases(t *testing.T) {
	e := newEnv(t)
	deep := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x","n":` +
		strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}}`
	huge := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` +
		strings.Repeat("a", 1<<20) + `"}}}`
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantCode   int    // 0: a result
		wantID     string // exact bytes of the echoed id; "" = no body
	}{
		{"empty body", ``, 400, -32700, `null`},
		{"whitespace only", "  \n ", 400, -32700, `null`},
		{"not JSON", `{bad`, 400, -32700, `null`},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"ping"} x`, 400, -32700, `null`},
		{"two objects", `{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"ping"}`, 400, -32700, `null`},
		{"deeply nested", deep, 400, -32700, `null`},
		{"over the size limit", huge, 413, -32600, `null`},
		{"batch array", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 200, -32600, `null`},
		{"empty batch", `[]`, 200, -32600, `null`},
		{"scalar", `42`, 200, -32600, `null`},
		{"missing jsonrpc", `{"id":7,"method":"ping"}`, 200, -32600, `7`},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":"a","method":"ping"}`, 200, -32600, `"a"`},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, 200, -32600, `null`},
		{"bool id", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, 200, -32600, `null`},
		{"missing method", `{"jsonrpc":"2.0","id":3}`, 200, -32600, `3`},
		{"numeric method", `{"jsonrpc":"2.0","id":3,"method":5}`, 200, -32600, `3`},
		{"string params", `{"jsonrpc":"2.0","id":3,"method":"ping","params":"x"}`, 200, -32600, `3`},
		{"duplicate member", `{"jsonrpc":"2.0","id":3,"method":"ping","method":"tools/list"}`, 200, -32600, `null`},
		{"a response", `{"jsonrpc":"2.0","id":3,"result":{}}`, 200, -32600, `3`},
		{"string id", `{"jsonrpc":"2.0","id":"req-1","method":"ping"}`, 200, 0, `"req-1"`},
		{"number id", `{"jsonrpc":"2.0","id":17,"method":"ping"}`, 200, 0, `17`},
		{"large integer id", `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`, 200, 0, `123456789012345678901234567890`},
		{"negative fraction id", `{"jsonrpc":"2.0","id":-1.50,"method":"ping"}`, 200, 0, `-1.50`},
		{"string id that looks numeric", `{"jsonrpc":"2.0","id":"17","method":"ping"}`, 200, 0, `"17"`},
		{"null id is a notification", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, 202, 0, ``},
		{"no id is a notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, 0, ``},
		{"unknown method", `{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{}}`, 200, -32601, `9`},
		{"tools/call without name", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{}}`, 200, -32602, `9`},
		{"tools/call with array arguments", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":[1]}}`, 200, -32602, `9`},
		{"tools/call with numeric server", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","server":1}}`, 200, -32602, `9`},
		{"tools/call with two names", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","name":"transfer"}}`, 200, -32602, `9`},
		{"tools/call with a name spelled twice", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","na\u006de":"transfer"}}`, 200, -32602, `9`},
		{"tools/call with name in two cases", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","Name":"transfer"}}`, 200, -32602, `9`},
		{"tools/call with Arguments", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","Arguments":{"message":"x"}}}`, 200, -32602, `9`},
		{"tools/call with argumentſ", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","argumentſ":{"message":"x"}}}`, 200, -32602, `9`},
		{"tools/call with a duplicate argument", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"message":"a","message":"b"}}}`, 200, -32602, `9`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(t, "/v1/invoke", e.KeyA, tc.body)
			if r.Status != tc.wantStatus {
				t.Fatalf("status %d, want %d; body %.300s", r.Status, tc.wantStatus, r.Raw)
			}
			if tc.wantID == "" {
				if len(r.Raw) != 0 {
					t.Fatalf("notification answered with a body: %s", r.Raw)
				}
				return
			}
			if r.code() != tc.wantCode {
				t.Fatalf("code %d, want %d; body %.300s", r.code(), tc.wantCode, r.Raw)
			}
			if string(r.ID) != tc.wantID {
				t.Fatalf("id %s, want %s", r.ID, tc.wantID)
			}
			if tc.wantCode != 0 && r.word() == "" {
				t.Fatalf("refusal without data.aegis: %s", r.Raw)
			}
			if !json.Valid(r.Raw) {
				t.Fatalf("answer is not JSON: %s", r.Raw)
			}
		})
	}
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t, func(s *config.Settings, _ *memstore.Store) { s.ServedTenants = []string{"acme"} })
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	ctx := context.Background()
	for _, tc := range []struct {
		name, key, want string
	}{
		{"missing", "", "unauthorized: missing API key"},
		{"malformed", "hunter2", "unauthorized: invalid API key"},
		{"unknown id", "aegis_zzzzzzzz_" + strings.Repeat("a", 40), "unauthorized: invalid API key"},
		{"right id, wrong secret", e.KeyA[:strings.LastIndex(e.KeyA, "_")] + "_" + strings.Repeat("b", 40), "unauthorized: invalid API key"},
		{"tenant not served", e.KeyB, "unauthorized: tenant not served by this gateway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(t, "/v1/invoke", tc.key, ping)
			if r.Status != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401: %s", r.Status, r.Raw)
			}
			var body map[string]string
			if err := json.Unmarshal(r.Raw, &body); err != nil || !strings.HasPrefix(body["error"], tc.want) {
				t.Fatalf("body %s, want error starting %q", r.Raw, tc.want)
			}
			if tc.key != "" && strings.Contains(string(r.Raw), tc.key) {
				t.Fatal("the presented key was echoed")
			}
		})
	}
	t.Run("revoked", func(t *testing.T) {
		if r := e.post(t, "/v1/invoke", e.KeyA, ping); r.Status != 200 {
			t.Fatalf("valid key refused: %d %s", r.Status, r.Raw)
		}
		keys, _ := e.Store.ListKeys(ctx, "acme")
		must(t, e.Store.RevokeKey(ctx, "acme", keys[0].ID))
		if r := e.post(t, "/v1/invoke", e.KeyA, ping); r.Status != http.StatusUnauthorized {
			t.Fatalf("revoked key accepted: %d", r.Status)
		}
	})
	t.Run("keys stored as hashes and absent from logs", func(t *testing.T) {
		keys, _ := e.Store.ListKeys(ctx, "acme")
		for _, k := range keys {
			if strings.Contains(e.KeyA, k.Hash) || len(k.Hash) != 64 {
				t.Fatalf("stored hash %q does not look like a SHA-256", k.Hash)
			}
		}
		e.post(t, "/v1/invoke", e.KeyA, call("1", "echo", `{"message":"hi"}`))
		if logs := e.logs(); strings.Contains(logs, e.KeyA) || strings.Contains(logs, e.KeyB) {
			t.Fatal("an API key appears in the log")
		}
	})
}

func TestCorrelationID(t *testing.T) {
	e := newEnv(t)
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	hexID := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for _, tc := range []struct {
		name, traceparent, want string
	}{
		{"valid traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"upper-case hex is invalid", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ""},
		{"all-zero trace id is invalid", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"version ff is invalid", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
		{"garbage", "hello", ""},
		{"absent", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.traceparent != "" {
				hdr = []string{"traceparent", tc.traceparent}
			}
			got := e.post(t, "/v1/invoke", e.KeyA, ping, hdr...).Header.Get("X-Correlation-ID")
			if tc.want != "" && got != tc.want {
				t.Fatalf("correlation id %q, want %q", got, tc.want)
			}
			if tc.want == "" && (!hexID.MatchString(got) || strings.Contains(tc.traceparent, got)) {
				t.Fatalf("correlation id %q: want a fresh 32-hex id", got)
			}
		})
	}
	// Refusals and 401s carry it too.
	if got := e.post(t, "/v1/invoke", "", ping).Header.Get("X-Correlation-ID"); !hexID.MatchString(got) {
		t.Fatalf("401 without correlation id: %q", got)
	}
}

func TestSessions(t *testing.T) {
	e := newEnv(t)
	r := e.post(t, "/v1/invoke", e.KeyA, call("1", "echo", `{"message":"a"}`))
	sid := r.Header.Get("X-Session-ID")
	if r.code() != 0 || len(sid) != 32 {
		t.Fatalf("first call: code %d, session %q: %s", r.code(), sid, r.Raw)
	}
	if r := e.post(t, "/v1/invoke", e.KeyA, call("2", "echo", `{"message":"b"}`), "X-Session-ID", sid); r.code() != 0 || r.Header.Get("X-Session-ID") != sid {
		t.Fatalf("same session: code %d, header %q", r.code(), r.Header.Get("X-Session-ID"))
	}
	upstreamBefore := e.UpA.Calls("echo")
	r = e.post(t, "/v1/invoke", e.KeyA, call("3", "echo", `{"message":"c"}`), "X-Session-ID", "0123456789abcdef0123456789abcdef")
	if r.code() != -32603 || r.word() != "SESSION_ERROR" || r.Status != 200 {
		t.Fatalf("unknown session: status %d code %d word %s", r.Status, r.code(), r.word())
	}
	// Another tenant's session id is unknown to this tenant.
	if r := e.post(t, "/v1/invoke", e.KeyB, call("4", "echo", `{"message":"d"}`), "X-Session-ID", sid); r.code() != -32603 {
		t.Fatalf("tenant B used tenant A's session: %s", r.Raw)
	}
	// Another caller of the same tenant cannot continue this session.
	other, rec := auth.NewKey("acme", "other-agent", e.Clock.Now())
	must(t, e.Store.PutKey(context.Background(), rec))
	if r := e.post(t, "/v1/invoke", other, call("6", "echo", `{"message":"f"}`), "X-Session-ID", sid); r.code() != -32603 {
		t.Fatalf("another caller continued the session: %s", r.Raw)
	}
	e.Clock.Advance(e.Settings.SessionIdle + time.Second)
	if r := e.post(t, "/v1/invoke", e.KeyA, call("5", "echo", `{"message":"e"}`), "X-Session-ID", sid); r.code() != -32603 {
		t.Fatalf("idle-expired session accepted: %s", r.Raw)
	}
	if got := e.UpA.Calls("echo"); got != upstreamBefore {
		t.Fatalf("refused calls reached the upstream: %d → %d", upstreamBefore, got)
	}
}

// TestTenantIsolation: tenant A can neither see nor call tenant B's tools,
// by name, by qualified name, by server path or by params.server.
func TestTenantIsolation(t *testing.T) {
	e := newEnv(t)
	// A tool only globex has.
	must(t, e.Store.PutServer(context.Background(), registry.Server{Tenant: "globex", Name: "secret-srv", URL: e.UpB.URL}))
	list := e.post(t, "/v1/invoke", e.KeyA, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if strings.Contains(string(list.Result), "secret-srv") || strings.Contains(string(list.Result), "globex") {
		t.Fatalf("tenant A sees tenant B's servers: %s", list.Result)
	}
	before := e.UpB.Calls("echo")
	accept := "application/json, text/event-stream"
	ini := e.post(t, "/mcp", e.KeyA, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "Accept", accept)
	sid := ini.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %s", ini.Raw)
	}
	for _, tc := range []struct{ name, path, body string }{
		{"qualified name", "/v1/invoke", call("1", "secret-srv.echo", `{"message":"x"}`)},
		{"params.server", "/v1/invoke", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","server":"globex-tools","arguments":{"message":"x"}}}`},
		{"server path", "/mcp/globex-tools", call("1", "echo", `{"message":"x"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if strings.HasPrefix(tc.path, "/mcp") {
				hdr = []string{"Accept", accept, "Mcp-Session-Id", sid}
			}
			r := e.post(t, tc.path, e.KeyA, tc.body, hdr...)
			if r.code() != -32601 {
				t.Fatalf("want -32601 (unknown, never forbidden), got %d: %s", r.code(), r.Raw)
			}
		})
	}
	if r := e.post(t, "/mcp/globex-tools", e.KeyA, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		"Accept", accept, "Mcp-Session-Id", sid); r.code() != -32601 {
		t.Fatalf("tenant A listed tenant B's server: %s", r.Raw)
	}
	// The session comes first: with an unknown session, a foreign server
	// path is the same 404 session error as one's own (no probing of which
	// servers exist).
	for _, path := range []string{"/mcp/globex-tools", "/mcp/mock-primary"} {
		for _, body := range []string{call("1", "echo", `{"message":"x"}`), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`} {
			if r := e.post(t, path, e.KeyA, body, "Accept", accept, "Mcp-Session-Id", "unknown-session"); r.Status != http.StatusNotFound || r.code() != -32603 {
				t.Fatalf("%s %s with an unknown session: HTTP %d %s; want 404 and -32603", path, body, r.Status, r.Raw)
			}
		}
	}
	if got := e.UpB.Calls("echo"); got != before {
		t.Fatalf("tenant B's upstream ran %d calls for tenant A", got-before)
	}
	// B's own calls still work.
	if r := e.post(t, "/v1/invoke", e.KeyB, call("2", "globex-tools.echo", `{"message":"mine"}`)); r.code() != 0 {
		t.Fatalf("tenant B's own call failed: %s", r.Raw)
	}
}

// TestCollisions: two servers with the same tool names; the aggregated view
// qualifies the colliding names and routes each to its owner.
func TestCollisions(t *testing.T) {
	e := newEnv(t)
	must(t, e.Store.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "second", URL: e.UpB.URL}))
	list := e.post(t, "/v1/invoke", e.KeyA, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	for _, want := range []string{`"mock-primary.echo"`, `"second.echo"`} {
		if !strings.Contains(string(list.Result), want) {
			t.Fatalf("aggregated list lacks %s: %s", want, list.Result)
		}
	}
	if r := e.post(t, "/v1/invoke", e.KeyA, call("1", "echo", `{"message":"x"}`)); r.code() != -32601 {
		t.Fatalf("ambiguous bare name routed somewhere: %s", r.Raw)
	}
	if r := e.post(t, "/v1/invoke", e.KeyA, call("2", "second.echo", `{"message":"x"}`)); r.code() != 0 || e.UpB.Calls("echo") != 1 {
		t.Fatalf("qualified call: %s, upstream B calls %d", r.Raw, e.UpB.Calls("echo"))
	}
	// Unqualified with an explicit server also works.
	r := e.post(t, "/v1/invoke", e.KeyA, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","server":"mock-primary","arguments":{"message":"y"}}}`)
	if r.code() != 0 || e.UpA.Calls("echo") != 1 {
		t.Fatalf("server-scoped call: %s, upstream A calls %d", r.Raw, e.UpA.Calls("echo"))
	}
}

func TestRefusalShapeResult(t *testing.T) {
	e := newEnv(t)
	must(t, e.Store.PutTenant(context.Background(), registry.Tenant{ID: "acme", Tier: registry.TierFree, RefusalShape: registry.ShapeResult}))
	r := e.post(t, "/v1/invoke", e.KeyA, call("1", "nope", `{}`))
	var res struct {
		IsError    bool `json:"isError"`
		Structured struct {
			Code int `json:"code"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil || !res.IsError || res.Structured.Code != -32601 {
		t.Fatalf("want an isError result carrying -32601: %s", r.Raw)
	}
}

// TestRefusedCallsCountNothing: the session, rate-limit and quota checks
// start their store work together; a call an earlier check refuses gives
// back what later checks counted.
func TestRefusedCallsCountNothing(t *testing.T) {
	e := newEnv(t, func(s *config.Settings, _ *memstore.Store) {
		s.BillingEnabled, s.BillingEnforce = true, true // acme's tier allows 3 calls
		s.RateLimitPerSession = 2
	})
	// Ten calls with an unknown session: refused by the session check, so
	// neither the quota nor any rate window may keep a unit.
	for i := range 10 {
		r := e.post(t, "/v1/invoke", e.KeyA, call(fmt.Sprint(i), "echo", `{"message":"x"}`), "X-Session-ID", "00000000000000000000000000000000")
		if r.code() != -32603 {
			t.Fatalf("unknown session: %s", r.Raw)
		}
	}
	// A session minted by tools/list (a call sent without a session counts
	// in its API key's window, not in the session it mints).
	r := e.post(t, "/v1/invoke", e.KeyA, `{"jsonrpc":"2.0","id":"l","method":"tools/list"}`)
	sid := r.Header.Get("X-Session-ID")
	if r.code() != 0 || sid == "" {
		t.Fatalf("tools/list: %s", r.Raw)
	}
	if r := e.post(t, "/v1/invoke", e.KeyA, call("101", "echo", `{"message":"x"}`), "X-Session-ID", sid); r.code() != 0 {
		t.Fatalf("first real call refused: %s", r.Raw)
	}
	if r := e.post(t, "/v1/invoke", e.KeyA, call("102", "echo", `{"message":"x"}`), "X-Session-ID", sid); r.code() != 0 {
		t.Fatalf("second call refused: %s", r.Raw)
	}
	// The session's window (2/min) is full: refused by the rate limit, so
	// the quota unit it took is given back.
	for range 5 {
		if r := e.post(t, "/v1/invoke", e.KeyA, call("103", "echo", `{"message":"x"}`), "X-Session-ID", sid); r.code() != -32004 {
			t.Fatalf("want -32004: %s", r.Raw)
		}
	}
	// One unit of the 3 is left for a new session, then the quota refuses
	// with exactly the seed's data.
	if r := e.post(t, "/v1/invoke", e.KeyA, call("104", "echo", `{"message":"x"}`)); r.code() != 0 {
		t.Fatalf("third unit refused (a refused call kept a unit): %s", r.Raw)
	}
	r = e.post(t, "/v1/invoke", e.KeyA, call("105", "echo", `{"message":"x"}`))
	var d map[string]any
	_ = json.Unmarshal(r.Error.Data, &d)
	if r.code() != -32060 || d["used"] != 3.0 || d["limit"] != 3.0 || d["tier"] != "free" || d["period"] != "202611" {
		t.Fatalf("want -32060 with used 3 of 3: %s", r.Raw)
	}
	if got := e.UpA.Calls("echo"); got != 3 {
		t.Fatalf("upstream ran %d calls, want 3", got)
	}
}

// TestRateLimitNamesAndSessionless: one tool answers to several names (its
// exposed name, server.tool, params.server); all count in one tool window.
// And a caller that leaves out the session header does not get a fresh
// window per call: sessionless calls share the API key's windows.
func TestRateLimitNamesAndSessionless(t *testing.T) {
	e := newEnv(t, func(s *config.Settings, _ *memstore.Store) {
		s.RateLimitPerTool, s.RateLimitPerSession = 2, 3
	})
	r := e.post(t, "/v1/invoke", e.KeyA, `{"jsonrpc":"2.0","id":"l","method":"tools/list"}`)
	sid := r.Header.Get("X-Session-ID")
	names := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mock-primary.echo","arguments":{"message":"x"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","server":"mock-primary","arguments":{"message":"x"}}}`,
	}
	for i, body := range names {
		r := e.post(t, "/v1/invoke", e.KeyA, body, "X-Session-ID", sid)
		want := 0
		if i == 2 {
			want = -32004
		}
		if r.code() != want {
			t.Fatalf("call %d under another name: %s; want code %d", i+1, r.Raw, want)
		}
		if want != 0 && !strings.Contains(string(r.Error.Data), `"scope":"tool"`) {
			t.Fatalf("want the tool window: %s", r.Raw)
		}
	}
	before := e.UpA.Calls("echo")
	// Five calls without a session header: 3 fit the key's session window
	// (the tool window, 2, refuses first).
	admitted := 0
	for i := range 5 {
		r := e.post(t, "/v1/invoke", e.KeyA, call(fmt.Sprint(10+i), "echo", `{"message":"x"}`))
		switch r.code() {
		case 0:
			admitted++
		case -32004:
		default:
			t.Fatalf("sessionless call: %s", r.Raw)
		}
	}
	if admitted != 2 || e.UpA.Calls("echo")-before != 2 {
		t.Fatalf("sessionless calls admitted %d (upstream %d); want 2 (the tool window)", admitted, e.UpA.Calls("echo")-before)
	}
}
