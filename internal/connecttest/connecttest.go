// Package connecttest runs, for tests of connections (shared/connect),
// the parts of the flow that nobody here wrote: panva's oidc-provider from
// npm as an upstream server's authorization server (login and consent
// pages, PKCE, RFC 8707 resource indicators, rotated refresh tokens,
// revocation), and a Go SDK MCP server behind the SDK's bearer-token
// middleware that accepts that provider's tokens for itself only. The
// gateway's end-to-end test drives the consent with an HTTP client,
// internal/browsertest with chromium.
package connecttest

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/aegis-gw/aegis/internal/mcptest"
	"github.com/aegis-gw/aegis/internal/npmcache"
	"github.com/aegis-gw/aegis/internal/syncbuf"
)

// ProviderPackage is the npm OpenID provider the kit runs: panva's
// oidc-provider, certified.
var ProviderPackage = npmcache.Package{Name: "oidc-provider", Version: "9.13.3"}

// ClientID is aegis's client at the provider: confidential
// (client_secret_basic), its secret the one StartProvider is given.
const ClientID = "aegis-docs"

// providerScript runs panva's oidc-provider as the authorization server of
// one upstream MCP server (RESOURCE): one confidential client of aegis's
// (aegis-docs) with the gateway's callback as its only redirect URI, PKCE
// required, RFC 8707 resource indicators giving RS256 JWT access tokens
// for RESOURCE only, refresh tokens (rotated on use), and the provider's
// development login and consent pages (any login, any password).
const providerScript = `import Provider, { errors } from 'oidc-provider';
const port = Number(process.env.ISSUER_PORT);
const issuer = 'http://127.0.0.1:' + port;
const resource = process.env.RESOURCE;
const provider = new Provider(issuer, {
  clients: [{
    client_id: 'aegis-docs', client_secret: process.env.CLIENT_SECRET,
    grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
    redirect_uris: [process.env.REDIRECT], token_endpoint_auth_method: 'client_secret_basic',
  }],
  scopes: ['mcp'],
  pkce: { required: () => true },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: true,
  findAccount: async (ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  features: {
    registration: { enabled: true }, // open RFC 7591 registration (TestConnectionsDynamicRegistration)
    devInteractions: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo(ctx, r) {
        if (r !== resource) throw new errors.InvalidTarget('tokens for ' + resource + ' only');
        return { scope: 'mcp', audience: r, accessTokenFormat: 'jwt', accessTokenTTL: 3600, jwt: { sign: { alg: 'RS256' } } };
      },
    },
  },
});
provider.listen(port, '127.0.0.1', () => console.log('issuer ' + issuer));
`

// StartProvider starts the npm provider (Node from npmcache) as the
// authorization server of resource, with aegis's client (ClientID,
// secret) whose only redirect URI is redirect, on a free loopback port
// until the test ends; it returns the issuer URL. Its login page takes
// any login and password; the login is the token's subject. npm or the
// package missing fails the test, naming it.
func StartProvider(t testing.TB, resource, redirect, secret string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir, err := npmcache.Dir("oidc-provider")
	if err != nil {
		t.Fatal(err)
	}
	if err := npmcache.Install(ctx, dir, npmcache.Node, ProviderPackage); err != nil {
		t.Fatalf("MISSING TOOL: %v", err)
	}
	script := WriteScript(t, dir, "connections-provider", providerScript)
	addr := mcptest.FreePort(t)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	issuer := "http://127.0.0.1:" + port
	var out syncbuf.Buffer
	cmd := exec.Command(npmcache.NodeBin(dir), script)
	cmd.Env = append(os.Environ(), "ISSUER_PORT="+port, "RESOURCE="+resource, "REDIRECT="+redirect, "CLIENT_SECRET="+secret)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "issuer "+issuer); {
		if time.Now().After(deadline) {
			t.Fatalf("the provider did not start:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return issuer
}

// WriteScript writes src into the npm cache directory dir (beside the
// node_modules its imports resolve in) as NAME-HASH.mjs, named by its
// content: the directory is shared by every checkout on the machine, and
// a fixed name let one checkout's test run another's version of a script.
func WriteScript(t testing.TB, dir, name, src string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(src))
	p := filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:6])+".mjs")
	tmp, err := os.CreateTemp(dir, name+"-*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(src); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil { // whole or not at all
		t.Fatal(err)
	}
	return p
}

