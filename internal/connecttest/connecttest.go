// Package connecttest is the test kit of connections (docs/connections.md)
// with parts nobody here wrote: panva's OpenID provider from npm
// (oidc-provider) as the authorization server, a Go SDK MCP server behind
// the SDK's bearer-token middleware that requires its tokens, and a
// person's browser that follows a link through the provider's login and
// consent pages. Each runs on loopback, over http or, for a gateway that
// needs https (the Lambda function), over TLS with a certificate the test
// makes (Cert).
package connecttest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// ProviderPackage is the pinned npm OpenID provider.
var ProviderPackage = npmcache.Package{Name: "oidc-provider", Version: "9.13.3"}

// ClientID is aegis's client at the provider when Provider.ClientID is
// empty: confidential (client_secret_basic), its secret Provider.Secret.
const ClientID = "aegis-docs"

// Cert is a self-signed certificate for 127.0.0.1, for servers the test
// runs over TLS and the clients (and processes) that must trust them.
type Cert struct {
	CertPEM, KeyPEM []byte
	pair            tls.Certificate
	pool            *x509.CertPool
}

// NewCert makes a Cert valid for an hour.
func NewCert(t testing.TB) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true, IPAddresses: []net.IP{netip.MustParseAddr("127.0.0.1").AsSlice()},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cert{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})}
	if c.pair, err = tls.X509KeyPair(c.CertPEM, c.KeyPEM); err != nil {
		t.Fatal(err)
	}
	c.pool = x509.NewCertPool()
	c.pool.AppendCertsFromPEM(c.CertPEM)
	return c
}

// ServerConfig is a server's TLS configuration with the certificate.
func (c *Cert) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c.pair}, MinVersion: tls.VersionTLS12}
}

// Transport is an HTTP transport that trusts the certificate (nil c: the
// default roots).
func (c *Cert) Transport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if c != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12}
	}
	return tr
}

