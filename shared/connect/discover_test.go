package connect

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/netguard"
)

// guardedClient dials as the gateway's upstream client does: every
// address through netguard.Control (local mode: loopback allowed).
func guardedClient() *http.Client {
	return &http.Client{
		Transport:     &http.Transport{DialContext: (&net.Dialer{Timeout: 2 * time.Second, Control: netguard.Control(true)}).DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// authWorld is an upstream MCP server asking for OAuth and its
// authorization server, edited per test case.
type authWorld struct {
	up, as          *httptest.Server
	challenge       func(w http.ResponseWriter) // the upstream's 401
	prm             map[string]any
	asDoc           map[string]any
	prmPath, asGets atomic.Int32
}

func newAuthWorld(t *testing.T) *authWorld {
	w := &authWorld{}
	w.as = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.asGets.Add(1)
		if r.URL.Path != "/.well-known/openid-configuration" {
			http.NotFound(rw, r)
			return
		}
		_ = json.NewEncoder(rw).Encode(w.asDoc)
	}))
	w.up = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/mcp":
			if r.Header.Get("Authorization") != "" {
				t.Errorf("discovery sent an Authorization header")
			}
			w.challenge(rw)
		case "/.well-known/oauth-protected-resource/mcp":
			w.prmPath.Add(1)
			_ = json.NewEncoder(rw).Encode(w.prm)
		default:
			http.NotFound(rw, r)
		}
	}))
	t.Cleanup(w.up.Close)
	t.Cleanup(w.as.Close)
	w.challenge = func(rw http.ResponseWriter) {
		rw.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", resource_metadata="`+w.up.URL+`/.well-known/oauth-protected-resource/mcp", scope="mcp"`)
		rw.WriteHeader(http.StatusUnauthorized)
	}
	w.prm = map[string]any{"resource": w.up.URL + "/mcp", "authorization_servers": []string{w.as.URL}, "scopes_supported": []string{"mcp"}}
	w.asDoc = map[string]any{"issuer": w.as.URL, "authorization_endpoint": w.as.URL + "/auth", "token_endpoint": w.as.URL + "/token",
		"revocation_endpoint": w.as.URL + "/token/revocation", "code_challenge_methods_supported": []string{"S256"}}
	return w
}

func TestDiscover(t *testing.T) {
	w := newAuthWorld(t)
	d := &Discoverer{HTTP: guardedClient(), Local: true, Now: time.Now}
	md, err := d.Discover(context.Background(), w.up.URL+"/mcp")
	if err != nil {
		t.Fatal(err)
	}
	want := Metadata{Resource: w.up.URL + "/mcp", Scopes: []string{"mcp"}, Issuer: w.as.URL, AuthorizationEndpoint: w.as.URL + "/auth",
		TokenEndpoint: w.as.URL + "/token", RevocationEndpoint: w.as.URL + "/token/revocation"}
	if md.Resource != want.Resource || md.Issuer != want.Issuer || md.AuthorizationEndpoint != want.AuthorizationEndpoint || md.TokenEndpoint != want.TokenEndpoint || md.RevocationEndpoint != want.RevocationEndpoint || len(md.Scopes) != 1 {
		t.Fatalf("Discover = %+v\nwant %+v", md, want)
	}
	// Cached: no second round of fetches.
	gets := w.asGets.Load()
	if _, err := d.Discover(context.Background(), w.up.URL+"/mcp"); err != nil || w.asGets.Load() != gets {
		t.Fatalf("second Discover fetched again (%d → %d), %v", gets, w.asGets.Load(), err)
	}
}

// TestDiscoverWellKnown: a 401 without resource_metadata sends discovery
// to RFC 9728's well-known URL for the server's path.
func TestDiscoverWellKnown(t *testing.T) {
	w := newAuthWorld(t)
	w.challenge = func(rw http.ResponseWriter) {
		rw.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
		rw.WriteHeader(http.StatusUnauthorized)
	}
	d := &Discoverer{HTTP: guardedClient(), Local: true, Now: time.Now}
	if _, err := d.Discover(context.Background(), w.up.URL+"/mcp"); err != nil || w.prmPath.Load() != 1 {
		t.Fatalf("Discover = %v after %d metadata reads; want the well-known path read once", err, w.prmPath.Load())
	}
}

// TestDiscoverRefuses: every way a server or its metadata can point
// discovery somewhere it must not go, or say something it must not.
func TestDiscoverRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(w *authWorld)
		want string
	}{
		{"issuer at the metadata address", func(w *authWorld) { w.prm["authorization_servers"] = []string{"http://169.254.169.254/latest"} }, "link-local"},
		{"issuer at a metadata address in IPv6 form", func(w *authWorld) { w.prm["authorization_servers"] = []string{"http://[::ffff:169.254.169.254]/"} }, "169.254.169.254"},
		{"issuer at a metadata host name", func(w *authWorld) { w.prm["authorization_servers"] = []string{"http://metadata.google.internal/"} }, "metadata"},
		{"resource metadata at the metadata address", func(w *authWorld) {
			w.challenge = func(rw http.ResponseWriter) {
				rw.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://169.254.169.254/latest/meta-data"`)
				rw.WriteHeader(http.StatusUnauthorized)
			}
		}, "link-local"},
		{"token endpoint at the metadata address", func(w *authWorld) { w.asDoc["token_endpoint"] = "http://169.254.169.254/token" }, "token_endpoint"},
		{"issuer mismatch", func(w *authWorld) { w.asDoc["issuer"] = "https://evil.example" }, "names issuer"},
		{"no S256", func(w *authWorld) { w.asDoc["code_challenge_methods_supported"] = []string{"plain"} }, "S256"},
		{"another resource", func(w *authWorld) { w.prm["resource"] = "https://other.example/mcp" }, "names resource"},
		{"no authorization server", func(w *authWorld) { delete(w.prm, "authorization_servers") }, "no authorization server"},
		{"no 401", func(w *authWorld) { w.challenge = func(rw http.ResponseWriter) { rw.WriteHeader(http.StatusOK) } }, "not 401"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newAuthWorld(t)
			tc.edit(w)
			d := &Discoverer{HTTP: guardedClient(), Local: true, Now: time.Now}
			_, err := d.Discover(context.Background(), w.up.URL+"/mcp")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Discover = %v; want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestChallengeParam(t *testing.T) {
	for _, tc := range []struct {
		hs   []string
		want string
	}{
		{[]string{`Bearer resource_metadata="https://a/x"`}, "https://a/x"},
		{[]string{`Basic realm="x"`, `Bearer error="invalid_token", resource_metadata="https://a/y", scope="a b"`}, "https://a/y"},
		{[]string{`bearer scope="a, b", resource_metadata=https://a/z`}, "https://a/z"},
		{[]string{`Bearer realm="x"`}, ""},
		{nil, ""},
	} {
		if got := challengeParam(tc.hs, "resource_metadata"); got != tc.want {
			t.Errorf("challengeParam(%q) = %q; want %q", tc.hs, got, tc.want)
		}
	}
}
