package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/mcptest"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// bearer adds the tenant key to every request of the SDK client.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// connect opens a 2025-11-25 session (initialize) through the gateway.
func connect(t *testing.T, url, key string) *mcp.ClientSession {
	t.Helper()
	return connectVersion(t, url, key, "2025-11-25")
}

// connectVersion connects the Go SDK client speaking version ("": its
// newest, 2026-07-28, which probes with server/discover).
func connectVersion(t *testing.T, url, key, version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "aegis-test-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: bearer{key: key, base: http.DefaultTransport}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestEndToEndConformanceServer: the Go SDK client, through aegis, to the
// Go SDK's conformance everything-server (stateful), over /mcp and
// /mcp/{server}. The client first probes protocol 2026-07-28 and must fall
// back to a 2025 version.
func TestEndToEndConformanceServer(t *testing.T) {
	upstreamURL := mcptest.Conformance(t, false)
	e := newEnv(t, func(_ *config.Settings, m *memstore.Store) {
		must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "everything", URL: upstreamURL}))
	})
	for _, path := range []string{"/mcp", "/mcp/everything"} {
		t.Run(path, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cs := connect(t, e.URL+path, e.KeyA)
			if v := cs.InitializeResult().ProtocolVersion; !strings.HasPrefix(v, "2025-") {
				t.Fatalf("negotiated %q, want a 2025 version", v)
			}
			if cs.ID() == "" {
				t.Fatal("no Mcp-Session-Id from the gateway")
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, tl := range tools.Tools {
				names[tl.Name] = true
			}
			if !names["test_simple_text"] {
				t.Fatalf("test_simple_text missing from %v", names)
			}
			if path == "/mcp/everything" && names["echo"] {
				t.Fatal("/mcp/everything lists another server's tools")
			}
			if err := cs.Ping(ctx, nil); err != nil {
				t.Fatalf("ping: %v", err)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || len(res.Content) == 0 {
				t.Fatalf("unexpected result %+v", res)
			}
			if _, ok := res.Content[0].(*mcp.TextContent); !ok {
				t.Fatalf("want text content, got %T", res.Content[0])
			}
			// A second call reuses the stored upstream session.
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"}); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("demo tools through the aggregated view", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cs := connect(t, e.URL+"/mcp", e.KeyA)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "through aegis"}})
		if err != nil {
			t.Fatal(err)
		}
		if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "through aegis" {
			t.Fatalf("echo answered %+v", res.Content)
		}
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "not-a-tool"})
		if err == nil || !strings.Contains(err.Error(), "-32601") && !strings.Contains(err.Error(), "not found") {
			t.Fatalf("unknown tool: err %v", err)
		}
	})
}

