package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// floodServer is a real MCP server (Go SDK, stateful) whose tool "flood"
// asks the client for input up to 10 times in one call, stopping at the
// first failure, and answers how many answers it got and why it stopped.
func floodServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "flood", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "flood", Description: "Asks the user many times."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			got, why := 0, "done"
			for range 10 {
				if _, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
					Message:         "again?",
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
				}); err != nil {
					why = err.Error()
					break
				}
				got++
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("got %d; %s", got, why)}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRelayedRequestsAreCounted: a server flooding the client with
// elicitation/create during one call is held to the rate limit like a
// client flooding a server. With RATE_LIMIT_PER_TOOL=3 the client sees
// three requests (its "client:elicitation/create" window of that server);
// the fourth is not relayed and the server gets -32004 as its answer. With
// RATE_LIMIT_PER_SESSION=4 the call, the first request, its answer and
// the second request fill the session's window: the client's second
// answer is not carried (HTTP 429) and the server gets -32004 instead.
// Each relayed request and answer is audited, the refused ones as
// refused with -32004.
func TestRelayedRequestsAreCounted(t *testing.T) {
	for _, tc := range []struct {
		name               string
		set                func(*config.Settings)
		wantAsked, wantGot int
		refused            string // the method audited as refused
	}{
		{"per tool: the server's requests", func(s *config.Settings) { s.RateLimitPerTool = 3 }, 3, 3, "elicitation/create"},
		{"per session: the client's answers too", func(s *config.Settings) { s.RateLimitPerSession = 4 }, 2, 1, "response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := floodServer(t)
			e := newEnv(t, func(s *config.Settings, m *memstore.Store) {
				s.RateLimitPerSession, s.RateLimitPerTool, s.RateLimitPerKey = 0, 0, 0
				tc.set(s)
				must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "flood", URL: url}))
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var asked atomic.Int32
			client := mcp.NewClient(&mcp.Implementation{Name: "patient", Version: "1"}, &mcp.ClientOptions{
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked.Add(1)
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
				},
			})
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.URL + "/mcp/flood", HTTPClient: bearerClient(e.KeyA)},
				&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			must(t, err)
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "flood"})
			must(t, err)
			text := textOf(res)
			if want := fmt.Sprintf("got %d; ", tc.wantGot); !strings.HasPrefix(text, want) || !strings.Contains(text, "Rate limit exceeded") {
				t.Fatalf("tool answered %q, want %q and the -32004 message", text, want+"...")
			}
			if n := int(asked.Load()); n != tc.wantAsked {
				t.Fatalf("the client was asked %d times, want %d", n, tc.wantAsked)
			}
			// The records are written as the messages pass: wait for the
			// last one.
			var elicit, answers, refused int
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				elicit, answers, refused = 0, 0, 0
				for _, r := range auditRecords(t, e) {
					switch {
					case r.Method == tc.refused && r.Outcome == audit.OutcomeRefused && r.Code == -32004:
						refused++
					case r.Method == "elicitation/create" && r.Outcome == audit.OutcomeAllowed && r.Server == "flood" && r.Tool == "client:elicitation/create":
						elicit++
					case r.Method == "response" && r.Outcome == audit.OutcomeAllowed && r.Server == "flood":
						answers++
					}
				}
				if elicit == tc.wantAsked && answers == tc.wantGot && refused == 1 {
					return
				}
			}
			t.Fatalf("audited %d relayed requests, %d answers, %d refused %s; want %d, %d, 1", elicit, answers, refused, tc.refused, tc.wantAsked, tc.wantGot)
		})
	}
}
