package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/oidctest"
	"github.com/aegis-gw/aegis/internal/syncbuf"
	"github.com/aegis-gw/aegis/internal/testclock"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/registry"
)

const aud = "https://gw.test/t/acme/mcp"

type fixture struct {
	is     *oidctest.Issuer
	clock  *testclock.Clock
	v      *Validator
	tenant registry.Tenant
}

func newFixture(t testing.TB, o *Options) *fixture {
	f := &fixture{is: oidctest.Start(t, nil), clock: testclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))}
	if o == nil {
		o = &Options{}
	}
	o.Local, o.Now = true, f.clock.Now
	f.v = New(o)
	f.tenant = registry.Tenant{ID: "acme", Issuers: []registry.Issuer{{
		URL: f.is.URL, Audiences: []string{aud}, RolesClaim: "roles",
		ScopeRoles: map[string][]string{"tools:write": {"writer"}}, RequiredScopes: []string{"mcp"},
	}}}
	return f
}

func (f *fixture) claims() map[string]any {
	c := f.is.Claims(aud, f.clock.Now(), 5*time.Minute)
	c["scope"] = "mcp tools:write"
	c["roles"] = []string{"ops"}
	return c
}

func TestValid(t *testing.T) {
	f := newFixture(t, nil)
	for _, alg := range []string{"ES256", "RS256", "EdDSA"} {
		t.Run(alg, func(t *testing.T) {
			k := oidctest.NewKey(t, "key-"+string(alg), alg)
			f.is.Publish(k)
			f.clock.Advance(DefaultRefreshInterval) // the new kid may be fetched
			id, err := f.v.Validate(context.Background(), f.tenant, aud, f.is.Sign(t, k, f.claims()))
			if err != nil {
				t.Fatal(err)
			}
			if id.Caller != "alice" || !slices.Equal(id.Roles, []string{"ops", "writer"}) || !slices.Equal(id.Scopes, []string{"mcp", "tools:write"}) || id.Issuer != f.is.URL {
				t.Errorf("identity = %+v", id)
			}
		})
	}
}

