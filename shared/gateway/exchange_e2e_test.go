package gateway_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/connecttest"
	"github.com/aegis-gw/aegis/internal/mcptest"
	"github.com/aegis-gw/aegis/internal/npmcache"
	"github.com/aegis-gw/aegis/internal/syncbuf"
	"github.com/aegis-gw/aegis/shared/audit"
	aegisauth "github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/config"
	connections "github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/credentials"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// tokenService runs examples/tokenexchange/token-service.mjs (npm
// oidc-provider with an RFC 8693 grant) as the tenants' own issuer: agents
// get tokens for the gateway's tenant paths by client credentials, and
// aegis's client exchanges them for tokens of the upstreams. out is its
// log, one "exchange SUB RESOURCE" line per exchange.
type tokenService struct {
	issuer string
	out    *syncbuf.Buffer
}

func startTokenService(t *testing.T, gatewayPrefix, upstreams, aegisSecret string) *tokenService {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir, err := npmcache.Dir("oidc-provider")
	if err != nil {
		t.Fatal(err)
	}
	if err := npmcache.Install(ctx, dir, npmcache.Node, connecttest.ProviderPackage); err != nil {
		t.Fatalf("MISSING TOOL: %v", err)
	}
	src, err := os.ReadFile("../../examples/tokenexchange/token-service.mjs")
	if err != nil {
		t.Fatal(err)
	}
	script := connecttest.WriteScript(t, dir, "token-service", string(src))
	addr := mcptest.FreePort(t)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	ts := &tokenService{issuer: "http://127.0.0.1:" + port, out: &syncbuf.Buffer{}}
	cmd := exec.Command(npmcache.NodeBin(dir), script)
	cmd.Env = append(os.Environ(), "ISSUER_PORT="+port, "GATEWAY="+gatewayPrefix, "UPSTREAMS="+upstreams,
		"AGENTS=agent-alice,agent-bob", "AEGIS_SECRET="+aegisSecret)
	cmd.Stdout, cmd.Stderr = ts.out, ts.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(ts.out.String(), "issuer "+ts.issuer); {
		if time.Now().After(deadline) {
			t.Fatalf("the token service did not start:\n%s", ts.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return ts
}

// exchanges counts the service's exchanges for sub.
func (ts *tokenService) exchanges(sub string) int {
	return strings.Count(ts.out.String(), "exchange "+sub+" ")
}

// agentToken is a client-credentials token of agent (agent-alice,
// agent-bob) for resource.
func (ts *tokenService) agentToken(t *testing.T, agent, resource string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"mcp"}, "resource": {resource}}
	req, _ := http.NewRequest(http.MethodPost, ts.issuer+"/token", strings.NewReader(form.Encode()))
	req.SetBasicAuth(agent, agent+"-secret")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		t.Fatalf("%s's token: HTTP %d %v", agent, resp.StatusCode, err)
	}
	return tok.AccessToken
}

// exchangeWorld is a gateway whose tenants acme and other trust the token
// service and have the server docs with auth: token_exchange on one
// protected upstream: acme's token endpoint is discovered from the
// server, other's is configured (and its subject token type jwt). acme
// also has an API-key caller, keyed.
type exchangeWorld struct {
	gw     string
	up     *connecttest.Upstream
	ts     *tokenService
	store  backend.Backend
	apiKey string
}

