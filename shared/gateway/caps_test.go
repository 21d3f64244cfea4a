//lint:file-ignore SA1019 sampling and roots are deprecated as of 2026-07-28 (SEP-2577), but 2025-11-25 clients and servers use them and the gateway relays them

package gateway_test

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/mcptest"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// TestToolsByClientCapabilities: a real MCP server (mcptest.CapServer)
// that offers its sampling, elicitation (form, url) and roots tools only
// to clients that declared those capabilities. Through /mcp/{server} and
// /mcp, for Go SDK clients of 2025-11-25 (a session) and 2026-07-28
// (stateless), in front of the server stateful and stateless, each client
// is listed exactly the tools the server offers its capabilities, a tool
// it is not offered is -32601 from the gateway, and the server was told
// the client's capabilities as the gateway relays them. Where a request
// to the client can cross (a 2025 session on both sides), each offered
// tool is called and works: the server's request reaches the client and
// the client's answer comes back in the result.
func TestToolsByClientCapabilities(t *testing.T) {
	asks := []string{mcptest.CapToolSampling, mcptest.CapToolForm, mcptest.CapToolURL, mcptest.CapToolRoots}
	type variant struct {
		name    string
		caps    *mcp.ClientCapabilities
		offered []string // the ask tools the server offers it
		told    string   // the capabilities the server is told
		answers map[string]string
	}
	variants := []variant{
		{name: "none", caps: &mcp.ClientCapabilities{}, told: "{}"},
		{name: "sampling", caps: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}},
			offered: []string{mcptest.CapToolSampling}, told: `{"sampling":{}}`,
			answers: map[string]string{mcptest.CapToolSampling: "sampled: hello from the client"}},
		{name: "elicitation form", caps: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}},
			offered: []string{mcptest.CapToolForm}, told: `{"elicitation":{"form":{}}}`,
			answers: map[string]string{mcptest.CapToolForm: "form: accept Ada"}},
		{name: "elicitation url", caps: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
			offered: []string{mcptest.CapToolURL}, told: `{"elicitation":{"url":{}}}`,
			answers: map[string]string{mcptest.CapToolURL: "url: accept"}},
		{name: "roots (the Go SDK's default)", caps: nil,
			offered: []string{mcptest.CapToolRoots}, told: `{"roots":{}}`,
			answers: map[string]string{mcptest.CapToolRoots: "roots: file:///work/a,file:///work/b"}},
		{name: "everything", caps: &mcp.ClientCapabilities{
			RootsV2:     &mcp.RootCapabilities{ListChanged: true},
			Sampling:    &mcp.SamplingCapabilities{},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
		},
			offered: asks, told: `{"elicitation":{"form":{},"url":{}},"roots":{},"sampling":{}}`,
			answers: map[string]string{
				mcptest.CapToolSampling: "sampled: hello from the client", mcptest.CapToolForm: "form: accept Ada",
				mcptest.CapToolURL: "url: accept", mcptest.CapToolRoots: "roots: file:///work/a,file:///work/b",
			}},
	}
	for _, up := range []struct {
		name      string
		stateless bool
	}{{"upstream 2025 stateful", false}, {"upstream 2026 stateless", true}} {
		t.Run(up.name, func(t *testing.T) {
			url := mcptest.CapServer(t, up.stateless)
			e := newEnv(t, func(s *config.Settings, m *memstore.Store) {
				s.RateLimitPerSession, s.RateLimitPerTool, s.RateLimitPerKey = 0, 0, 0
				must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "caps", URL: url}))
			})
			for _, client := range []string{"2025-11-25", "2026-07-28"} {
				for _, path := range []string{"/mcp/caps", "/mcp"} {
					for _, v := range variants {
						t.Run(client+" "+path+" "+v.name, func(t *testing.T) {
							ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
							defer cancel()
							o := &mcp.ClientOptions{Capabilities: v.caps}
							// The Go SDK client declares a capability for each handler it
							// has: set only those of the variant's capabilities.
							if v.caps != nil && v.caps.Sampling != nil {
								o.CreateMessageHandler = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
									return &mcp.CreateMessageResult{Content: &mcp.TextContent{Text: "hello from the client"}, Model: "test", Role: "assistant"}, nil
								}
							}
							if v.caps != nil && v.caps.Elicitation != nil {
								o.ElicitationHandler = func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
									if r.Params.Mode == "url" {
										return &mcp.ElicitResult{Action: "accept"}, nil
									}
									return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
								}
							}
							c := mcp.NewClient(&mcp.Implementation{Name: "capable", Version: "1"}, o)
							c.AddRoots(&mcp.Root{URI: "file:///work/a"}, &mcp.Root{URI: "file:///work/b"})
							version := client
							if client == "2026-07-28" {
								version = "" // the Go SDK client's default: 2026-07-28 when the server speaks it
							}
							cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.URL + path, HTTPClient: bearerClient(e.KeyA)},
								&mcp.ClientSessionOptions{ProtocolVersion: version})
							must(t, err)
							defer cs.Close()
							if got := cs.InitializeResult().ProtocolVersion; got != client {
								t.Fatalf("negotiated %s, want %s", got, client)
							}

							list, err := cs.ListTools(ctx, nil)
							must(t, err)
							var listed []string
							for _, tool := range list.Tools {
								// On /mcp the tenant's other server's tools are listed too.
								if tool.Name == mcptest.CapToolCaps || slices.Contains(asks, tool.Name) {
									listed = append(listed, tool.Name)
								}
							}
							want := append([]string{mcptest.CapToolCaps}, v.offered...)
							sort.Strings(listed)
							sort.Strings(want)
							if !slices.Equal(listed, want) {
								t.Fatalf("listed %v, want %v", listed, want)
							}

							res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcptest.CapToolCaps})
							must(t, err)
							if got := textOf(res); got != v.told {
								t.Fatalf("the server was told %s, want %s", got, v.told)
							}

							for _, ask := range asks {
								offered := slices.Contains(v.offered, ask)
								if !offered {
									_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ask})
									var we *jsonrpc.Error
									if !errors.As(err, &we) || we.Code != -32601 || !strings.Contains(we.Message, "tool "+ask) {
										t.Fatalf("%s, not offered: %v, want the gateway's -32601", ask, err)
									}
									continue
								}
								if client == "2026-07-28" && !up.stateless {
									// A 2025 upstream's request during a call cannot reach a
									// 2026-07-28 client (docs/protocol.md, Versions): listed only.
									continue
								}
								res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ask})
								must(t, err)
								want := v.answers[ask]
								if up.stateless {
									want = "listed for " + v.told
								}
								if got := textOf(res); res.IsError || got != want {
									t.Fatalf("%s answered %q (error %v), want %q", ask, got, res.IsError, want)
								}
							}
						})
					}
				}
			}
		})
	}
}