// Upstream is a Go SDK MCP server behind the SDK's bearer-token
// middleware, verifying the provider's JWTs (RS256, its JWKS, aud = this
// server's URL, scope mcp). Its tools: whoami (the token's subject) and
// leak (echoes the Authorization header it was sent). It records every
// token it was sent.
type Upstream struct {
	URL    string
	mu     sync.Mutex
	tokens []string
	calls  int
}

// Seen returns the tokens the upstream was sent (in order) and how many
// MCP requests passed its middleware.
func (u *Upstream) Seen() ([]string, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.tokens...), u.calls
}

// StartUpstream starts the Upstream on a free loopback port until the test
// ends, trusting the issuer issuer returns (asked at each request, so
// that the upstream may start before its provider).
func StartUpstream(t testing.TB, issuer func() string) *Upstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &Upstream{URL: "http://" + l.Addr().String() + "/mcp"}
	srv := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "who the token says you are"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "subject=" + req.Extra.TokenInfo.UserID}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "leak", Description: "echoes the request's Authorization"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		h := req.Extra.Header.Get("Authorization")
		tok := strings.TrimPrefix(h, "Bearer ")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "raw " + h + " b64 " + base64.StdEncoding.EncodeToString([]byte(tok))}}}, nil, nil
	})
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		u.mu.Lock()
		u.tokens = append(u.tokens, token)
		u.mu.Unlock()
		keys, err := providerKeys(ctx, issuer())
		if err != nil {
			return nil, err
		}
		claims := jwt.MapClaims{}
		_, err = jwt.ParseWithClaims(token, claims, func(tk *jwt.Token) (any, error) {
			kid, _ := tk.Header["kid"].(string)
			if k, ok := keys[kid]; ok {
				return k, nil
			}
			return nil, errors.New("unknown kid")
		}, jwt.WithValidMethods([]string{"RS256"}), jwt.WithAudience(u.URL), jwt.WithIssuer(issuer()), jwt.WithExpirationRequired())
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		sub, _ := claims["sub"].(string)
		scope, _ := claims["scope"].(string)
		exp, _ := claims.GetExpirationTime()
		return &auth.TokenInfo{UserID: sub, Scopes: strings.Fields(scope), Expiration: exp.Time}, nil
	}
	prm := u.URL[:strings.LastIndex(u.URL, "/mcp")] + "/.well-known/oauth-protected-resource/mcp"
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prm, Scopes: []string{"mcp"}})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u.mu.Lock()
			u.calls++
			u.mu.Unlock()
			h.ServeHTTP(w, r)
		})))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource: u.URL, AuthorizationServers: []string{issuer()}, ScopesSupported: []string{"mcp"},
		}).ServeHTTP(w, r)
	}))
	hs := &httptest.Server{Listener: l, Config: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	hs.Start()
	t.Cleanup(hs.Close)
	return u
}

// providerKeys reads the provider's JWKS (its RSA keys by kid).
func providerKeys(ctx context.Context, issuer string) (map[string]*rsa.PublicKey, error) {
	get := func(u string, v any) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(v)
	}
	var doc struct {
		JWKS string `json:"jwks_uri"`
	}
	if err := get(issuer+"/.well-known/openid-configuration", &doc); err != nil {
		return nil, err
	}
	var set struct {
		Keys []struct{ Kty, Kid, N, E string } `json:"keys"`
	}
	if err := get(doc.JWKS, &set); err != nil {
		return nil, err
	}
	out := map[string]*rsa.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "RSA" {
			continue
		}
		n, _ := base64.RawURLEncoding.DecodeString(k.N)
		e, _ := base64.RawURLEncoding.DecodeString(k.E)
		out[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	return out, nil
}