// TestRefused is the validator's table of bad tokens; each is refused
// with its own reason (docs/oauth.md, "Refusals").
func TestRefused(t *testing.T) {
	f := newFixture(t, nil)
	k := f.is.Signing()
	other := oidctest.NewKey(t, "k-unpublished", "ES256")
	now := f.clock.Now()
	with := func(mod func(c map[string]any)) map[string]any {
		c := f.claims()
		mod(c)
		return c
	}
	good := f.is.Sign(t, k, f.claims())
	for _, tc := range []struct {
		name  string
		token string
		want  *auth.Error
	}{
		{"expired", f.is.Sign(t, k, with(func(c map[string]any) { c["exp"] = now.Add(-DefaultSkew - time.Second).Unix() })), ErrExpired},
		{"no exp", f.is.Sign(t, k, with(func(c map[string]any) { delete(c, "exp") })), ErrNoExpiry},
		{"not yet valid", f.is.Sign(t, k, with(func(c map[string]any) { c["nbf"] = now.Add(DefaultSkew + time.Minute).Unix() })), ErrNotYetValid},
		{"issued in the future", f.is.Sign(t, k, with(func(c map[string]any) { c["iat"] = now.Add(DefaultSkew + time.Minute).Unix() })), ErrNotYetValid},
		{"wrong audience", f.is.Sign(t, k, with(func(c map[string]any) { c["aud"] = "https://gw.test/t/globex/mcp" })), ErrAudience},
		{"audience list without ours", f.is.Sign(t, k, with(func(c map[string]any) { c["aud"] = []string{"a", "b"} })), ErrAudience},
		{"wrong issuer", f.is.Sign(t, k, with(func(c map[string]any) { c["iss"] = "https://evil.example" })), ErrIssuer},
		{"alg none", oidctest.Unsigned(t, f.claims()), ErrAlgorithm},
		{"HS256 with the public key", oidctest.HMACWithPublicKey(t, k, f.claims()), ErrAlgorithm},
		{"unknown kid", f.is.Sign(t, other, f.claims()), ErrUnknownKey},
		{"tampered payload", oidctest.Tamper(t, good, with(func(c map[string]any) { c["roles"] = []string{"admin"} })), ErrSignature},
		{"missing scope", f.is.Sign(t, k, with(func(c map[string]any) { c["scope"] = "tools:write" })), insufficientScope([]string{"mcp"})},
		{"bad caller", f.is.Sign(t, k, with(func(c map[string]any) { c["sub"] = "has space" })), ErrCaller},
		// RFC 7519 §2: a NumericDate is a JSON number. encoding/json reads
		// a string of digits into a json.Number; it is refused here.
		{"exp a string of digits", f.is.Sign(t, k, with(func(c map[string]any) { c["exp"] = fmt.Sprint(now.Add(time.Hour).Unix()) })), ErrDate},
		{"exp a date string", f.is.Sign(t, k, with(func(c map[string]any) { c["exp"] = "2099-01-01T00:00:00Z" })), ErrDate},
		{"exp null", f.is.Sign(t, k, with(func(c map[string]any) { c["exp"] = nil })), ErrDate},
		{"exp true", f.is.Sign(t, k, with(func(c map[string]any) { c["exp"] = true })), ErrDate},
		{"exp an array", f.is.Sign(t, k, with(func(c map[string]any) { c["exp"] = []int64{now.Add(time.Hour).Unix()} })), ErrDate},
		{"nbf a string", f.is.Sign(t, k, with(func(c map[string]any) { c["nbf"] = fmt.Sprint(now.Unix()) })), ErrDate},
		{"iat a string", f.is.Sign(t, k, with(func(c map[string]any) { c["iat"] = fmt.Sprint(now.Unix()) })), ErrDate},
		{"iat null", f.is.Sign(t, k, with(func(c map[string]any) { c["iat"] = nil })), ErrDate},
		{"not a JWT", "abc.def", ErrMalformed},
		{"too long", strings.Repeat("a", MaxTokenBytes+1), ErrTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.v.Validate(context.Background(), f.tenant, aud, tc.token)
			var ae *auth.Error
			if !errors.As(err, &ae) || ae.Reason != tc.want.Reason || ae.HTTPStatus() != tc.want.HTTPStatus() || ae.Challenge != tc.want.Challenge || ae.Scope != tc.want.Scope {
				t.Fatalf("err = %#v, want %#v", err, tc.want)
			}
			if strings.Contains(err.Error(), tc.token) {
				t.Error("the error text carries the token")
			}
		})
	}
	// Within the skew a token is still (or already) valid.
	for name, mod := range map[string]func(c map[string]any){
		"expired within skew":   func(c map[string]any) { c["exp"] = now.Add(-DefaultSkew + time.Second).Unix() },
		"nbf within skew":       func(c map[string]any) { c["nbf"] = now.Add(DefaultSkew - time.Second).Unix() },
		"aud in a list":         func(c map[string]any) { c["aud"] = []string{"x", aud} },
		"scp array, no kid set": func(c map[string]any) { delete(c, "scope"); c["scp"] = []string{"mcp"} },
		"fractional exp":        func(c map[string]any) { c["exp"] = float64(now.Add(time.Hour).UnixMilli()) / 1000 },
		"exponent exp":          func(c map[string]any) { c["exp"] = json.Number("1.7e10") },
	} {
		if _, err := f.v.Validate(context.Background(), f.tenant, aud, f.is.Sign(t, k, with(mod))); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestAlgorithmsPerIssuer: an issuer that allows RS256 only refuses an
// ES256 token from its own keys.
func TestAlgorithmsPerIssuer(t *testing.T) {
	f := newFixture(t, nil)
	f.tenant.Issuers[0].Algorithms = []string{"RS256"}
	_, err := f.v.Validate(context.Background(), f.tenant, aud, f.is.Sign(t, f.is.Signing(), f.claims()))
	if !errors.Is(err, ErrAlgorithm) {
		t.Fatalf("err = %v, want %v", err, ErrAlgorithm)
	}
}

// TestRotation: the issuer rotates k1 out for k2. A token of k2 makes the
// validator fetch the keys again at once (its kid is unknown); a token of
// k1 is then refused, and neither it nor a flood of tokens with unknown
// kids makes another fetch until the refresh interval has passed.
func TestRotation(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	k1 := f.is.Signing()
	if _, err := f.v.Validate(ctx, f.tenant, aud, f.is.Sign(t, k1, f.claims())); err != nil {
		t.Fatal(err)
	}
	if n := f.is.JWKSFetches(); n != 1 {
		t.Fatalf("JWKS fetched %d times for the first token, want 1", n)
	}
	k2 := oidctest.NewKey(t, "k2", "RS256")
	f.is.Publish(k2)
	f.clock.Advance(DefaultRefreshInterval) // the last fetch is an interval old
	if _, err := f.v.Validate(ctx, f.tenant, aud, f.is.Sign(t, k2, f.claims())); err != nil {
		t.Fatalf("token of the new key: %v", err)
	}
	if n := f.is.JWKSFetches(); n != 2 {
		t.Fatalf("JWKS fetched %d times after rotation, want 2", n)
	}
	// k1's cached tokens still answer from the token cache until they
	// expire; a new token of k1 is checked against the keys now known.
	c := f.claims()
	c["jti"] = "fresh"
	if _, err := f.v.Validate(ctx, f.tenant, aud, f.is.Sign(t, k1, c)); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("token of the withdrawn key: err = %v, want %v", err, ErrUnknownKey)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bogus := oidctest.NewKey(t, fmt.Sprintf("bogus-%d", i), "EdDSA")
			if _, err := f.v.Validate(ctx, f.tenant, aud, f.is.Sign(t, bogus, f.claims())); !errors.Is(err, ErrUnknownKey) {
				t.Errorf("bogus kid: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := f.is.JWKSFetches(); n != 2 {
		t.Fatalf("JWKS fetched %d times after 51 more unknown kids within the interval, want still 2", n)
	}
	f.clock.Advance(DefaultRefreshInterval)
	bogus := oidctest.NewKey(t, "bogus-late", "EdDSA")
	_, _ = f.v.Validate(ctx, f.tenant, aud, f.is.Sign(t, bogus, f.claims()))
	if n := f.is.JWKSFetches(); n != 3 {
		t.Fatalf("JWKS fetched %d times an interval later, want 3", n)
	}
	// Past KeysTTL the keys are fetched again even for a known kid.
	f.clock.Advance(DefaultKeysTTL)
	if _, err := f.v.Validate(ctx, f.tenant, aud, f.is.Sign(t, k2, f.claims())); err != nil {
		t.Fatal(err)
	}
	if n := f.is.JWKSFetches(); n != 4 {
		t.Fatalf("JWKS fetched %d times past the keys' TTL, want 4", n)
	}
}

// TestCache: a validated token is served from the cache (no fetch) until
// it expires, is validated again when the tenant's issuer changes, and
// the cache stays within its bounds.
func TestCache(t *testing.T) {
	f := newFixture(t, &Options{CacheEntries: 3})
	ctx := context.Background()
	tok := f.is.Sign(t, f.is.Signing(), f.claims())
	if _, err := f.v.Validate(ctx, f.tenant, aud, tok); err != nil {
		t.Fatal(err)
	}
	f.is.Publish(oidctest.NewKey(t, "other", "ES256")) // the token's key is gone
	f.clock.Advance(time.Minute)                       // past the refresh interval, within the token's life
	fetches := f.is.JWKSFetches()
	id, err := f.v.Validate(ctx, f.tenant, aud, tok)
	if err != nil || id.Caller != "alice" {
		t.Fatalf("cached token: %+v %v", id, err)
	}
	if f.is.JWKSFetches() != fetches {
		t.Error("a cached token fetched keys")
	}
	id.Roles[0] = "changed" // callers may not change the cache through what they got
	if id2, _ := f.v.Validate(ctx, f.tenant, aud, tok); id2.Roles[0] != "ops" {
		t.Error("the cached roles were changed through a returned identity")
	}
	// Another tenant trusting the same issuer: the cache is per tenant.
	other := f.tenant
	other.ID = "globex"
	other.Issuers = []registry.Issuer{f.tenant.Issuers[0]}
	other.Issuers[0].Audiences = []string{"https://gw.test/t/globex/mcp"}
	if _, err := f.v.Validate(ctx, other, aud, tok); !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrAudience) {
		t.Fatalf("acme's token for globex: %v", err)
	}
	// A change of the issuer's configuration validates again.
	changed := f.tenant
	changed.Issuers = []registry.Issuer{f.tenant.Issuers[0]}
	changed.Issuers[0].RequiredScopes = []string{"admin"}
	if _, err := f.v.Validate(ctx, changed, aud, tok); err == nil {
		t.Fatal("a cached token survived a change of its issuer's configuration")
	}
	// Expiry.
	f.clock.Advance(5*time.Minute + DefaultSkew)
	if _, err := f.v.Validate(ctx, f.tenant, aud, tok); err == nil {
		t.Fatal("an expired token was served from the cache")
	}
	// Bounds: count.
	f.is.Publish(f.is.Signing(), oidctest.NewKey(t, "k3", "ES256"))
	f.clock.Advance(DefaultRefreshInterval)
	for i := range 10 {
		c := f.claims()
		c["jti"] = fmt.Sprint(i)
		if _, err := f.v.Validate(ctx, f.tenant, aud, f.is.Sign(t, f.is.Signing(), c)); err != nil {
			t.Fatal(err)
		}
		if n, _ := f.v.cache.len(); n > 3 {
			t.Fatalf("cache holds %d tokens, bound 3", n)
		}
	}
}

func TestCacheBytes(t *testing.T) {
	c := newTokenCache(1000, 4096, DefaultSkew)
	now := time.Unix(1e9, 0)
	for i := range 100 {
		c.put(cacheKey("t", "r", fmt.Sprint(i)), Identity{Caller: "c", Claims: make([]byte, 1000), Expires: now.Add(time.Hour)}, registry.Issuer{}, now)
		if _, b := c.len(); b > 4096 {
			t.Fatalf("cache holds %d bytes, bound 4096", b)
		}
	}
	if n, _ := c.len(); n == 0 {
		t.Fatal("nothing cached")
	}
	c.put(cacheKey("t", "r", "huge"), Identity{Claims: make([]byte, 5000), Expires: now.Add(time.Hour)}, registry.Issuer{}, now)
	if _, _, ok := c.get(cacheKey("t", "r", "huge"), now); ok {
		t.Fatal("an entry over the whole bound was cached")
	}
}

// TestKeysUnavailable: an issuer that cannot be reached refuses tokens
// with ErrKeys (401), after one attempt per interval.
func TestKeysUnavailable(t *testing.T) {
	f := newFixture(t, nil)
	f.tenant.Issuers[0].URL = "http://127.0.0.1:1"
	c := f.claims()
	c["iss"] = "http://127.0.0.1:1"
	if _, err := f.v.Validate(context.Background(), f.tenant, aud, f.is.Sign(t, f.is.Signing(), c)); !errors.Is(err, ErrKeys) {
		t.Fatalf("err = %v, want %v", err, ErrKeys)
	}
}

// TestHTTPSOutsideLocal: outside local mode an http issuer is never
// fetched.
func TestHTTPSOutsideLocal(t *testing.T) {
	f := newFixture(t, nil)
	v := New(&Options{Now: f.clock.Now})
	if _, err := v.Validate(context.Background(), f.tenant, aud, f.is.Sign(t, f.is.Signing(), f.claims())); !errors.Is(err, ErrKeys) {
		t.Fatalf("err = %v, want %v", err, ErrKeys)
	}
	if f.is.JWKSFetches() != 0 {
		t.Fatal("an http issuer's keys were fetched outside local mode")
	}
}

// BenchmarkCacheHit is a validated token presented again: the target is
// under 5 µs.
func BenchmarkCacheHit(b *testing.B) {
	f := newFixture(b, nil)
	tok := f.is.Sign(b, f.is.Signing(), f.claims())
	ctx := context.Background()
	if _, err := f.v.Validate(ctx, f.tenant, aud, tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.v.Validate(ctx, f.tenant, aud, tok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidate is a token validated in full (keys cached).
func BenchmarkValidate(b *testing.B) {
	f := newFixture(b, &Options{CacheEntries: 1})
	ctx := context.Background()
	toks := make([]string, 64)
	for i := range toks {
		c := f.claims()
		c["jti"] = fmt.Sprint(i)
		toks[i] = f.is.Sign(b, f.is.Signing(), c)
	}
	if _, err := f.v.Validate(ctx, f.tenant, aud, toks[0]); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		if _, err := f.v.Validate(ctx, f.tenant, aud, toks[i%len(toks)]); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzValidate: whatever a client presents, Validate returns nil or an
// *auth.Error (a 401 or 403 for the client), never panics, and never
// puts the token in the error.
func FuzzValidate(f *testing.F) {
	fx := newFixture(f, nil)
	k := fx.is.Signing()
	good := fx.is.Sign(f, k, fx.claims())
	for _, s := range []string{good, oidctest.Unsigned(f, fx.claims()), oidctest.HMACWithPublicKey(f, k, fx.claims()),
		oidctest.Tamper(f, good, map[string]any{"iss": fx.is.URL, "exp": 1 << 62}), "a.b.c", "..", "", "eyJhbGciOiJFUzI1NiJ9.e30.AAAA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		_, err := fx.v.Validate(context.Background(), fx.tenant, aud, token)
		if err == nil {
			return
		}
		var ae *auth.Error
		if !errors.As(err, &ae) {
			t.Fatalf("err %T %v is not an *auth.Error", err, err)
		}
		if len(token) > 8 && strings.Contains(err.Error(), token) {
			t.Fatal("the error carries the token")
		}
	})
}

// TestResourceBinding: a token is accepted only on the endpoint whose
// resource URL its aud names, byte for byte, and only where the issuer's
// audiences allow that resource. A token for /t/alpha/mcp/c is refused on
// the tenant's other endpoints, on the same path under another scheme,
// host, port or a trailing slash, and from the cache.
func TestResourceBinding(t *testing.T) {
	f := newFixture(t, nil)
	const origin = "https://gw.test"
	c := origin + "/t/alpha/mcp/c"
	f.tenant.ID = "alpha"
	f.tenant.Issuers[0].Audiences = []string{origin}
	ctx := context.Background()
	sign := func(aud any) string {
		cl := f.claims()
		cl["aud"] = aud
		return f.is.Sign(t, f.is.Signing(), cl)
	}
	forC := sign(c)
	for _, tc := range []struct {
		name, resource, token string
		ok                    bool
	}{
		{"its own endpoint", c, forC, true},
		{"its own endpoint again (cached)", c, forC, true},
		{"another server", origin + "/t/alpha/mcp/a", forC, false},
		{"the tenant's /mcp", origin + "/t/alpha/mcp", forC, false},
		{"the tenant's /v1/invoke", origin + "/t/alpha/v1/invoke", forC, false},
		{"a trailing slash", c + "/", forC, false},
		{"http", "http://gw.test/t/alpha/mcp/c", forC, false},
		{"an explicit port", "https://gw.test:443/t/alpha/mcp/c", forC, false},
		{"another case", "https://GW.test/t/alpha/mcp/c", forC, false},
		{"an aud list naming it", c, sign([]string{origin + "/t/alpha/mcp", c}), true},
		{"an aud list naming the other", origin + "/t/alpha/mcp", sign([]string{origin + "/t/alpha/mcp", c}), true},
		{"an aud list not naming it", origin + "/t/alpha/v1/invoke", sign([]string{origin + "/t/alpha/mcp", c}), false},
		{"aud the origin alone", c, sign(origin), false},
		{"aud the origin with a slash", c, sign(origin + "/"), false},
		// The Host header is the client's: a token for another host's
		// resource, presented with that Host, is refused because the
		// issuer's audiences do not allow that host.
		{"a host the audiences do not allow", "https://evil.test/t/alpha/mcp/c", sign("https://evil.test/t/alpha/mcp/c"), false},
		{"a host that extends the allowed one", "https://gw.test.evil/t/alpha/mcp/c", sign("https://gw.test.evil/t/alpha/mcp/c"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.v.Validate(ctx, f.tenant, tc.resource, tc.token)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrAudience) {
				t.Fatalf("err = %v, want %v", err, ErrAudience)
			}
		})
	}
	// Audiences that list endpoints allow those only.
	f.tenant.Issuers[0].Audiences = []string{origin + "/t/alpha/mcp"}
	if _, err := f.v.Validate(ctx, f.tenant, c, forC); !errors.Is(err, ErrAudience) {
		t.Fatalf("a resource the audiences do not list: err = %v, want %v", err, ErrAudience)
	}
}

func TestResourceAllowed(t *testing.T) {
	const r = "https://gw.test/t/acme/mcp/files"
	for _, tc := range []struct {
		audiences []string
		ok        bool
	}{
		{[]string{r}, true},
		{[]string{"https://gw.test"}, true},
		{[]string{"https://gw.test/"}, true},
		{[]string{"https://other.test", "https://gw.test/t/acme/mcp", r}, true},
		{[]string{"https://gw.test/t/acme/mcp"}, false},
		{[]string{"https://gw.test/t/acme/mcp/"}, false},
		{[]string{"https://gw.tes"}, false},
		{[]string{"https://gw.test:8443"}, false},
		{[]string{"http://gw.test"}, false},
		{[]string{"https://gw.test?x"}, false},
		{[]string{"https://gw.test/t"}, false},
		{nil, false},
	} {
		if got := ResourceAllowed(tc.audiences, r); got != tc.ok {
			t.Errorf("ResourceAllowed(%q) = %v, want %v", tc.audiences, got, tc.ok)
		}
	}
}

// TestMetadataIssuerAndJWKS: an issuer whose URL, or whose discovery
// document's jwks_uri, is a cloud metadata address is never fetched
// from: its tokens are refused (the keys cannot be fetched) and the log
// says why.
func TestMetadataIssuerAndJWKS(t *testing.T) {
	var logs syncbuf.Buffer
	clock := testclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	v := New(&Options{Local: true, Now: clock.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	is := oidctest.Start(t, nil)
	// A discovery document that names a metadata address as its JWKS.
	var disc *httptest.Server
	disc = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"issuer":%q,"jwks_uri":"http://[::ffff:100.100.100.200]/jwks"}`, disc.URL)
	}))
	defer disc.Close()
	for _, issuer := range []string{disc.URL, "http://100.100.100.200", "http://[fd00:ec2::254]", "http://2852039166"} {
		t.Run(issuer, func(t *testing.T) {
			tenant := registry.Tenant{ID: "acme", Issuers: []registry.Issuer{{URL: issuer, Audiences: []string{aud}}}}
			c := is.Claims(aud, clock.Now(), 5*time.Minute)
			c["iss"] = issuer
			if _, err := v.Validate(context.Background(), tenant, aud, is.Sign(t, is.Signing(), c)); !errors.Is(err, ErrKeys) {
				t.Fatalf("err = %v, want %v", err, ErrKeys)
			}
		})
	}
	for _, want := range []string{"Alibaba", "AWS", "notation"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs.String())
		}
	}
}

// TestRefusalsDocumented: docs/oauth.md's table of what a token must be
// gives every refusal's text, as a client reads it.
func TestRefusalsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/oauth.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*auth.Error{ErrMalformed, ErrTooLong, ErrAlgorithm, ErrIssuer, ErrUnknownKey, ErrSignature,
		ErrNoExpiry, ErrExpired, ErrNotYetValid, ErrDate, ErrAudience, ErrCaller, ErrKeys} {
		if want := "`" + e.Error() + "`"; !strings.Contains(string(b), want) {
			t.Errorf("docs/oauth.md does not give %s", want)
		}
	}
}
