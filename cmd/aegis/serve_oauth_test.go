package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/aegis-gw/aegis/internal/mcptest"
	"github.com/aegis-gw/aegis/internal/oidctest"
	"github.com/aegis-gw/aegis/shared/demo"
)

// TestServeOAuth: an MCP client (the Go SDK's, with its authorization
// code handler) connects to `aegis serve` on a tenant's path with no
// credentials. It gets the 401 with resource_metadata, reads the
// protected resource metadata, discovers the tenant's issuer (a real
// OpenID issuer on loopback), registers itself, obtains a token for the
// resource (PKCE, RFC 8707), and then initializes, lists and calls tools
// with it. The upstream never sees the token.
func TestServeOAuth(t *testing.T) {
	is := oidctest.Start(t, &oidctest.Options{Claims: map[string]any{"sub": "oauth-agent"}})
	up, err := demo.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	addr := mcptest.FreePort(t)
	resource := "http://" + addr + "/t/acme/mcp"
	cfg := fmt.Sprintf(`tenants:
  - id: acme
    tier: growth
    servers:
      - name: up
        url: %s
    issuers:
      - url: %s
        audiences: [%s]
        required_scopes: [mcp]
        scope_roles: {"tools:write": [writer]}
`, up.URL, is.URL, resource)
	path := filepath.Join(t.TempDir(), "aegis.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// startServe's own --addr comes first; the last one given wins.
	p := startServe(t, nil, "--config", path, "--addr", addr)
	if !p.running() {
		t.Fatalf("aegis serve exited: %v\n%s", p.err, p.stderr.String())
	}

	// The 401 a client without a token gets.
	resp, err := http.Post(resource, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantChallenge := `Bearer realm="aegis", resource_metadata="http://` + addr + `/.well-known/oauth-protected-resource/t/acme/mcp", error_description="missing token; `
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), wantChallenge) || !strings.HasPrefix(string(body), `{"error":"unauthorized: `) {
		t.Fatalf("no token: %d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}

	var fetched []string
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{RedirectURIs: []string{"http://127.0.0.1:1/callback"}, ClientName: "aegis-test"},
		},
		AuthorizationCodeFetcher: func(_ context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			fetched = append(fetched, args.URL)
			code, state, err := oidctest.FetchCode(http.DefaultClient, args.URL)
			return &auth.AuthorizationResult{Code: code, State: state}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "oauth-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: resource, OAuthHandler: h}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, p.stderr.String())
	}
	defer cs.Close()
	// The scopes are a set (RFC 6749 §3.3): the SDK's order is its own.
	var q url.Values
	if len(fetched) == 1 {
		if u, err := url.Parse(fetched[0]); err == nil {
			q = u.Query()
		}
	}
	scopes := strings.Fields(q.Get("scope"))
	if len(fetched) != 1 || q.Get("resource") != resource || !slices.Contains(scopes, "mcp") || !slices.Contains(scopes, "tools:write") {
		t.Fatalf("authorization requests %q: want one, for the resource, with the scopes the metadata lists", fetched)
	}
	if n := is.TokensIssued(); n != 1 {
		t.Fatalf("issuer issued %d tokens, want 1", n)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "echo") {
		t.Fatalf("tools/list = %v, want echo", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello over oauth"}})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("tools/call: %+v %v", res, err)
	}
	if txt, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(txt.Text, "hello over oauth") {
		t.Fatalf("tools/call content = %+v", res.Content[0])
	}
	if got := up.Calls("echo"); got != 1 {
		t.Errorf("upstream saw %d echo calls, want 1", got)
	}
	if strings.Contains(p.stderr.String(), "eyJ") {
		t.Errorf("something token-like is in the log:\n%s", p.stderr.String())
	}
}
