package connect

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/registry"
)

// tokenService is an RFC 8693 token endpoint: it answers each exchange
// with answer(form) and records the forms it was sent.
type tokenService struct {
	*httptest.Server
	mu     sync.Mutex
	forms  []url.Values
	auth   []string // client ids of the Basic credentials
	answer func(f url.Values) (int, map[string]any)
}

func newTokenService(t *testing.T) *tokenService {
	ts := &tokenService{}
	n := 0
	ts.answer = func(f url.Values) (int, map[string]any) {
		n++
		return http.StatusOK, map[string]any{"access_token": "exchanged-" + f.Get("resource") + "-" + f.Get("subject_token") + "-" + string(rune('a'+n)),
			"issued_token_type": TokenTypeAccessToken, "token_type": "Bearer", "expires_in": 3600, "scope": f.Get("scope")}
	}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, _ := r.BasicAuth()
		ts.mu.Lock()
		ts.forms = append(ts.forms, r.PostForm)
		ts.auth = append(ts.auth, id+":"+secret)
		st, body := ts.answer(r.PostForm)
		ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st)
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tokenService) sent() []url.Values {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]url.Values(nil), ts.forms...)
}

// records is an audit.Writer that keeps what it is given.
type records struct {
	mu  sync.Mutex
	all []audit.Record
}

func (r *records) Write(_ context.Context, rec audit.Record) error {
	r.mu.Lock()
	r.all = append(r.all, rec)
	r.mu.Unlock()
	return nil
}

func (r *records) methods() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, x := range r.all {
		out = append(out, x.Method+" "+x.Caller+" "+string(x.Outcome))
	}
	return out
}

type secretsMap map[string]string