// File writes the certificate as PEM into dir and returns its path (for
// SSL_CERT_FILE of a process the test starts).
func (c *Cert) File(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "connecttest-ca.pem")
	if err := os.WriteFile(p, c.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// providerScript runs panva's oidc-provider as the authorization server of
// one upstream MCP server (RESOURCE): one confidential client of aegis's
// (CLIENT_ID) with REDIRECT as its only redirect URI, PKCE required, RFC
// 8707 resource indicators giving RS256 JWT access tokens for RESOURCE
// only, refresh tokens (rotated on use), and the provider's development
// login and consent pages (any login, any password). With TLS_CERT and
// TLS_KEY it serves https.
const providerScript = `import Provider, { errors } from 'oidc-provider';
import https from 'node:https';
import fs from 'node:fs';
const port = Number(process.env.ISSUER_PORT);
const tls = process.env.TLS_CERT ? { cert: fs.readFileSync(process.env.TLS_CERT), key: fs.readFileSync(process.env.TLS_KEY) } : null;
const issuer = (tls ? 'https' : 'http') + '://127.0.0.1:' + port;
const resource = process.env.RESOURCE;
const provider = new Provider(issuer, {
  clients: [{
    client_id: process.env.CLIENT_ID, client_secret: process.env.CLIENT_SECRET,
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
const ready = () => console.log('issuer ' + issuer);
if (tls) https.createServer(tls, provider.callback()).listen(port, '127.0.0.1', ready);
else provider.listen(port, '127.0.0.1', ready);
`

// Provider is what StartProvider runs.
type Provider struct {
	Resource string // the one resource it issues tokens for
	Redirect string // its client's only redirect URI
	ClientID string // the client's id (aegis-docs when empty)
	Secret   string // the client's secret
	TLS      *Cert  // serve https with this certificate; nil: http
}

// StartProvider installs the pinned oidc-provider and Node (npmcache)
// when missing, starts it on loopback until the test ends, and returns
// its issuer URL. A machine that cannot install it fails the test.
func StartProvider(t testing.TB, p Provider) string {
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
	if p.ClientID == "" {
		p.ClientID = ClientID
	}
	addr := mcptest.FreePort(t)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	issuer := "http://127.0.0.1:" + port
	env := append(os.Environ(), "ISSUER_PORT="+port, "RESOURCE="+p.Resource, "REDIRECT="+p.Redirect, "CLIENT_ID="+p.ClientID, "CLIENT_SECRET="+p.Secret)
	if p.TLS != nil {
		tdir := t.TempDir()
		key := filepath.Join(tdir, "key.pem")
		if err := os.WriteFile(key, p.TLS.KeyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		env = append(env, "TLS_CERT="+p.TLS.File(t, tdir), "TLS_KEY="+key)
		issuer = "https://127.0.0.1:" + port
	}
	var out syncbuf.Buffer
	cmd := exec.Command(npmcache.NodeBin(dir), script)
	cmd.Env = env
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
// token it was sent and counts the MCP requests that passed the
// middleware.
type Upstream struct {
	URL    string
	mu     sync.Mutex
	tokens []string
	calls  int
}

// Seen returns the tokens the upstream was sent and the number of MCP
// requests it served.
func (u *Upstream) Seen() ([]string, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.tokens...), u.calls
}

// StartUpstream runs an Upstream until the test ends, over TLS with cert
// when it is not nil. issuer is called for the issuer's URL when a token
// is verified (the provider may start after the upstream: it issues
// tokens for the upstream's URL).
func StartUpstream(t testing.TB, issuer func() string, cert *Cert) *Upstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	scheme := "http"
	if cert != nil {
		scheme = "https"
	}
	u := &Upstream{URL: scheme + "://" + l.Addr().String() + "/mcp"}
	keysClient := &http.Client{Transport: cert.Transport(), Timeout: 10 * time.Second}
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
		keys, err := providerKeys(ctx, keysClient, issuer())
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
	if cert != nil {
		hs.TLS = cert.ServerConfig()
		hs.StartTLS()
	} else {
		hs.Start()
	}
	t.Cleanup(hs.Close)
	return u
}

// providerKeys reads the provider's JWKS (its RSA keys by kid).
func providerKeys(ctx context.Context, hc *http.Client, issuer string) (map[string]*rsa.PublicKey, error) {
	get := func(u string, v any) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := hc.Do(req)
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

var (
	formAction = regexp.MustCompile(`<form[^>]*action="([^"]+)"`)
	promptIn   = regexp.MustCompile(`name="prompt" value="([a-z]+)"`)
)

// Browser is a person's browser: a cookie jar, following redirects,
// trusting cert (nil: the default roots).
func Browser(cert *Cert) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 20 * time.Second, Transport: cert.Transport()}
}

// Consent follows link in b as a person does: the provider's login page
// (login as who), its consent page, and back to the gateway's callback,
// whose page it returns. stopAt, when set, stops at the first redirect to
// a URL it matches and returns that URL instead.
func Consent(t testing.TB, b *http.Client, link, who string, stopAt func(string) bool) (status int, page, stopped string) {
	t.Helper()
	c := *b
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if stopAt != nil && stopAt(req.URL.String()) {
			stopped = req.URL.String()
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := c.Get(link)
	for step := 0; ; step++ {
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if stopped != "" {
			return resp.StatusCode, string(body), stopped
		}
		m := formAction.FindStringSubmatch(string(body))
		if m == nil || step > 4 {
			return resp.StatusCode, string(body), ""
		}
		action, _ := resp.Request.URL.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
		form := url.Values{}
		if p := promptIn.FindStringSubmatch(string(body)); p != nil {
			form.Set("prompt", p[1])
			if p[1] == "login" {
				form.Set("login", who)
				form.Set("password", "any")
			}
		}
		resp, err = c.PostForm(action.String(), form)
	}
}
