package gateway_test

// A session's own manifest (_meta["aegis/manifest"] on the request that
// opens it) narrows the tenant's and the key's, and never widens them, on
// both stores: over /v1/invoke (the call that opens the session) and over
// /mcp (initialize, through the Go SDK client).

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
)

// tenantManifest grants echo and transfer, at most 3 tool calls.
const tenantManifest = "manifest: {max_tool_calls: 3, grants: {tools/call: [\"mock-primary/echo\", \"mock-primary/transfer\"]}}\n"

func TestPolicySessionManifest(t *testing.T) {
	echo := `{"message":"hi"}`
	for _, st := range polStores {
		t.Run(st.name, func(t *testing.T) {
			e := newPolEnv(t, st.new(t), registry.Tenant{}, tenantManifest)

			t.Run("narrows", func(t *testing.T) {
				r, sid := e.invoke(t, e.Key, "", "echo", echo, `{"aegis/manifest":{"grants":{"tools/call":["mock-primary/echo"]},"max_tool_calls":2}}`)
				if r.Error != nil || sid == "" {
					t.Fatalf("opening call = %s", r.Raw)
				}
				if r, _ := e.invoke(t, e.Key, sid, "transfer", transferArgs, ""); r.code() != -32005 || r.reason() != "grant" {
					t.Fatalf("transfer, outside the session's grant = %s; want -32005 grant", r.Raw)
				}
				if got := e.listIn(t, e.Key, sid); !slices.Equal(got, []string{"echo"}) {
					t.Errorf("tools/list in the session = %v; want [echo]", got)
				}
				if r, _ := e.invoke(t, e.Key, sid, "echo", echo, ""); r.Error != nil {
					t.Fatalf("second echo = %s", r.Raw)
				}
				if r, _ := e.invoke(t, e.Key, sid, "echo", echo, ""); r.code() != -32005 || r.reason() != "tool_calls" {
					t.Fatalf("third echo, past the session's 2 = %s; want -32005 tool_calls", r.Raw)
				}
				// Another session of the same key is not narrowed.
				r, other := e.invoke(t, e.Key, "", "transfer", transferArgs, "")
				if r.Error != nil || other == sid {
					t.Fatalf("transfer in a new session = %s", r.Raw)
				}
			})
			t.Run("cannot widen", func(t *testing.T) {
				r, sid := e.invoke(t, e.Key, "", "echo", echo, `{"aegis/manifest":{"grants":{"tools/call":["*/*"]},"max_tool_calls":100}}`)
				if r.Error != nil {
					t.Fatalf("opening call = %s", r.Raw)
				}
				if r, _ := e.invoke(t, e.Key, sid, "leak", `{}`, ""); r.code() != -32005 || r.reason() != "grant" {
					t.Fatalf("leak, outside the tenant's grant = %s; want -32005 grant", r.Raw)
				}
				if got := e.listIn(t, e.Key, sid); !slices.Equal(got, []string{"echo", "transfer"}) {
					t.Errorf("tools/list in the session = %v; want the tenant's [echo transfer]", got)
				}
				for i := range 2 {
					if r, _ := e.invoke(t, e.Key, sid, "echo", echo, ""); r.Error != nil {
						t.Fatalf("echo %d = %s", i+2, r.Raw)
					}
				}
				if r, _ := e.invoke(t, e.Key, sid, "echo", echo, ""); r.code() != -32005 || r.reason() != "tool_calls" {
					t.Fatalf("fourth echo, past the tenant's 3 = %s; want -32005 tool_calls", r.Raw)
				}
			})
			t.Run("bad or late", func(t *testing.T) {
				for _, m := range []string{`{"max_tool_calls":-1}`, `{"bogus":1}`, `"all"`, `{"grants":{"tools/list":["*/*"]}}`} {
					r, sid := e.invoke(t, e.Key, "", "echo", echo, `{"aegis/manifest":`+m+`}`)
					if r.code() != -32602 || !strings.Contains(r.Error.Message, "aegis/manifest") || sid != "" {
						t.Errorf("manifest %s = %s (session %q); want -32602 naming it, no session", m, r.Raw, sid)
					}
				}
				_, sid := e.invoke(t, e.Key, "", "echo", echo, "")
				if r, _ := e.invoke(t, e.Key, sid, "echo", echo, `{"aegis/manifest":{"max_tool_calls":1}}`); r.code() != -32602 {
					t.Errorf("a manifest on a later call = %s; want -32602", r.Raw)
				}
			})
			t.Run("initialize over /mcp", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				client := mcp.NewClient(&mcp.Implementation{Name: "narrowing", Version: "1"}, nil)
				client.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
					return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
						if p, ok := req.GetParams().(*mcp.InitializeParams); ok {
							p.Meta = mcp.Meta{"aegis/manifest": map[string]any{
								"grants": map[string]any{"tools/call": []string{"mock-primary/echo"}}, "max_tool_calls": 1,
							}}
						}
						return next(ctx, method, req)
					}
				})
				cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
					Endpoint: e.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{key: e.Key, base: http.DefaultTransport}},
				}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				tools, err := cs.ListTools(ctx, nil)
				if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
					t.Fatalf("tools/list = %+v, %v; want echo alone", tools, err)
				}
				if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}}); err != nil || res.IsError {
					t.Fatalf("echo = %+v, %v", res, err)
				}
				_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
				var we *jsonrpc.Error
				if !errors.As(err, &we) || we.Code != -32005 {
					t.Fatalf("second echo = %v; want -32005 (the session's max_tool_calls 1)", err)
				}
			})
		})
	}
}

