package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/mcptest"
	"github.com/aegis-gw/aegis/internal/npmcache"
	"github.com/aegis-gw/aegis/internal/syncbuf"
)

// oidcProvider is the issuer docs/oauth.md's walkthrough runs, pinned as
// in examples/oauth/package.json.
var oidcProvider = npmcache.Package{Name: "oidc-provider", Version: "9.13.3"}

// TestOAuthWalkthrough runs docs/oauth.md's "Try it locally" step by step,
// ports aside: examples/oauth/issuer.mjs (panva's oidc-provider) as the
// issuer, `aegis serve --demo` with the admin API, the issuer put on the
// demo tenant, a client-credentials token for /t/demo/mcp with scope mcp,
// and initialize and tools/call with it. What a client must send is
// checked too: without the scope the token is 403 insufficient_scope,
// for another resource 401 audience.
func TestOAuthWalkthrough(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir, err := npmcache.Dir("oidc-provider")
	if err != nil {
		t.Fatal(err)
	}
	if err := npmcache.Install(ctx, dir, npmcache.Node, oidcProvider); err != nil {
		t.Fatalf("MISSING TOOL: %v", err)
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "oauth", "issuer.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile(filepath.Join("..", "..", "examples", "oauth", "package.json"))
	if err != nil || !strings.Contains(string(pkg), `"oidc-provider": "`+oidcProvider.Version+`"`) {
		t.Fatalf("examples/oauth/package.json does not pin %s: %v", oidcProvider, err)
	}
	script := filepath.Join(dir, "issuer.mjs") // beside node_modules, where its import resolves
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}

	adminKey := strings.Repeat("walkthrough-admin-key-", 2)
	gw := startServe(t, []string{"AEGIS_ADMIN_KEY=" + adminKey}, "--demo")
	resource := gw.base + "/t/demo/mcp"

	issuerAddr := mcptest.FreePort(t)
	port := issuerAddr[strings.LastIndexByte(issuerAddr, ':')+1:]
	issuer := "http://127.0.0.1:" + port
	var issuerOut syncbuf.Buffer
	cmd := exec.CommandContext(ctx, npmcache.NodeBin(dir), script)
	cmd.Env = append(os.Environ(), "ISSUER_PORT="+port, "GATEWAY="+gw.base+"/")
	cmd.Stdout, cmd.Stderr = &issuerOut, &issuerOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(issuerOut.String(), "issuer "+issuer); {
		if time.Now().After(deadline) {
			t.Fatalf("the issuer did not start:\n%s", issuerOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	do := func(req *http.Request) (int, http.Header, string) {
		t.Helper()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	// Step 3: the demo tenant trusts the issuer for /t/demo/mcp.
	body := `{"issuers":[{"url":"` + issuer + `","audiences":["` + resource + `"],"required_scopes":["mcp"]}]}`
	req, _ := http.NewRequest(http.MethodPut, gw.base+"/admin/v1/tenants/demo/issuers", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	req.Header.Set("Content-Type", "application/json")
	if st, _, b := do(req); st != http.StatusOK {
		t.Fatalf("PUT issuers = %d %s", st, b)
	}
	// Step 4: a token for that resource, client credentials, scope mcp.
	token := func(form url.Values) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(form.Encode()))
		req.SetBasicAuth("agent", "agent-secret")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		st, _, b := do(req)
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		if st != http.StatusOK || json.Unmarshal([]byte(b), &tok) != nil || tok.AccessToken == "" {
			t.Fatalf("token %v = %d %s", form, st, b)
		}
		return tok.AccessToken
	}
	good := token(url.Values{"grant_type": {"client_credentials"}, "scope": {"mcp"}, "resource": {resource}})
	// Step 5: initialize, then tools/call on the session.
	mcpPost := func(tok, session, payload string) (int, http.Header, string) {
		req, _ := http.NewRequest(http.MethodPost, resource, strings.NewReader(payload))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		return do(req)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	st, h, b := mcpPost(good, "", initialize)
	sid := h.Get("Mcp-Session-Id")
	if st != http.StatusOK || sid == "" || !strings.Contains(b, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize = %d %s (session %q)", st, b, sid)
	}
	st, _, b = mcpPost(good, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}`)
	if st != http.StatusOK || !strings.Contains(b, "hello") || strings.Contains(b, `"error"`) {
		t.Fatalf("tools/call echo = %d %s", st, b)
	}
	// What a client must send: the scope, explicitly, and the resource.
	st, h, b = mcpPost(token(url.Values{"grant_type": {"client_credentials"}, "resource": {resource}}), "", initialize)
	if st != http.StatusForbidden || !strings.Contains(b, "insufficient_scope") || !strings.Contains(h.Get("WWW-Authenticate"), `scope="mcp"`) {
		t.Errorf("a token without scope = %d %s %q; want 403 insufficient_scope", st, b, h.Get("WWW-Authenticate"))
	}
	st, _, b = mcpPost(token(url.Values{"grant_type": {"client_credentials"}, "scope": {"mcp"}, "resource": {gw.base + "/t/demo/v1/invoke"}}), "", initialize)
	if st != http.StatusUnauthorized || !strings.Contains(b, "token audience is not this endpoint's resource") {
		t.Errorf("a token for another resource = %d %s; want 401 audience", st, b)
	}
	st, h, b = mcpPost("", "", initialize)
	if st != http.StatusUnauthorized || !strings.Contains(b, "missing token") || !strings.Contains(h.Get("WWW-Authenticate"), `resource_metadata="`+gw.base+`/.well-known/oauth-protected-resource/t/demo/mcp"`) {
		t.Errorf("no token = %d %s %q", st, b, h.Get("WWW-Authenticate"))
	}
}
