package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/mcptest"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// TestSubscriptionsListen: a 2026-07-28 client (the Go SDK client, which
// opens subscriptions/listen for list changes at connect and another for
// each Subscribe) gets, through /mcp and /mcp/{server}, from an upstream
// of either version, the notifications/resources/updated of its
// subscription (the everything-server updates test://watched-resource
// every 3 s) and a tools/list_changed, after which the gateway lists the
// server again.
func TestSubscriptionsListen(t *testing.T) {
	for _, up := range []struct {
		name      string
		stateless bool
	}{{"upstream 2025 stateful", false}, {"upstream 2026 stateless", true}} {
		t.Run(up.name, func(t *testing.T) {
			upstreamURL := mcptest.Conformance(t, up.stateless)
			e := newEnv(t, func(_ *config.Settings, m *memstore.Store) {
				must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "everything", URL: upstreamURL}))
			})
			for _, path := range []string{"/mcp", "/mcp/everything"} {
				t.Run(path, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
					defer cancel()
					changed, updated := make(chan struct{}, 16), make(chan string, 16)
					client := mcp.NewClient(&mcp.Implementation{Name: "listener", Version: "1"}, &mcp.ClientOptions{
						ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
						ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
					})
					cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.URL + path, HTTPClient: bearerClient(e.KeyA)}, nil)
					must(t, err)
					defer cs.Close()
					if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
						t.Fatalf("negotiated %q, want 2026-07-28", v)
					}
					must(t, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}))
					select {
					case uri := <-updated:
						if uri != "test://watched-resource" {
							t.Fatalf("updated %q", uri)
						}
					case <-time.After(15 * time.Second):
						t.Fatalf("no notifications/resources/updated within 15 s; log:\n%s", e.logs())
					}
					if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_trigger_tool_change"}); err != nil {
						t.Fatal(err)
					}
					select {
					case <-changed:
					case <-time.After(10 * time.Second):
						t.Fatalf("no notifications/tools/list_changed within 10 s; log:\n%s", e.logs())
					}
					tools, err := cs.ListTools(ctx, nil)
					must(t, err)
					var found bool
					for _, tl := range tools.Tools {
						found = found || tl.Name == "__transient_tool_for_list_changed"
					}
					if !found {
						t.Error("the tool added upstream is not listed after list_changed")
					}
				})
			}
		})
	}
}