// TestPolicyStatelessRequests: a stateless request (MCP 2026-07-28) has
// no session: the session clocks do not apply to it, and a budget it
// cannot be counted in refuses it (fail closed), in the list as in the
// call; grants still apply.
func TestPolicyStatelessRequests(t *testing.T) {
	for _, st := range polStores {
		t.Run(st.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			echo := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}}

			e := newPolEnv(t, st.new(t), registry.Tenant{}, "manifest: {max_lifetime_secs: 60, max_idle_secs: 30, grants: {tools/call: [\"mock-primary/echo\"]}}\n")
			cs := connectVersion(t, e.URL+"/mcp", e.Key, "")
			if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
				t.Fatalf("negotiated %s, want the stateless 2026-07-28", v)
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
				t.Fatalf("tools/list = %+v, %v; want echo (the grant), not hidden by a clock", tools, err)
			}
			for i := range 2 {
				e.Clock.Advance(time.Hour)
				if res, err := cs.CallTool(ctx, echo); err != nil || res.IsError {
					t.Fatalf("echo %d, an hour on = %+v, %v; the clocks do not apply without a session", i, res, err)
				}
			}
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "transfer", Arguments: map[string]any{"to": "a", "amount": 1}})
			var we *jsonrpc.Error
			// The Go SDK's client speaks 2026-07-28 here (stateless):
			// -32005 in that version's numbering.
			if !errors.As(err, &we) || we.Code != int64(refusal.MCP20260728.Wire(refusal.CodeCapabilityDenied)) || we.Code != -33005 {
				t.Fatalf("transfer = %v; want -33005 grant", err)
			}

			e = newPolEnv(t, st.new(t), registry.Tenant{}, "manifest: {max_tool_calls: 5}\n")
			cs = connectVersion(t, e.URL+"/mcp", e.Key, "")
			if tools, err := cs.ListTools(ctx, nil); err != nil || len(tools.Tools) != 0 {
				t.Fatalf("tools/list under max_tool_calls, no session = %+v, %v; want none", tools, err)
			}
			_, err = cs.CallTool(ctx, echo)
			if !errors.As(err, &we) || we.Code != -33005 || !strings.Contains(string(we.Data), "tool_calls") {
				t.Fatalf("echo under max_tool_calls, no session = %v; want -33005 (2026-07-28) tool_calls", err)
			}
		})
	}
}