func (s secretsMap) Resolve(_ context.Context, ref string) (string, error) {
	if v, ok := s[ref]; ok {
		return v, nil
	}
	return "", errors.New("unknown reference")
}

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newExchanger(t *testing.T, clock *testClock, rec *records) *Exchanger {
	t.Helper()
	x, err := NewExchanger(ExchangeOptions{HTTP: guardedClient(), Local: true, Now: clock.Now, Audit: rec,
		Secrets: secretsMap{"env:SECRET": "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestExchangeConfigured: with a configured token endpoint, the caller's
// token is exchanged with RFC 8693's parameters as the tenant's client;
// the token is cached for (tenant, caller, server) and served only for the
// same caller's token and server URL, never past its expiry; every
// exchange is audited, never with a token.
func TestExchangeConfigured(t *testing.T) {
	ts := newTokenService(t)
	clock := &testClock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	rec := &records{}
	x := newExchanger(t, clock, rec)
	srv := &registry.Server{Tenant: "acme", Name: "docs", URL: "https://docs.example/mcp", Auth: registry.AuthTokenExchange,
		OAuth: &registry.OAuthClient{ClientID: "aegis", ClientSecretRef: "env:SECRET", Scopes: []string{"mcp", "read"},
			TokenEndpoint: ts.URL + "/token", Audience: "urn:docs", SubjectTokenType: registry.SubjectJWT}}
	ctx := context.Background()
	alice := Subject{Token: "alice-inbound", Issuer: "https://idp.example"}

	tok, id, err := x.Token(ctx, "acme", "alice", alice, srv)
	if err != nil || !strings.HasPrefix(tok, "exchanged-") || id == "" {
		t.Fatalf("Token = %q, %q, %v", tok, id, err)
	}
	f := ts.sent()[0]
	want := url.Values{"grant_type": {GrantTokenExchange}, "subject_token": {"alice-inbound"}, "subject_token_type": {TokenTypeJWT},
		"requested_token_type": {TokenTypeAccessToken}, "resource": {srv.URL}, "audience": {"urn:docs"}, "scope": {"mcp read"}}
	if f.Encode() != want.Encode() || ts.auth[0] != "aegis:s3cret" {
		t.Fatalf("the exchange sent %v as %q\nwant %v as aegis:s3cret", f, ts.auth[0], want)
	}
	// Cached: the same token, no second exchange.
	if again, id2, err := x.Token(ctx, "acme", "alice", alice, srv); err != nil || again != tok || id2 != id || len(ts.sent()) != 1 {
		t.Fatalf("second Token = %q, %q, %v after %d exchanges; want the cached token", again, id2, err, len(ts.sent()))
	}
	// Never another caller's, another tenant's, another caller token's,
	// or another server URL's.
	other := *srv
	other.URL = "https://docs2.example/mcp"
	for _, tc := range []struct {
		name, tenant, caller string
		sub                  Subject
		srv                  *registry.Server
	}{
		{"another caller", "acme", "bob", Subject{Token: "bob-inbound"}, srv},
		{"the same name in another tenant", "other", "alice", Subject{Token: "alice-other-inbound"}, srv},
		{"another token of the same caller", "acme", "alice", Subject{Token: "alice-inbound-2"}, srv},
		{"the server moved", "acme", "alice", alice, &other},
	} {
		n := len(ts.sent())
		got, _, err := x.Token(ctx, tc.tenant, tc.caller, tc.sub, tc.srv)
		if err != nil || got == tok || len(ts.sent()) != n+1 || ts.sent()[n].Get("subject_token") != tc.sub.Token {
			t.Fatalf("%s: Token = %q, %v after %d exchanges; want a new exchange of its own token", tc.name, got, err, len(ts.sent())-n)
		}
	}
	// Past the cache's lifetime: exchanged again.
	clock.Add(MaxCacheLifetime)
	n := len(ts.sent())
	if _, _, err := x.Token(ctx, "acme", "alice", alice, srv); err != nil || len(ts.sent()) != n+1 {
		t.Fatalf("after MaxCacheLifetime: %v, %d exchanges; want one", err, len(ts.sent())-n)
	}
	// Refused by the server: dropped, exchanged again.
	_, id, _ = x.Token(ctx, "acme", "alice", alice, srv)
	x.Refused("acme", "alice", "docs", "not-"+id)
	if _, _, _ = x.Token(ctx, "acme", "alice", alice, srv); len(ts.sent()) != n+1 {
		t.Fatal("Refused of another exchange's id dropped the token")
	}
	x.Refused("acme", "alice", "docs", id)
	if _, _, _ = x.Token(ctx, "acme", "alice", alice, srv); len(ts.sent()) != n+2 {
		t.Fatal("Refused did not drop the token")
	}

	all, _ := json.Marshal(rec.all)
	for _, secret := range []string{"alice-inbound", "exchanged-", "s3cret"} {
		if strings.Contains(string(all), secret) {
			t.Fatalf("the audit records hold %q: %s", secret, all)
		}
	}
	for _, m := range rec.methods() {
		if !strings.HasPrefix(m, EventExchange+" ") || !strings.HasSuffix(m, " allowed") {
			t.Fatalf("audit records %v; want only %s allowed", rec.methods(), EventExchange)
		}
	}
	if got := len(rec.methods()); got != len(ts.sent()) {
		t.Fatalf("%d exchange records for %d exchanges", got, len(ts.sent()))
	}
}

// TestExchangeShortLived: a token that expires soon is cached no longer
// than its expiry less RefreshMargin; one without expires_in is not kept.
func TestExchangeShortLived(t *testing.T) {
	for _, tc := range []struct {
		name      string
		expiresIn int
		kept      time.Duration // 0: not cached
	}{
		{"two minutes", 120, 2*time.Minute - RefreshMargin},
		{"no expiry said", 0, 0},
		{"within the margin", 30, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTokenService(t)
			ts.answer = func(f url.Values) (int, map[string]any) {
				return http.StatusOK, map[string]any{"access_token": "x-" + f.Get("subject_token"), "token_type": "Bearer", "expires_in": tc.expiresIn}
			}
			clock := &testClock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
			x := newExchanger(t, clock, &records{})
			srv := &registry.Server{Name: "docs", URL: "https://docs.example/mcp", Auth: registry.AuthTokenExchange,
				OAuth: &registry.OAuthClient{ClientID: "aegis", TokenEndpoint: ts.URL}}
			sub := Subject{Token: "t"}
			for range 2 {
				if _, _, err := x.Token(context.Background(), "acme", "alice", sub, srv); err != nil {
					t.Fatal(err)
				}
			}
			want := 1
			if tc.kept == 0 {
				want = 2
			}
			if got := len(ts.sent()); got != want {
				t.Fatalf("%d exchanges for two calls; want %d", got, want)
			}
			if f := ts.sent()[0]; f.Get("client_id") != "aegis" || ts.auth[0] != ":" {
				t.Fatalf("a public client sent client_id %q and Basic %q", f.Get("client_id"), ts.auth[0])
			}
			if tc.kept == 0 {
				return
			}
			clock.Add(tc.kept - time.Nanosecond)
			_, _, _ = x.Token(context.Background(), "acme", "alice", sub, srv)
			clock.Add(time.Nanosecond)
			_, _, _ = x.Token(context.Background(), "acme", "alice", sub, srv)
			if got := len(ts.sent()); got != 2 {
				t.Fatalf("%d exchanges; want the token served until %v, then exchanged again", got, tc.kept)
			}
		})
	}
}

// TestExchangeRefusals: a caller without a token, a token service that
// refuses or answers something else than a new access token: no token,
// an audited failure, nothing cached.
func TestExchangeRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(f url.Values) (int, map[string]any)
		want   string
	}{
		{"refused", func(url.Values) (int, map[string]any) {
			return http.StatusBadRequest, map[string]any{"error": "invalid_grant", "error_description": "subject token revoked"}
		}, "invalid_grant"},
		{"the caller's own token back", func(f url.Values) (int, map[string]any) {
			return http.StatusOK, map[string]any{"access_token": f.Get("subject_token"), "token_type": "Bearer", "expires_in": 3600}
		}, "caller's own token"},
		{"a refresh token issued", func(url.Values) (int, map[string]any) {
			return http.StatusOK, map[string]any{"access_token": "r", "issued_token_type": "urn:ietf:params:oauth:token-type:refresh_token", "token_type": "Bearer", "expires_in": 3600}
		}, "not an access token"},
		{"not a bearer token", func(url.Values) (int, map[string]any) {
			return http.StatusOK, map[string]any{"access_token": "r", "issued_token_type": TokenTypeAccessToken, "token_type": "N_A", "expires_in": 3600}
		}, "not a Bearer token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTokenService(t)
			ts.answer = tc.answer
			rec := &records{}
			x := newExchanger(t, &testClock{t: time.Now()}, rec)
			srv := &registry.Server{Name: "docs", URL: "https://docs.example/mcp", Auth: registry.AuthTokenExchange,
				OAuth: &registry.OAuthClient{ClientID: "aegis", TokenEndpoint: ts.URL}}
			for range 2 {
				_, _, err := x.Token(context.Background(), "acme", "alice", Subject{Token: "alice-inbound"}, srv)
				var xe *ExchangeError
				if !errors.As(err, &xe) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "alice-inbound") || strings.Contains(err.Error(), "revoked") {
					t.Fatalf("Token = %v; want an *ExchangeError naming %q and no token or answer text", err, tc.want)
				}
			}
			if len(ts.sent()) != 2 {
				t.Fatalf("%d exchanges; a failure must not be cached", len(ts.sent()))
			}
			if m := rec.methods(); len(m) != 2 || m[0] != EventFailure+" alice error" || !strings.HasPrefix(rec.all[0].Detail, "token exchange") {
				t.Fatalf("audit %v; want two failures", m)
			}
		})
	}
	x := newExchanger(t, &testClock{t: time.Now()}, &records{})
	srv := &registry.Server{Name: "docs", URL: "https://docs.example/mcp", Auth: registry.AuthTokenExchange, OAuth: &registry.OAuthClient{ClientID: "aegis", TokenEndpoint: "http://127.0.0.1:1/token"}}
	if _, _, err := x.Token(context.Background(), "acme", "alice", Subject{}, srv); !errors.Is(err, ErrNoSubject) {
		t.Fatalf("an API-key caller: %v; want ErrNoSubject", err)
	}
}