// TestStreamableHTTPRules covers the transport rules of /mcp.
func TestStreamableHTTPRules(t *testing.T) {
	e := newEnv(t)
	accept := "application/json, text/event-stream"
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	r := e.post(t, "/mcp", e.KeyA, init, "Accept", accept)
	sid := r.Header.Get("Mcp-Session-Id")
	if r.code() != 0 || sid == "" || r.Header.Get("X-Session-ID") != sid {
		t.Fatalf("initialize: %d %s headers %v", r.code(), r.Raw, r.Header)
	}
	if !strings.Contains(string(r.Result), `"protocolVersion":"2025-06-18"`) {
		t.Fatalf("version not echoed: %s", r.Result)
	}
	if r := e.post(t, "/mcp", e.KeyA, strings.Replace(init, "2025-06-18", "2024-01-01", 1), "Accept", accept); !strings.Contains(string(r.Result), `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("unsupported version not answered with the newest: %s", r.Result)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, tc := range []struct {
		name       string
		hdr        []string
		wantStatus int
		wantCode   int
	}{
		{"ok", []string{"Accept", accept, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-06-18"}, 200, 0},
		{"no protocol header means 2025-03-26", []string{"Accept", accept, "Mcp-Session-Id", sid}, 200, 0},
		{"unsupported protocol version", []string{"Accept", accept, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2024-01-01"}, 400, -32022},
		{"2026-07-28 without Mcp-Method", []string{"Accept", accept, "MCP-Protocol-Version", "2026-07-28"}, 400, -32020},
		{"2026-07-28 with another Mcp-Method", []string{"Accept", accept, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call"}, 400, -32020},
		{"2026-07-28 without _meta version", []string{"Accept", accept, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"}, 400, -32602},
		{"Accept without event-stream", []string{"Accept", "application/json", "Mcp-Session-Id", sid}, 406, -32600},
		{"no session id", []string{"Accept", accept}, 200, -32600},
		{"unknown session id", []string{"Accept", accept, "Mcp-Session-Id", "feedfacefeedfacefeedfacefeedface"}, 404, -32603},
		{"foreign origin", []string{"Accept", accept, "Mcp-Session-Id", sid, "Origin", "https://evil.example"}, 403, 0},
		{"loopback origin in local mode", []string{"Accept", accept, "Mcp-Session-Id", sid, "Origin", "http://localhost:3000"}, 200, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(t, "/mcp", e.KeyA, list, tc.hdr...)
			if r.Status != tc.wantStatus || r.code() != tc.wantCode {
				t.Fatalf("status %d code %d, want %d %d: %s", r.Status, r.code(), tc.wantStatus, tc.wantCode, r.Raw)
			}
		})
	}
	t.Run("server/discover", func(t *testing.T) {
		r := e.post(t, "/mcp", e.KeyA, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			"Accept", accept, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "server/discover")
		if r.Status != 200 || !strings.Contains(string(r.Result), `"supportedVersions":["2026-07-28","2025-11-25"`) {
			t.Fatalf("discover: status %d %s", r.Status, r.Raw)
		}
		if r.Header.Get("Mcp-Session-Id") != "" {
			t.Fatalf("a stateless request got a session: %v", r.Header)
		}
	})
	t.Run("2026-07-28 Mcp-Name must be the body's", func(t *testing.T) {
		call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
		for _, tc := range []struct {
			name     string
			hdr      []string
			wantCode int
		}{
			{"no Mcp-Name", nil, -32020},
			{"another name", []string{"Mcp-Name", "transfer"}, -32020},
		} {
			hdr := append([]string{"Accept", accept, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call"}, tc.hdr...)
			if r := e.post(t, "/mcp", e.KeyA, call, hdr...); r.Status != 400 || r.code() != tc.wantCode {
				t.Errorf("%s: status %d code %d, want 400 %d: %s", tc.name, r.Status, r.code(), tc.wantCode, r.Raw)
			}
		}
	})
	t.Run("GET stream refusals", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			hdr  []string
			want int
		}{
			{"no Accept", []string{"Mcp-Session-Id", sid}, http.StatusNotAcceptable},
			{"no session", []string{"Accept", "text/event-stream"}, http.StatusBadRequest},
			{"unknown session", []string{"Accept", "text/event-stream", "Mcp-Session-Id", "feedfacefeedfacefeedfacefeedface"}, http.StatusNotFound},
			{"2026-07-28 has none", []string{"Accept", "text/event-stream", "MCP-Protocol-Version", "2026-07-28"}, http.StatusMethodNotAllowed},
		} {
			req, _ := http.NewRequest(http.MethodGet, e.URL+"/mcp", nil)
			req.Header.Set("Authorization", "Bearer "+e.KeyA)
			for i := 0; i < len(tc.hdr); i += 2 {
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			if r := do(t, req); r.Status != tc.want {
				t.Errorf("%s: GET %d, want %d", tc.name, r.Status, tc.want)
			}
		}
	})
	t.Run("notification is 202", func(t *testing.T) {
		r := e.post(t, "/mcp", e.KeyA, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Accept", accept, "Mcp-Session-Id", sid)
		if r.Status != http.StatusAccepted || len(r.Raw) != 0 {
			t.Fatalf("notification: %d %q", r.Status, r.Raw)
		}
	})
	t.Run("notification never gets a JSON-RPC error", func(t *testing.T) {
		note := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
		if r := e.post(t, "/mcp", e.KeyA, note, "Accept", "application/json", "Mcp-Session-Id", sid); r.Status != http.StatusNotAcceptable || len(r.Raw) != 0 {
			t.Fatalf("notification with a bad Accept: %d %q; want 406 and no body", r.Status, r.Raw)
		}
		if r := e.post(t, "/mcp", e.KeyA, note, "Accept", accept, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "1999-01-01"); r.Status != http.StatusBadRequest || len(r.Raw) != 0 {
			t.Fatalf("notification with a bad protocol version: %d %q; want 400 and no body", r.Status, r.Raw)
		}
	})
	t.Run("DELETE of another caller's session is 404", func(t *testing.T) {
		other, k := auth.NewKey("acme", "other-agent", e.Clock.Now())
		must(t, e.Store.PutKey(context.Background(), k))
		req, _ := http.NewRequest(http.MethodDelete, e.URL+"/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+other)
		req.Header.Set("Mcp-Session-Id", sid)
		if r := do(t, req); r.Status != http.StatusNotFound {
			t.Fatalf("DELETE by another caller: %d %s; want 404", r.Status, r.Raw)
		}
		if r := e.post(t, "/mcp", e.KeyA, list, "Accept", accept, "Mcp-Session-Id", sid); r.code() != 0 {
			t.Fatalf("session ended by another caller: %d %s", r.Status, r.Raw)
		}
	})
	t.Run("DELETE ends the session", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodDelete, e.URL+"/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+e.KeyA)
		req.Header.Set("Mcp-Session-Id", sid)
		if r := do(t, req); r.Status != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", r.Status, r.Raw)
		}
		if r := e.post(t, "/mcp", e.KeyA, list, "Accept", accept, "Mcp-Session-Id", sid); r.Status != 404 {
			t.Fatalf("ended session still answers: %d", r.Status)
		}
	})
	t.Run("unknown server path", func(t *testing.T) {
		r := e.post(t, "/mcp/nope", e.KeyA, init, "Accept", accept)
		if r.code() != -32601 {
			t.Fatalf("initialize on an unknown server: %s", r.Raw)
		}
	})
}

// TestPassThroughExactness: ids, unknown params members and _meta reach the
// upstream byte for byte, and the upstream's answer comes back with the
// client's exact id.
func TestPassThroughExactness(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		seen = append(seen, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "up-1")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"raw","version":"1"}}}`)
		case "notifications/initialized":
			w.WriteHeader(http.StatusAccepted)
		case "tools/list":
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"tools":[{"name":"probe","inputSchema":{"type":"object"}}]}}`)
		default:
			if r.Header.Get("Mcp-Session-Id") != "up-1" || r.Header.Get("Authorization") != "" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"content":[{"type":"text","text":"ok"}],"extra":{"kept":true}}}`)
		}
	}))
	t.Cleanup(up.Close)
	e := newEnv(t, func(_ *config.Settings, m *memstore.Store) {
		must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "raw", URL: up.URL}))
	})
	params := `{"name":"probe","arguments":{"b":2,"a":[1,2.50,"x"]},"_meta":{"progressToken":"p-1","vendor/x":{"y":null}},"x-unknown":{"keep":"me"}}`
	body := `{"jsonrpc":"2.0","id":98765432109876543210,"method":"tools/call","params":` + params + `}`
	r := e.post(t, "/v1/invoke", e.KeyA, body)
	if r.code() != 0 || string(r.ID) != "98765432109876543210" {
		t.Fatalf("answer %s", r.Raw)
	}
	if !strings.Contains(string(r.Result), `"extra":{"kept":true}`) {
		t.Fatalf("result members dropped: %s", r.Result)
	}
	mu.Lock()
	defer mu.Unlock()
	last := seen[len(seen)-1]
	want := `{"jsonrpc":"2.0","id":98765432109876543210,"method":"tools/call","params":` + params + `}`
	if last != want {
		t.Fatalf("upstream saw\n %s\nwant\n %s", last, want)
	}
}
