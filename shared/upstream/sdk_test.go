package upstream_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// Against real Go SDK (v1.8.0) servers: stateful (initialize, session id,
// 404 for a lost session) and stateless, which speaks 2026-07-28.

type echoIn struct {
	Message string `json:"message"`
}

func sdkServer(t *testing.T, stateless bool, sawMeta *atomic.Value) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "sdk-upstream", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		if sawMeta != nil {
			b, _ := json.Marshal(req.Params.Meta)
			sawMeta.Store(string(b))
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Message}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func newClient() *upstream.Client {
	return &upstream.Client{HTTP: &http.Client{}, Timeout: 5 * time.Second, MaxRetries: 2}
}

func TestSDKStatelessSpeaks20260728(t *testing.T) {
	var meta atomic.Value
	srv := &registry.Server{Tenant: "t", Name: "s", URL: sdkServer(t, true, &meta)}
	c := newClient()
	ctx := context.Background()
	sess, err := c.Initialize(ctx, srv)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Protocol != upstream.ModernProtocol || sess.ID != "" {
		t.Fatalf("session = %+v; want protocol %s and no session id", sess, upstream.ModernProtocol)
	}
	resp, used, err := c.Call(ctx, &upstream.Exchange{Server: srv, Session: sess, ID: json.RawMessage(`"a-1"`), Method: "tools/call",
		Params: json.RawMessage(`{"name":"echo","arguments":{"message":"hi"},"_meta":{"idempotencyKey":"k"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Error != nil || !strings.Contains(string(resp.Result), "echo: hi") || string(resp.ID) != `"a-1"` {
		t.Fatalf("response = %s / %s / id %s", resp.Result, resp.Error, resp.ID)
	}
	if used != sess {
		t.Fatalf("session changed to %+v", used)
	}
	m, _ := meta.Load().(string)
	if !strings.Contains(m, `"idempotencyKey":"k"`) || !strings.Contains(m, upstream.MetaProtocolVersion) {
		t.Fatalf("upstream saw _meta %s; want the client's members and the SEP-2575 ones", m)
	}
	// tools/list too (the catalog's path).
	resp, _, err = c.Send(ctx, &upstream.Exchange{Server: srv, Session: sess, ID: json.RawMessage(`2`), Method: "tools/list", Params: json.RawMessage(`{}`)})
	if err != nil || !strings.Contains(string(resp.Result), `"echo"`) {
		t.Fatalf("tools/list: %v %s", err, resp.Result)
	}
}

func TestSDKStatefulInitializeAndLostSession(t *testing.T) {
	srv := &registry.Server{Tenant: "t", Name: "s", URL: sdkServer(t, false, nil)}
	c := newClient()
	ctx := context.Background()
	sess, err := c.Initialize(ctx, srv)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Protocol != upstream.ProtocolVersion || sess.ID == "" {
		t.Fatalf("session = %+v; want %s with an Mcp-Session-Id", sess, upstream.ProtocolVersion)
	}
	// A session the upstream does not know (another instance's, or one it
	// dropped): 404, re-initialize once, answer.
	lost := upstream.Session{ID: "gone", Protocol: sess.Protocol}
	resp, used, err := c.Call(ctx, &upstream.Exchange{Server: srv, Session: lost, ID: json.RawMessage(`1`), Method: "tools/call",
		Params: json.RawMessage(`{"name":"echo","arguments":{"message":"again"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.Result), "echo: again") {
		t.Fatalf("result %s", resp.Result)
	}
	if used.ID == "gone" || used.ID == "" {
		t.Fatalf("session after re-initialize = %+v", used)
	}
	// Encode/Decode round trip, as the session record keeps it.
	if got, ok := upstream.DecodeSession(used.Encode()); !ok || got != used {
		t.Fatalf("DecodeSession(Encode) = %+v, %v", got, ok)
	}
	if got, ok := upstream.DecodeSession(upstream.Session{Protocol: upstream.ModernProtocol}.Encode()); !ok || got.Protocol != upstream.ModernProtocol {
		t.Fatalf("stateless session round trip = %+v, %v", got, ok)
	}
}