func newExchangeWorld(t *testing.T, b backend.Backend) *exchangeWorld {
	t.Helper()
	ctx := context.Background()
	w := &exchangeWorld{store: b}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.gw = "http://" + gl.Addr().String()
	var issuer string
	w.up = connecttest.StartUpstream(t, func() string { return issuer }, nil)
	secret := "aegis-exchange-secret-" + t.Name()
	w.ts = startTokenService(t, w.gw+"/t/", w.up.URL, secret)
	issuer = w.ts.issuer
	for _, tc := range []struct {
		tenant string
		client registry.OAuthClient
	}{
		{"acme", registry.OAuthClient{ClientID: "aegis", ClientSecretRef: "env:EXCHANGE_SECRET"}},
		{"other", registry.OAuthClient{ClientID: "aegis", ClientSecretRef: "env:EXCHANGE_SECRET", Scopes: []string{"mcp"},
			TokenEndpoint: issuer + "/token", SubjectTokenType: registry.SubjectJWT}},
	} {
		must(t, w.store.PutTenant(ctx, registry.Tenant{ID: tc.tenant, Tier: registry.TierGrowth,
			Issuers: []registry.Issuer{{URL: issuer, Audiences: []string{w.gw + "/t/" + tc.tenant + "/v1/invoke"}}}}))
		client := tc.client
		srv := registry.Server{Tenant: tc.tenant, Name: "docs", URL: w.up.URL, Auth: registry.AuthTokenExchange, OAuth: &client}
		must(t, registry.ValidateServerAuth(srv.Auth, srv.OAuth, srv.Credential))
		must(t, w.store.PutServer(ctx, srv))
	}
	var k registry.Key
	w.apiKey, k = aegisauth.NewKey("acme", "keyed", time.Now())
	must(t, w.store.PutKey(ctx, k))
	s := config.Defaults()
	s.LocalMode = true
	s.UpstreamTimeout = 5 * time.Second
	creds := credentials.New(credentials.Options{Local: true, Getenv: func(k string) string {
		if k == "EXCHANGE_SECRET" {
			return secret
		}
		return ""
	}})
	// No connection broker (no public URL): token exchange needs none.
	g, err := gateway.New(w.store, &gateway.Options{Settings: s, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), HTTP: gateway.NewHTTPClient(true), Credentials: creds})
	must(t, err)
	hs := &httptest.Server{Listener: gl, Config: &http.Server{Handler: g, ReadHeaderTimeout: 5 * time.Second}}
	hs.Start()
	t.Cleanup(hs.Close)
	return w
}

// invoke sends a tools/call of tool on /t/TENANT/v1/invoke with bearer
// and returns the answer's body.
func (w *exchangeWorld) invoke(t *testing.T, tenant, bearer, tool string) string {
	t.Helper()
	return invokeTool(t, w.gw, tenant, bearer, tool)
}

// TestExchangeEndToEnd: callers who come with their tenant's own JWTs
// reach a Go SDK server behind the SDK's bearer-token middleware with a
// token the tenant's token service (npm oidc-provider with an RFC 8693
// grant) exchanged for theirs; the server refuses the callers' own tokens,
// and never receives one. An exchanged token is cached per (tenant,
// caller, server): another caller's, or another tenant's, is never used;
// echoed by the server, it is scrubbed; an API-key caller is refused
// CONNECTION_REQUIRED; every exchange is audited, never a token.
func TestExchangeEndToEnd(t *testing.T) {
	t.Run("memstore", func(t *testing.T) { testExchange(t, newExchangeWorld(t, memstore.New())) })
	t.Run("dynamodb", func(t *testing.T) {
		testExchange(t, newExchangeWorld(t, dynamotest.Start(t).Store(t, dynamo.Options{})))
	})
}

