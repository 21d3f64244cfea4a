package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/internal/mcptest"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/registry"
)

// TestCloseStreams: CloseStreams ends a GET stream (its body ends) and a
// subscriptions/listen with the graceful end (the request's result,
// resultType complete), both held with the default five-minute
// ListenTimeout; a GET stream asked for afterwards is 503 with
// Retry-After.
func TestCloseStreams(t *testing.T) {
	e, sid := everythingSession(t)
	get := func() *http.Response {
		req, _ := http.NewRequest(http.MethodGet, e.URL+"/mcp/everything", nil)
		req.Header.Set("Authorization", "Bearer "+e.KeyA)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		return resp
	}
	stream := get()
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: HTTP %d", stream.StatusCode)
	}

	// A 2026-07-28 subscriptions/listen on a gateway of its own over the
	// same store (a stateless upstream), read up to its acknowledgment.
	modern := mcptest.Conformance(t, true)
	must(t, e.Store.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "modern", URL: modern}))
	g, err := gateway.New(e.Store, &gateway.Options{Settings: e.Settings, Now: e.Clock.Now})
	must(t, err)
	srv := httptest.NewServer(g)
	defer srv.Close()
	body := `{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"notifications":{"toolsListChanged":true}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp/modern", strings.NewReader(body))
	listenHeaders(req, e.KeyA)
	listen, err := http.DefaultClient.Do(req)
	must(t, err)
	defer listen.Body.Close()
	sc := bufio.NewScanner(listen.Body)
	next := func() map[string]json.RawMessage {
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]json.RawMessage
				must(t, json.Unmarshal([]byte(d), &m))
				return m
			}
		}
		return nil
	}
	if m := next(); string(m["method"]) != `"notifications/subscriptions/acknowledged"` {
		t.Fatalf("first message %v, want the acknowledgment", m)
	}

	e.Gateway.CloseStreams()
	g.CloseStreams()
	if _, err := io.Copy(io.Discard, stream.Body); err != nil {
		t.Fatalf("GET stream ended with %v, want its end", err)
	}
	last := next()
	if string(last["id"]) != `"L1"` || !strings.Contains(string(last["result"]), `"resultType":"complete"`) {
		t.Fatalf("subscriptions/listen's last message %v, want the graceful end", last)
	}
	if m := next(); m != nil {
		t.Fatalf("a message after the end: %v", m)
	}
	again := get()
	b, _ := io.ReadAll(again.Body)
	again.Body.Close()
	if again.StatusCode != http.StatusServiceUnavailable || again.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "stopping") {
		t.Fatalf("GET after CloseStreams: HTTP %d %q (Retry-After %q); want 503 saying the gateway is stopping", again.StatusCode, b, again.Header.Get("Retry-After"))
	}
}