// TestSubscriptionsListenWire: the stream itself, read raw. The
// acknowledgment comes first and honours what can be honoured (the
// list changes asked for; the resource that routes, under the name the
// client gave it, and not the one that routes nowhere); every message
// carries the request's id as its subscriptionId; the updates name the
// resource as the client did ("everything.test://watched-resource" in the
// aggregate); a quiet stream gets keep-alive comments; and at the end of
// ListenTimeout the stream ends with the request's result, resultType
// complete. A 2025 session gets -32601 for
// the method, and a filter that is not an object -32602.
func TestSubscriptionsListenWire(t *testing.T) {
	upstreamURL := mcptest.Conformance(t, true)
	e := newEnv(t, func(_ *config.Settings, m *memstore.Store) {
		must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "everything", URL: upstreamURL}))
		// A second server lists the same resources, so the aggregate
		// names them SERVER.URI.
		must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "twin", URL: upstreamURL}))
	})
	g, err := gateway.New(e.Store, &gateway.Options{Settings: e.Settings, Now: e.Clock.Now, ListenTimeout: 4 * time.Second, KeepAlive: time.Second})
	must(t, err)
	srv := httptest.NewServer(g)
	defer srv.Close()

	body := `{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},` +
		`"notifications":{"promptsListChanged":true,"resourceSubscriptions":["everything.test://watched-resource","nowhere://x"]}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
	listenHeaders(req, e.KeyA)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
	}
	var msgs []map[string]json.RawMessage
	keepAlives := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == ":" {
			keepAlives++
		}
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]json.RawMessage
			must(t, json.Unmarshal([]byte(d), &m))
			msgs = append(msgs, m)
		}
	}
	if keepAlives == 0 {
		t.Error("no keep-alive comment in 4 s with KeepAlive 1 s")
	}
	if len(msgs) < 3 {
		t.Fatalf("%d messages, want the acknowledgment, an update (every 3 s) and the end", len(msgs))
	}
	var ack struct {
		Meta          map[string]string `json:"_meta"`
		Notifications struct {
			Prompts bool     `json:"promptsListChanged"`
			Tools   bool     `json:"toolsListChanged"`
			URIs    []string `json:"resourceSubscriptions"`
		} `json:"notifications"`
	}
	if string(msgs[0]["method"]) != `"notifications/subscriptions/acknowledged"` {
		t.Fatalf("first message %v, want the acknowledgment", msgs[0])
	}
	must(t, json.Unmarshal(msgs[0]["params"], &ack))
	if n := ack.Notifications; !n.Prompts || n.Tools || len(n.URIs) != 1 || n.URIs[0] != "everything.test://watched-resource" {
		t.Fatalf("acknowledged %s", msgs[0]["params"])
	}
	if ack.Meta["io.modelcontextprotocol/subscriptionId"] != "L1" {
		t.Fatalf("acknowledgment _meta %v", ack.Meta)
	}
	for _, m := range msgs[1 : len(msgs)-1] {
		var p struct {
			Meta map[string]string `json:"_meta"`
			URI  string            `json:"uri"`
		}
		must(t, json.Unmarshal(m["params"], &p))
		if string(m["method"]) != `"notifications/resources/updated"` || p.URI != "everything.test://watched-resource" || p.Meta["io.modelcontextprotocol/subscriptionId"] != "L1" {
			t.Fatalf("relayed %v", m)
		}
	}
	last := msgs[len(msgs)-1]
	if string(last["id"]) != `"L1"` || !strings.Contains(string(last["result"]), `"resultType":"complete"`) || !strings.Contains(string(last["result"]), `"io.modelcontextprotocol/subscriptionId":"L1"`) {
		t.Fatalf("last message %v, want the graceful end", last)
	}

	// A 2025 session's GET stream gets the keep-alive comments too.
	t.Run("GET keep-alive", func(t *testing.T) {
		ireq, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		ireq.Header.Set("Authorization", "Bearer "+e.KeyA)
		ireq.Header.Set("Accept", "application/json, text/event-stream")
		ir := do(t, ireq)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+e.KeyA)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", ir.Header.Get("Mcp-Session-Id"))
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == ":" {
				return
			}
		}
		t.Fatalf("GET stream (status %d) ended without a keep-alive comment: %v", resp.StatusCode, sc.Err())
	})

	// A 2025 session has no such method; a filter must be an object.
	for _, tc := range []struct {
		name, body string
		modern     bool
		code       int
	}{
		{"2025", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{}}}`, false, -32601},
		{"no filter", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"notifications":[]}}`, true, -32602},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.modern {
				hdr = []string{"Accept", "application/json, text/event-stream", "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "subscriptions/listen"}
			} else {
				accept := []string{"Accept", "application/json, text/event-stream"}
				init := e.post(t, "/mcp", e.KeyA, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, accept...)
				hdr = append(accept, "Mcp-Session-Id", init.Header.Get("Mcp-Session-Id"))
			}
			r := e.post(t, "/mcp", e.KeyA, tc.body, hdr...)
			if r.code() != tc.code {
				t.Fatalf("%s, want %d", r.Raw, tc.code)
			}
		})
	}
}

func listenHeaders(req *http.Request, key string) {
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
}

// TestNoResumption: what the gateway does about Last-Event-ID, which
// 2025-11-25 leaves optional and 2026-07-28 removed (docs/design/protocol.md,
// "Resumption"): its events carry no id (a call streaming progress is
// read raw), so a client has nothing to resume from; and a GET with
// Last-Event-ID is a fresh stream, not an error.
func TestNoResumption(t *testing.T) {
	e, sid := everythingSession(t)
	accept := []string{"Accept", "application/json, text/event-stream"}
	r := e.post(t, "/mcp/everything", e.KeyA, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":"p"}}}`,
		append(accept, "Mcp-Session-Id", sid)...)
	if ct := r.Header.Get("Content-Type"); ct != "text/event-stream" || !strings.Contains(string(r.Raw), "notifications/progress") {
		t.Fatalf("content type %q, body %s; want progress events", ct, r.Raw)
	}
	for _, line := range strings.Split(string(r.Raw), "\n") {
		if strings.HasPrefix(line, "id:") {
			t.Fatalf("an event carries an id (%q): resumption would have to be built", line)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/mcp/everything", nil)
	req.Header.Set("Authorization", "Bearer "+e.KeyA)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Last-Event-ID", "everything-42")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET with Last-Event-ID: %d %q, want a fresh stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestSubscriptionsListenBuffered: behind a host that buffers the answer
// (the Lambda adapter; here a recorder, which cannot hold a stream open
// either), subscriptions/listen is acknowledged with nothing honoured and
// its result follows at once, in the one body.
func TestSubscriptionsListenBuffered(t *testing.T) {
	e := newEnv(t)
	body := `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"notifications":{"toolsListChanged":true}}}`
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	listenHeaders(req, e.KeyA)
	rec := httptest.NewRecorder()
	e.Gateway.ServeHTTP(rec, req)
	var data []string
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = append(data, d)
		}
	}
	if len(data) != 2 ||
		data[0] != `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7},"notifications":{}}}` ||
		!strings.Contains(data[1], `"id":7`) || !strings.Contains(data[1], `"resultType":"complete"`) {
		t.Fatalf("status %d, body:\n%s\nwant the empty acknowledgment, then the result", rec.Code, rec.Body)
	}
}

// everythingSession is a gateway whose tenant acme has the conformance
// everything-server as server "everything", and a 2025-11-25 session of
// key A opened on /mcp/everything.
func everythingSession(t *testing.T) (*env, string) {
	t.Helper()
	upstreamURL := mcptest.Conformance(t, false)
	e := newEnv(t, func(_ *config.Settings, m *memstore.Store) {
		must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "everything", URL: upstreamURL}))
	})
	init := e.post(t, "/mcp/everything", e.KeyA, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		"Accept", "application/json, text/event-stream")
	sid := init.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %s", init.Raw)
	}
	return e, sid
}
