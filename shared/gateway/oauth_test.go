package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/oidctest"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/oauth"
	"github.com/aegis-gw/aegis/shared/registry"
)

// oauthEnv is env with acme and globex trusting issuers: acme the issuer
// A for every endpoint at http://gw.test (an origin audience), globex both
// A and B for two of its endpoints. acme's upstream is
// behind a recorder of the Authorization headers it receives.
type oauthEnv struct {
	*env
	A, B *oidctest.Issuer
	mu   sync.Mutex
	seen []string // Authorization headers acme's upstream received
}

// acmePolicy: the role "writer" (the scope tools:write's) may call
// anything; echo is allowed when the token's claims say dept "eng"
// (Cedar reads principal.claims).
const acmePolicy = `cedar_policies: |
  @id("eng-echo")
  permit (principal, action == Action::"tools/call", resource == Tool::"mock-primary/echo")
  when { principal.claims has dept && principal.claims.dept == "eng" };
  @id("writers")
  permit (principal in Role::"writer", action, resource);
`

func newOAuthEnv(t *testing.T, opts ...envOpt) *oauthEnv {
	t.Helper()
	o := &oauthEnv{}
	o.A = oidctest.Start(t, nil)
	o.B = oidctest.Start(t, nil)
	o.env = newEnv(t, append([]envOpt{func(s *config.Settings, st *memstore.Store) {
		ctx := context.Background()
		must(t, st.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierGrowth, Issuers: []registry.Issuer{{
			URL: o.A.URL, Audiences: []string{"http://gw.test"},
			ScopeRoles: map[string][]string{"tools:write": {"writer"}}, RequiredScopes: []string{"mcp"},
		}}}))
		must(t, st.PutTenant(ctx, registry.Tenant{ID: "globex", Tier: registry.TierGrowth, Issuers: []registry.Issuer{
			{URL: o.A.URL, Audiences: []string{"http://gw.test/t/globex/mcp", "http://gw.test/t/globex/v1/invoke"}},
			{URL: o.B.URL, Audiences: []string{"http://gw.test/t/globex/mcp", "http://gw.test/t/globex/v1/invoke"}},
		}}))
		must(t, st.PutPolicy(ctx, registry.Policy{Tenant: "acme", Source: acmePolicy, Updated: time.Now()}))
	}}, opts...)...)
	// acme's upstream behind a recorder of the Authorization headers.
	target, _ := url.Parse(o.UpA.URL)
	target.Path = ""
	rp := httputil.NewSingleHostReverseProxy(target)
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.seen = append(o.seen, r.Header.Get("Authorization"))
		o.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.Close)
	must(t, o.Store.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "mock-primary", URL: rec.URL + "/mcp"}))
	return o
}

// post sends body to path with the Host the audiences name.
func (o *oauthEnv) postAs(t *testing.T, path, token, body string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, o.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "gw.test"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream") // what /mcp requires
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return do(t, req)
}

// claims are a token's claims for tenant's /v1/invoke, the path most
// tests post to (a token is for one endpoint: TestOAuthEndpointBinding).
func (o *oauthEnv) claims(is *oidctest.Issuer, tenant string, mod func(map[string]any)) map[string]any {
	c := is.Claims("http://gw.test/t/"+tenant+"/v1/invoke", o.Clock.Now(), 5*time.Minute)
	c["scope"] = "mcp"
	if mod != nil {
		mod(c)
	}
	return c
}

const metaA = `http://gw.test/.well-known/oauth-protected-resource/t/acme/v1/invoke`