// TestExchangeDiscovered: without a configured endpoint the token service
// is discovered from the server and must be the issuer of the caller's
// token: a server naming another authorization server never receives a
// caller's token.
func TestExchangeDiscovered(t *testing.T) {
	w := newAuthWorld(t)
	ts := newTokenService(t)
	w.asDoc["token_endpoint"] = ts.URL + "/token"
	x := newExchanger(t, &testClock{t: time.Now()}, &records{})
	srv := &registry.Server{Name: "docs", URL: w.up.URL + "/mcp", Auth: registry.AuthTokenExchange, OAuth: &registry.OAuthClient{ClientID: "aegis"}}

	_, _, err := x.Token(context.Background(), "acme", "alice", Subject{Token: "alice-inbound", Issuer: "https://idp.example"}, srv)
	var de *DiscoveryError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "issuer of the caller's token") || len(ts.sent()) != 0 {
		t.Fatalf("a server naming another issuer: %v after %d exchanges; want a discovery error and no exchange", err, len(ts.sent()))
	}
	tok, _, err := x.Token(context.Background(), "acme", "alice", Subject{Token: "alice-inbound", Issuer: w.as.URL}, srv)
	if err != nil || tok == "" || len(ts.sent()) != 1 {
		t.Fatalf("Token = %q, %v", tok, err)
	}
	if f := ts.sent()[0]; f.Get("resource") != w.up.URL+"/mcp" || f.Get("scope") != "mcp" || f.Get("subject_token_type") != TokenTypeAccessToken {
		t.Fatalf("the exchange sent %v; want the discovered resource and scopes", f)
	}
}

// TestExchangeConcurrentCallers: callers of two tenants exchanging at
// once each get the token exchanged for their own, first and from the
// cache.
func TestExchangeConcurrentCallers(t *testing.T) {
	ts := newTokenService(t)
	x := newExchanger(t, &testClock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}, &records{})
	srv := &registry.Server{Name: "docs", URL: "https://docs.example/mcp", Auth: registry.AuthTokenExchange,
		OAuth: &registry.OAuthClient{ClientID: "aegis", TokenEndpoint: ts.URL}}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 8 {
		for _, tenant := range []string{"acme", "other"} {
			wg.Go(func() {
				caller := string(rune('a' + i))
				sub := Subject{Token: tenant + "-" + caller + "-inbound"}
				for range 4 {
					tok, _, err := x.Token(context.Background(), tenant, caller, sub, srv)
					// The token service names the subject token in the
					// token it issues (newTokenService).
					if err != nil || !strings.Contains(tok, "-"+sub.Token+"-") {
						errs <- tenant + "/" + caller + " got " + tok
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := len(ts.sent()); n < 16 {
		t.Fatalf("%d exchanges for 16 callers", n)
	}
}
