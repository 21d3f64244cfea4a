//lint:file-ignore SA1019 sampling and roots are deprecated as of 2026-07-28 (SEP-2577), but 2025-11-25 clients and servers use them, and this server offers them

package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools of CapServer, and the capability each needs.
const (
	CapToolCaps     = "caps"         // every client: answers the capabilities the server was told
	CapToolSampling = "ask_sampling" // sampling: asks the client for a message, answers "sampled: TEXT"
	CapToolForm     = "ask_form"     // elicitation form mode: asks for a name, answers "form: ACTION NAME"
	CapToolURL      = "ask_url"      // elicitation url mode: asks to open a URL, answers "url: ACTION"
	CapToolRoots    = "ask_roots"    // roots: asks for the roots, answers "roots: URI,URI"
)

// CapServer starts a real MCP server (the Go SDK's, over Streamable HTTP
// on loopback, stopped when the test ends) that offers tools by what the
// client declared, as servers do that register a tool only for clients
// they can ask: CapToolCaps to every client, and each ask tool only to a
// client whose capabilities include what it asks for (an empty
// elicitation object counts as form mode, as MCP 2025-11-25 says). The
// capabilities are read from the request itself: initialize's when
// stateful (one server per declared set, for its whole session), the
// request's _meta when stateless (MCP 2026-07-28). It reads them on its
// own, without the gateway's code.
//
// Stateful, the ask tools ask the client during the call and answer with
// what it said. Stateless (2026-07-28 has no requests to the client during
// a call), they answer "listed for CAPS" without asking.
func CapServer(t testing.TB, stateless bool) string {
	t.Helper()
	k := &capKit{stateless: stateless, servers: map[string]*mcp.Server{}}
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		caps, _ := r.Context().Value(capsKey{}).(string)
		return k.server(caps)
	}, &mcp.StreamableHTTPOptions{Stateless: stateless})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				http.Error(w, "unreadable body", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r = r.WithContext(context.WithValue(r.Context(), capsKey{}, declared(body)))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type capsKey struct{}

// declared is the capabilities object a request declares, compacted ("{}"
// when none): initialize's params.capabilities, else the 2026-07-28
// _meta member.
func declared(body []byte) string {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Capabilities json.RawMessage `json:"capabilities"`
			Meta         struct {
				Capabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		return "{}"
	}
	raw := m.Params.Meta.Capabilities
	if m.Method == "initialize" {
		raw = m.Params.Capabilities
	}
	var b bytes.Buffer
	if len(raw) == 0 || json.Compact(&b, raw) != nil || b.Bytes()[0] != '{' {
		return "{}"
	}
	return b.String()
}

type capKit struct {
	stateless bool
	mu        sync.Mutex
	servers   map[string]*mcp.Server // by the declared capabilities
}

// server is the server for clients that declared caps (one per set).
func (k *capKit) server(caps string) *mcp.Server {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s, ok := k.servers[caps]; ok {
		return s
	}
	if len(k.servers) > 64 {
		clear(k.servers) // a test kit, but bounded all the same
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "capserver", Version: "1"}, nil)
	var c struct {
		Sampling    *struct{} `json:"sampling"`
		Roots       *struct{} `json:"roots"`
		Elicitation *struct {
			Form *struct{} `json:"form"`
			URL  *struct{} `json:"url"`
		} `json:"elicitation"`
	}
	_ = json.Unmarshal([]byte(caps), &c)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	add := func(name, desc string, ask func(context.Context, *mcp.CallToolRequest) (string, error)) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc},
			func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				if k.stateless && name != CapToolCaps {
					return text("listed for " + caps), nil, nil
				}
				out, err := ask(ctx, req)
				if err != nil {
					return nil, nil, err
				}
				return text(out), nil, nil
			})
	}
	add(CapToolCaps, "Tells the capabilities the server was told.", func(context.Context, *mcp.CallToolRequest) (string, error) {
		return caps, nil
	})
	if c.Sampling != nil {
		add(CapToolSampling, "Asks the client's model for a greeting.", func(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
				Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "say hello"}}},
				MaxTokens: 16,
			})
			if err != nil {
				return "", err
			}
			if tc, ok := res.Content.(*mcp.TextContent); ok {
				return "sampled: " + tc.Text, nil
			}
			return "", fmt.Errorf("sampling answered %T", res.Content)
		})
	}
	if e := c.Elicitation; e != nil && (e.Form != nil || e.URL == nil) {
		add(CapToolForm, "Asks the user for a name.", func(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
				Mode: "form", Message: "your name?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}},
			})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("form: %s %v", res.Action, res.Content["name"]), nil
		})
	}
	if e := c.Elicitation; e != nil && e.URL != nil {
		add(CapToolURL, "Asks the user to open a page.", func(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
				Mode: "url", Message: "open this page", URL: "https://consent.example/approve", ElicitationID: "e-1",
			})
			if err != nil {
				return "", err
			}
			return "url: " + res.Action, nil
		})
	}
	if c.Roots != nil {
		add(CapToolRoots, "Asks the client for its roots.", func(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
			res, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return "", err
			}
			var uris []string
			for _, r := range res.Roots {
				uris = append(uris, r.URI)
			}
			sort.Strings(uris)
			return "roots: " + strings.Join(uris, ","), nil
		})
	}
	k.servers[caps] = s
	return s
}