// TestOAuthRefusals is the table of bad tokens at the gateway: each gets
// its documented status, body and challenge (docs/oauth.md).
func TestOAuthRefusals(t *testing.T) {
	o := newOAuthEnv(t)
	k := o.A.Signing()
	now := o.Clock.Now()
	good := o.A.Sign(t, k, o.claims(o.A, "acme", nil))
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, tc := range []struct {
		name, path, token string
		status            int
		body, challenge   string
	}{
		{"no token", "/t/acme/v1/invoke", "", 401,
			`{"error":"unauthorized: missing token; send Authorization: Bearer with an access token for this resource from this tenant's issuer (resource_metadata in WWW-Authenticate names it), or an API key of this tenant"}`,
			`Bearer realm="aegis", resource_metadata="` + metaA + `", error_description="missing token; `},
		{"expired", "/t/acme/v1/invoke", o.A.Sign(t, k, o.claims(o.A, "acme", func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() })), 401,
			`{"error":"unauthorized: token has expired"}`, `Bearer realm="aegis", resource_metadata="` + metaA + `", error="invalid_token"`},
		{"not yet valid", "/t/acme/v1/invoke", o.A.Sign(t, k, o.claims(o.A, "acme", func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() })), 401,
			`{"error":"unauthorized: token is not valid yet (nbf or iat in the future)"}`, `error="invalid_token"`},
		{"exp a string", "/t/acme/v1/invoke", o.A.Sign(t, k, o.claims(o.A, "acme", func(c map[string]any) { c["exp"] = fmt.Sprint(now.Add(time.Hour).Unix()) })), 401,
			`{"error":"unauthorized: token's exp, nbf or iat is not a number (RFC 7519 NumericDate)"}`, `error="invalid_token"`},
		{"wrong audience", "/t/acme/v1/invoke", o.A.Sign(t, k, o.claims(o.A, "acme", func(c map[string]any) { c["aud"] = "http://gw.test/mcp" })), 401,
			`{"error":"unauthorized: token audience is not this endpoint's resource"}`, `error="invalid_token"`},
		{"wrong issuer", "/t/acme/v1/invoke", o.B.Sign(t, o.B.Signing(), o.claims(o.B, "acme", nil)), 401,
			`{"error":"unauthorized: token issuer is not trusted by this tenant"}`, `error="invalid_token"`},
		{"alg none", "/t/acme/v1/invoke", oidctest.Unsigned(t, o.claims(o.A, "acme", nil)), 401,
			`{"error":"unauthorized: token signature algorithm is not allowed (RS256, ES256 or EdDSA as the issuer allows; never none or HMAC)"}`, `error="invalid_token"`},
		{"HS256 with the public key", "/t/acme/v1/invoke", oidctest.HMACWithPublicKey(t, k, o.claims(o.A, "acme", nil)), 401,
			`{"error":"unauthorized: token signature algorithm is not allowed (RS256, ES256 or EdDSA as the issuer allows; never none or HMAC)"}`, `error="invalid_token"`},
		{"unknown kid", "/t/acme/v1/invoke", o.A.Sign(t, oidctest.NewKey(t, "nobody", "ES256"), o.claims(o.A, "acme", nil)), 401,
			`{"error":"unauthorized: token is signed by a key the issuer does not publish"}`, `error="invalid_token"`},
		{"tampered payload", "/t/acme/v1/invoke", oidctest.Tamper(t, good, o.claims(o.A, "acme", func(c map[string]any) { c["scope"] = "mcp tools:write" })), 401,
			`{"error":"unauthorized: token signature is invalid"}`, `error="invalid_token"`},
		// globex trusts issuer A too, for its own endpoints: acme's token is
		// refused there.
		{"tenant A's token at tenant B", "/t/globex/v1/invoke", good, 401,
			`{"error":"unauthorized: token audience is not this endpoint's resource"}`, `error="invalid_token"`},
		{"missing scope", "/t/acme/v1/invoke", o.A.Sign(t, k, o.claims(o.A, "acme", func(c map[string]any) { c["scope"] = "tools:write" })), 403,
			`{"error":"forbidden: insufficient_scope: the token lacks a required scope (mcp)"}`,
			`Bearer realm="aegis", resource_metadata="` + metaA + `", error="insufficient_scope", scope="mcp"`},
		{"a token on a path without a tenant", "/v1/invoke", good, 401,
			`{"error":"unauthorized: invalid API key: the key sent is wrong, revoked or not one of this gateway's; send Authorization: Bearer with a valid aegis API key"}`,
			`Bearer realm="aegis", error="invalid_token", error_description="invalid API key: `},
		{"acme's API key at globex", "/t/globex/v1/invoke", o.KeyA, 401,
			`{"error":"unauthorized: the API key is not one of the tenant this path names"}`, `Bearer realm="aegis"`},
		// The challenge quotes the path as sent, escaped: a quote in it
		// cannot end the quoted string.
		{"a quote in the path", "/t/acme/mcp/a%22b", "", 401,
			`{"error":"unauthorized: missing token; send Authorization: Bearer with an access token for this resource from this tenant's issuer (resource_metadata in WWW-Authenticate names it), or an API key of this tenant"}`,
			`resource_metadata="http://gw.test/.well-known/oauth-protected-resource/t/acme/mcp/a%22b"`},
		// The API-key endpoints advertise no OAuth flow (none can
		// succeed there) and say in the challenge why the key failed.
		{"no key on an API-key path", "/mcp", "", 401,
			`{"error":"unauthorized: missing API key; send the header Authorization: Bearer KEY"}`,
			`Bearer realm="aegis", error_description="missing API key; send the header Authorization: Bearer KEY"`},
		{"a token at a tenant without issuers", "/t/nobody/v1/invoke", good, 401,
			`{"error":"unauthorized: token issuer is not trusted by this tenant"}`, `error="invalid_token"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := o.postAs(t, tc.path, tc.token, ping)
			if r.Status != tc.status || string(r.Raw) != tc.body {
				t.Errorf("got %d %s\nwant %d %s", r.Status, r.Raw, tc.status, tc.body)
			}
			ch := r.Header.Get("WWW-Authenticate")
			if !strings.Contains(ch, tc.challenge) {
				t.Errorf("WWW-Authenticate = %q, want it to contain %q", ch, tc.challenge)
			}
			if oauthPath := strings.HasPrefix(tc.path, "/t/acme/") || strings.HasPrefix(tc.path, "/t/globex/"); strings.Contains(ch, "resource_metadata") != oauthPath {
				t.Errorf("WWW-Authenticate = %q: resource_metadata only on an OAuth resource (acme and globex have issuers)", ch)
			}
			if tc.token != "" && strings.Contains(o.logs(), tc.token) {
				t.Error("the token is in the log")
			}
		})
	}
}

// TestOAuthCaller: a valid token is the caller with its roles, as an API
// key is: the policy's roles layer and Cedar's principal.claims see it,
// the audit records it, and the upstream never gets the token.
func TestOAuthCaller(t *testing.T) {
	o := newOAuthEnv(t)
	k := o.A.Signing()
	eng := o.A.Sign(t, k, o.claims(o.A, "acme", func(c map[string]any) { c["dept"] = "eng" }))
	sales := o.A.Sign(t, k, o.claims(o.A, "acme", func(c map[string]any) { c["dept"] = "sales"; c["sub"] = "bob" }))
	writer := o.A.Sign(t, k, o.claims(o.A, "acme", func(c map[string]any) { c["scope"] = "mcp tools:write"; c["sub"] = "carol" }))
	echo := call("1", "echo", `{"message":"hi"}`)
	transfer := call("2", "transfer", `{"to":"acct-1","amount":5}`)
	for _, tc := range []struct {
		name, token, body string
		code              int
	}{
		{"claims allow echo", eng, echo, 0},
		{"claims do not allow transfer", eng, transfer, -32003},
		{"other claims refuse echo", sales, echo, -32003},
		{"the scope's role allows transfer", writer, transfer, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := o.postAs(t, "/t/acme/v1/invoke", tc.token, tc.body)
			if r.Status != 200 || r.code() != tc.code {
				t.Fatalf("got %d %s, want code %d", r.Status, r.Raw, tc.code)
			}
		})
	}
	// API keys keep working, on /v1/invoke and on the tenant's path.
	for _, p := range []string{"/v1/invoke", "/t/acme/v1/invoke"} {
		if r := o.postAs(t, p, o.KeyA, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.Status != 200 || r.code() != 0 {
			t.Errorf("API key on %s: %d %s", p, r.Status, r.Raw)
		}
	}
	recs, _, err := o.Store.Query(context.Background(), audit.Query{Tenant: "acme", From: o.Clock.Now().Add(-time.Hour), To: o.Clock.Now().Add(time.Hour), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	callers := map[string]bool{}
	for _, rec := range recs {
		callers[rec.Caller] = true
		b, _ := json.Marshal(rec)
		for _, tok := range []string{eng, sales, writer} {
			if strings.Contains(string(b), tok) || strings.Contains(string(b), strings.Split(tok, ".")[2]) {
				t.Errorf("an audit record carries a token: %s", b)
			}
		}
	}
	for _, c := range []string{"alice", "bob", "carol"} {
		if !callers[c] {
			t.Errorf("no audit record of caller %s (callers %v)", c, callers)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.seen) == 0 {
		t.Fatal("the upstream saw no request")
	}
	for _, h := range o.seen {
		if h != "" {
			t.Errorf("the upstream received Authorization %q; it must get only its brokered credential (none here)", h)
		}
	}
	for _, tok := range []string{eng, sales, writer} {
		if strings.Contains(o.logs(), tok) {
			t.Error("a token is in the log")
		}
	}
}

// TestResourceMetadata: the RFC 9728 documents, root and path-specific.
func TestResourceMetadata(t *testing.T) {
	o := newOAuthEnv(t)
	get := func(path string) (int, oauth.ResourceMetadata, http.Header) {
		req, _ := http.NewRequest(http.MethodGet, o.URL+path, nil)
		req.Host = "gw.test"
		r := do(t, req)
		var m oauth.ResourceMetadata
		if r.Status == 200 {
			must(t, json.Unmarshal(r.Raw, &m))
		}
		return r.Status, m, r.Header
	}
	st, m, h := get("/.well-known/oauth-protected-resource/t/acme/mcp")
	if st != 200 || m.Resource != "http://gw.test/t/acme/mcp" || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != o.A.URL ||
		strings.Join(m.ScopesSupported, " ") != "mcp tools:write" || h.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("acme's /mcp: %d %+v", st, m)
	}
	if st, m, _ := get("/.well-known/oauth-protected-resource/t/globex/mcp/files"); st != 200 || m.Resource != "http://gw.test/t/globex/mcp/files" || len(m.AuthorizationServers) != 2 {
		t.Errorf("globex's /mcp/files: %d %+v", st, m)
	}
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource/t/nobody/mcp"} {
		st, m, _ := get(p)
		if st != 200 || len(m.AuthorizationServers) != 0 || !strings.HasPrefix(m.Resource, "http://gw.test") {
			t.Errorf("%s: %d %+v, want API keys only", p, st, m)
		}
	}
	for _, p := range []string{"/.well-known/oauth-protected-resource/t/acme/admin", "/.well-known/oauth-protected-resource/t/Bad!/mcp", "/t/acme/nope"} {
		if st, _, _ := get(p); st != 404 {
			t.Errorf("%s: %d, want 404", p, st)
		}
	}
}

// TestOAuthRateLimitPerCaller: RATE_LIMIT_PER_KEY counts per token caller
// (auth.TokenKeyID), as it counts per API key: alice's third call in the
// minute is -32004 with scope key, bob's first is not.
func TestOAuthRateLimitPerCaller(t *testing.T) {
	o := newOAuthEnv(t, func(s *config.Settings, _ *memstore.Store) {
		s.RateLimitPerKey, s.RateLimitPerSession, s.RateLimitPerTool = 2, 0, 0
	})
	k := o.A.Signing()
	alice := o.A.Sign(t, k, o.claims(o.A, "acme", func(c map[string]any) { c["dept"] = "eng" }))
	bob := o.A.Sign(t, k, o.claims(o.A, "acme", func(c map[string]any) { c["dept"] = "eng"; c["sub"] = "bob" }))
	echo := call("1", "echo", `{"message":"hi"}`)
	for i, want := range []int{0, 0, -32004} {
		if r := o.postAs(t, "/t/acme/v1/invoke", alice, echo); r.code() != want {
			t.Fatalf("alice's call %d: %s, want code %d", i+1, r.Raw, want)
		} else if want == -32004 && !strings.Contains(string(r.Error.Data), `"scope":"key"`) {
			t.Fatalf("alice's refusal is not the key's window: %s", r.Error.Data)
		}
	}
	if r := o.postAs(t, "/t/acme/v1/invoke", bob, echo); r.code() != 0 {
		t.Fatalf("bob's first call: %s", r.Raw)
	}
	if strings.Contains(o.logs(), "key record unreadable") {
		t.Error("the policy looked for a key record of a token caller")
	}
}

// TestOAuthEndpointBinding: a token is accepted only on the endpoint whose
// resource its aud names. A token for /t/acme/mcp/mock-primary works
// there and is 401 on the tenant's other endpoints, each refusal's
// challenge pointing to that endpoint's own metadata; the metadata's
// resource is exactly what a token must name to be accepted there.
func TestOAuthEndpointBinding(t *testing.T) {
	o := newOAuthEnv(t)
	k := o.A.Signing()
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	forC := o.A.Sign(t, k, o.claims(o.A, "acme", func(c map[string]any) { c["aud"] = "http://gw.test/t/acme/mcp/mock-primary" }))
	if r := o.postAs(t, "/t/acme/mcp/mock-primary", forC, ping); r.Status != 200 {
		t.Fatalf("the token on its own endpoint: %d %s", r.Status, r.Raw)
	}
	for _, p := range []string{"/t/acme/mcp/other", "/t/acme/mcp", "/t/acme/v1/invoke", "/t/globex/mcp/mock-primary"} {
		t.Run(p, func(t *testing.T) {
			r := o.postAs(t, p, forC, ping)
			want := `{"error":"unauthorized: token audience is not this endpoint's resource"}`
			if r.Status != 401 || string(r.Raw) != want {
				t.Fatalf("got %d %s, want 401 %s", r.Status, r.Raw, want)
			}
			meta := "http://gw.test" + gateway.WellKnownResource + p
			if ch := r.Header.Get("WWW-Authenticate"); ch != `Bearer realm="aegis", resource_metadata="`+meta+`", error="invalid_token", error_description="token audience is not this endpoint's resource"` {
				t.Fatalf("WWW-Authenticate = %q, want the metadata of %s", ch, p)
			}
			// Follow the challenge: the metadata names the resource, and a
			// token for exactly that resource passes authentication.
			req, _ := http.NewRequest(http.MethodGet, o.URL+strings.TrimPrefix(meta, "http://gw.test"), nil)
			req.Host = "gw.test"
			mr := do(t, req)
			var m oauth.ResourceMetadata
			if mr.Status != 200 || json.Unmarshal(mr.Raw, &m) != nil || m.Resource != "http://gw.test"+p {
				t.Fatalf("metadata of %s: %d %s", p, mr.Status, mr.Raw)
			}
			if p == "/t/globex/mcp/mock-primary" {
				return // globex's issuers are not for this endpoint
			}
			own := o.A.Sign(t, k, o.claims(o.A, "acme", func(c map[string]any) { c["aud"] = m.Resource }))
			if r := o.postAs(t, p, own, ping); r.Status == 401 || r.Status == 403 {
				t.Fatalf("a token for the advertised resource %s: %d %s", m.Resource, r.Status, r.Raw)
			}
		})
	}
	// The cache does not carry a token from one endpoint to another.
	if r := o.postAs(t, "/t/acme/mcp/mock-primary", forC, ping); r.Status != 200 {
		t.Fatalf("the token on its own endpoint again: %d %s", r.Status, r.Raw)
	}
	if r := o.postAs(t, "/t/acme/mcp/other", forC, ping); r.Status != 401 {
		t.Fatalf("the cached token on another endpoint: %d %s", r.Status, r.Raw)
	}
	// A Host the issuer's audiences do not allow: the token names the
	// resource at that host, and is refused all the same.
	evil := o.A.Sign(t, k, o.claims(o.A, "acme", func(c map[string]any) { c["aud"] = "http://evil.test/t/acme/v1/invoke" }))
	req, _ := http.NewRequest(http.MethodPost, o.URL+"/t/acme/v1/invoke", strings.NewReader(ping))
	req.Host = "evil.test"
	req.Header.Set("Authorization", "Bearer "+evil)
	req.Header.Set("Content-Type", "application/json")
	if r := do(t, req); r.Status != 401 {
		t.Fatalf("a token for a host the audiences do not allow: %d %s", r.Status, r.Raw)
	}
}