func testExchange(t *testing.T, w *exchangeWorld) {
	ctx := context.Background()
	resource := func(tenant string) string { return w.gw + "/t/" + tenant + "/v1/invoke" }
	aliceAcme := w.ts.agentToken(t, "agent-alice", resource("acme"))
	bobAcme := w.ts.agentToken(t, "agent-bob", resource("acme"))
	aliceOther := w.ts.agentToken(t, "agent-alice", resource("other"))
	inbound := []string{aliceAcme, bobAcme, aliceOther}

	// The server itself refuses a caller's own token: passing it through
	// could not work, and must not happen.
	req, _ := http.NewRequest(http.MethodPost, w.up.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+aliceAcme)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the upstream answered %d to a caller's own token; want 401", resp.StatusCode)
	}
	probed, callsBefore := w.up.Seen() // the one token above, sent by this test

	// Alice (acme, token endpoint discovered): her own subject upstream,
	// one exchange for the listing and the call, none for the next call.
	if got := w.invoke(t, "acme", aliceAcme, "docs.whoami"); !strings.Contains(got, "subject=agent-alice") {
		t.Fatalf("alice: %s", got)
	}
	if n := w.ts.exchanges("agent-alice"); n != 1 {
		t.Fatalf("%d exchanges for alice's first call; want 1", n)
	}
	if got := w.invoke(t, "acme", aliceAcme, "docs.whoami"); !strings.Contains(got, "subject=agent-alice") || w.ts.exchanges("agent-alice") != 1 {
		t.Fatalf("alice's second call: %s after %d exchanges; want the cached token", got, w.ts.exchanges("agent-alice"))
	}
	tokens, calls := w.up.Seen()
	aliceTok := tokens[len(tokens)-1]
	if calls == callsBefore {
		t.Fatal("the upstream got no call")
	}

	// Bob, same tenant: his own exchange, never alice's cached token.
	if got := w.invoke(t, "acme", bobAcme, "docs.whoami"); !strings.Contains(got, "subject=agent-bob") || w.ts.exchanges("agent-bob") != 1 {
		t.Fatalf("bob: %s after %d exchanges", got, w.ts.exchanges("agent-bob"))
	}
	// The same subject in another tenant (token endpoint configured,
	// subject token type jwt): its own exchange, its own token.
	if got := w.invoke(t, "other", aliceOther, "docs.whoami"); !strings.Contains(got, "subject=agent-alice") || w.ts.exchanges("agent-alice") != 2 {
		t.Fatalf("alice in tenant other: %s after %d exchanges; want a second exchange", got, w.ts.exchanges("agent-alice"))
	}
	tokens, _ = w.up.Seen()
	if last := tokens[len(tokens)-1]; last == aliceTok {
		t.Fatal("tenant other's call carried acme's exchanged token")
	}
	// A token of alice's in acme presented on other's path is no caller
	// there (its audience is acme's): refused at the door, nothing exchanged.
	if got := w.invoke(t, "other", aliceAcme, "docs.whoami"); strings.Contains(got, "subject=") || w.ts.exchanges("agent-alice") != 2 {
		t.Fatalf("acme's token on other's path: %s", got)
	}

	// The server echoes the token it was sent: scrubbed from the answer.
	leak := w.invoke(t, "acme", aliceAcme, "docs.leak")
	if !strings.Contains(leak, "raw ") || strings.Contains(leak, aliceTok) || strings.Contains(leak, base64.StdEncoding.EncodeToString([]byte(aliceTok))) {
		t.Fatalf("the upstream's echo of the exchanged token reached the agent: %.400s", leak)
	}

	// An API-key caller has no token to exchange: CONNECTION_REQUIRED,
	// without a link, and nothing sent.
	_, before := w.up.Seen()
	var a struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Server, Mode, URL string
				Aegis             struct{ Code string }
			} `json:"data"`
		} `json:"error"`
	}
	ans := w.invoke(t, "acme", w.apiKey, "docs.whoami")
	if err := json.Unmarshal([]byte(ans), &a); err != nil || a.Error.Code != -32065 || a.Error.Data.Aegis.Code != "CONNECTION_REQUIRED" ||
		a.Error.Data.Server != "docs" || a.Error.Data.Mode != "token_exchange" || a.Error.Data.URL != "" || !strings.Contains(a.Error.Message, "not an API key") {
		t.Fatalf("an API-key caller: %s", ans)
	}
	if _, after := w.up.Seen(); after != before {
		t.Fatal("an API-key caller's call reached the upstream")
	}

	// Never a caller's own token upstream (but the one this test sent).
	tokens, _ = w.up.Seen()
	tokens = tokens[len(probed):]
	for _, tok := range tokens {
		if slices.Contains(inbound, tok) {
			t.Fatal("the upstream was sent a caller's own token")
		}
	}

	// The trail: each exchange, and the calls naming the exchange whose
	// token they carried; never a token.
	for _, tenant := range []string{"acme", "other"} {
		recs, _, err := w.store.Query(ctx, audit.Query{Tenant: tenant, From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour), Limit: 1000})
		must(t, err)
		all, _ := json.Marshal(recs)
		for _, tok := range append(tokens, inbound...) {
			if strings.Contains(string(all), tok) {
				t.Fatalf("a token is in %s's audit trail", tenant)
			}
		}
		exchanges := map[string]string{} // id → caller
		for _, r := range recs {
			if err := r.Validate(); err != nil {
				t.Errorf("record %+v: %v", r, err)
			}
			if r.Method == connections.EventExchange {
				exchanges[r.Connection] = r.Caller
			}
		}
		want := map[string]int{"acme": 2, "other": 1}[tenant]
		if len(exchanges) != want {
			t.Fatalf("%s: %d exchange records; want %d", tenant, len(exchanges), want)
		}
		for _, r := range recs {
			if r.Method == "tools/call" && r.Outcome == audit.OutcomeAllowed && exchanges[r.Connection] != r.Caller {
				t.Errorf("%s: call of %s names exchange %q", tenant, r.Caller, r.Connection)
			}
		}
	}
}
