package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/connecttest"
	"github.com/aegis-gw/aegis/shared/memstore"
)

// answersOf is an http.RoundTripper that keeps the body of every answer
// to a tools/call it carries.
type answersOf struct {
	base http.RoundTripper
	mu   sync.Mutex
	got  []string
}

func (a *answersOf) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.base.RoundTrip(req)
	if err != nil || req.Header.Get("Mcp-Method") != "tools/call" {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.got = append(a.got, string(b))
	a.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

func (a *answersOf) answers() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.got...)
}

// TestConnectionsModernClient: MCP 2026-07-28 forbids -32042 and asks a
// client for input with an input-required result (SEP-2322), whose
// inputRequests may hold a URL-mode elicitation/create. The Go SDK's
// client at 2026-07-28, declaring elicitation.url, calls a tool of a
// server with auth: oauth: it is answered with that result (the link as
// a URL-mode elicitation under "aegis.connection", no requestState), its
// elicitation handler follows the link through the npm oidc-provider's
// login and consent and accepts, and the client's retry of the identical
// call succeeds with the caller's own grant. A retry that answered the
// elicitation (declined, or accepted while the person has not connected
// yet) gets -33065 with a fresh link: the person is asked once per call.
// A client without the url capability gets -33065 with the link.
func TestConnectionsModernClient(t *testing.T) {
	w := newConnWorld(t, memstore.New())
	prefix := w.gw + "/t/acme/connect/start?state="
	connect := func(t *testing.T, caller string, caps *mcp.ClientCapabilities, handler func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) (*mcp.ClientSession, *answersOf) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rec := &answersOf{base: bearerClient(w.keys[caller]).Transport}
		c := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{Capabilities: caps, ElicitationHandler: handler})
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: w.gw + "/t/acme/mcp", HTTPClient: &http.Client{Transport: rec}}, nil)
		must(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
			t.Fatalf("the client speaks %s; want 2026-07-28", v)
		}
		return cs, rec
	}
	urlCaps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}

	t.Run("elicitation.url", func(t *testing.T) {
		var asked []*mcp.ElicitParams
		cs, rec := connect(t, "alice", urlCaps, func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = append(asked, req.Params)
			if st, page, _ := connecttest.Consent(t, connecttest.Browser(nil), req.Params.URL, "alice", nil); st != http.StatusOK || !strings.Contains(page, "Connected to docs") {
				t.Errorf("consent ended %d: %.300s", st, page)
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		})
		_, before := w.up.Seen()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.whoami", Arguments: map[string]any{}})
		must(t, err)
		if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "subject=alice" {
			t.Fatalf("the call after consent: %+v", res.Content)
		}
		if len(asked) != 1 || asked[0].Mode != "url" || asked[0].ElicitationID == "" || !strings.HasPrefix(asked[0].URL, prefix) || asked[0].Message == "" {
			t.Fatalf("the client was asked %+v; want one url elicitation with the link", asked)
		}
		ans := rec.answers()
		if len(ans) != 2 || !strings.Contains(ans[0], `"resultType":"input_required"`) || !strings.Contains(ans[0], `"aegis.connection":{"method":"elicitation/create"`) ||
			strings.Contains(ans[0], "requestState") || strings.Contains(ans[0], `"error"`) || !strings.Contains(ans[1], "subject=alice") {
			t.Fatalf("the answers on the wire: %q", ans)
		}
		if _, calls := w.up.Seen(); calls == before {
			t.Fatal("the retry did not reach the upstream")
		}
	})

	for _, tc := range []struct {
		name, action string
		caps         *mcp.ClientCapabilities
	}{
		{"declined", "decline", urlCaps},
		{"accepted, not connected yet", "accept", urlCaps},
		{"no url capability", "accept", &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := 0
			cs, _ := connect(t, "bob", tc.caps, func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked++
				return &mcp.ElicitResult{Action: tc.action}, nil
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.whoami", Arguments: map[string]any{}})
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != -33065 || !strings.Contains(we.Message, prefix) || !strings.Contains(string(we.Data), `"code":"CONNECTION_REQUIRED"`) {
				t.Fatalf("err %v; want -33065 CONNECTION_REQUIRED with the link", err)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.caps == urlCaps]; asked != want {
				t.Fatalf("the person was asked %d times; want %d", asked, want)
			}
		})
	}
}
