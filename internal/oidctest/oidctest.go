// Package oidctest runs a real OpenID issuer for tests on a loopback port:
// OpenID Connect discovery, a JWKS whose keys a test can rotate, the
// authorization code flow with PKCE and RFC 8707 resource indicators
// (the code is granted at once, as if a user had consented), dynamic
// client registration, and tokens signed per test case with any key and
// algorithm, including the forged ones a resource server must refuse.
package oidctest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Key is one signing key of the issuer.
type Key struct {
	ID  string
	Alg string // RS256, ES256 or EdDSA
	key crypto.Signer
}

// Public is the key's public half as a JWK (RFC 7517, 7518, 8037).
func (k *Key) Public() map[string]any {
	b := base64.RawURLEncoding.EncodeToString
	j := map[string]any{"kid": k.ID, "alg": k.Alg, "use": "sig"}
	switch p := k.key.Public().(type) {
	case *rsa.PublicKey:
		j["kty"], j["n"], j["e"] = "RSA", b(p.N.Bytes()), b(big.NewInt(int64(p.E)).Bytes())
	case *ecdsa.PublicKey:
		raw, _ := p.Bytes() // 0x04 || x || y
		j["kty"], j["crv"], j["x"], j["y"] = "EC", "P-256", b(raw[1:33]), b(raw[33:])
	case ed25519.PublicKey:
		j["kty"], j["crv"], j["x"] = "OKP", "Ed25519", b(p)
	}
	return j
}

// methods sign for each algorithm.
var methods = map[string]jwt.SigningMethod{"RS256": jwt.SigningMethodRS256, "ES256": jwt.SigningMethodES256, "EdDSA": jwt.SigningMethodEdDSA}

// NewKey makes a key for alg (RS256, ES256 or EdDSA).
func NewKey(t testing.TB, id string, alg string) *Key {
	t.Helper()
	var s crypto.Signer
	var err error
	switch alg {
	case "RS256":
		s, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		s, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "EdDSA":
		_, s, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("oidctest: no key for %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &Key{ID: id, Alg: alg, key: s}
}

// Issuer is a running OpenID issuer.
type Issuer struct {
	URL string // the issuer identifier, http(s)://127.0.0.1:PORT
	srv *httptest.Server
	t   testing.TB

	mu        sync.Mutex
	published []*Key // in the JWKS
	signing   *Key   // signs the tokens of the code flow
	codes     map[string]grant
	clients   map[string]bool
	// Claims are added to every token of the code flow.
	claims map[string]any
	ttl    time.Duration
	now    func() time.Time

	jwksFetches  atomic.Int64
	tokensIssued atomic.Int64
}

type grant struct {
	challenge, resource, scope, client, redirect string
}

// Options configure Start.
type Options struct {
	// TLS serves https with a self-signed certificate (CertFile names it
	// in PEM, for SSL_CERT_FILE); else plain http.
	TLS bool
	// Now is the clock of the tokens the code flow issues; nil: time.Now.
	Now func() time.Time
	// TokenTTL is the code flow's tokens' lifetime; 0: 10 minutes.
	TokenTTL time.Duration
	// Claims are added to the code flow's tokens (sub defaults to
	// "oauth-user").
	Claims map[string]any
}

// Start runs an issuer with one ES256 key, "k1", until the test ends.
func Start(t testing.TB, o *Options) *Issuer {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	is := &Issuer{t: t, codes: map[string]grant{}, clients: map[string]bool{}, claims: o.Claims, ttl: o.TokenTTL, now: o.Now}
	if is.ttl == 0 {
		is.ttl = 10 * time.Minute
	}
	if is.now == nil {
		is.now = time.Now
	}
	k := NewKey(t, "k1", "ES256")
	is.published = []*Key{k}
	is.signing = k
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", is.discovery)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", is.discovery)
	mux.HandleFunc("GET /jwks", is.jwks)
	mux.HandleFunc("GET /authorize", is.authorize)
	mux.HandleFunc("POST /token", is.token)
	mux.HandleFunc("POST /register", is.register)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	is.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	if o.TLS {
		is.srv.StartTLS()
		is.URL = "https://" + l.Addr().String()
	} else {
		is.srv.Start()
		is.URL = "http://" + l.Addr().String()
	}
	t.Cleanup(is.srv.Close)
	return is
}

// Client is an HTTP client that trusts the issuer's certificate.
func (is *Issuer) Client() *http.Client { return is.srv.Client() }

// CertFile writes the issuer's TLS certificate as PEM into dir and
// returns its path (for SSL_CERT_FILE of a process the test starts).
func (is *Issuer) CertFile(t testing.TB, dir string) string {
	t.Helper()
	c := is.srv.Certificate()
	if c == nil {
		t.Fatal("oidctest: CertFile of an http issuer")
	}
	p := filepath.Join(dir, "issuer-ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// CertPool is a pool holding the issuer's certificate.
func (is *Issuer) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(is.srv.Certificate())
	return p
}

// TLSConfig trusts the issuer.
func (is *Issuer) TLSConfig() *tls.Config { return &tls.Config{RootCAs: is.CertPool()} }

// Publish sets the keys the JWKS lists; the first signs the code flow's
// tokens.
func (is *Issuer) Publish(keys ...*Key) {
	is.mu.Lock()
	is.published = keys
	if len(keys) > 0 {
		is.signing = keys[0]
	}
	is.mu.Unlock()
}

// Signing is the key the code flow signs with.
func (is *Issuer) Signing() *Key {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.signing
}

// JWKSFetches counts GETs of the JWKS.
func (is *Issuer) JWKSFetches() int64 { return is.jwksFetches.Load() }

// TokensIssued counts tokens the token endpoint issued.
func (is *Issuer) TokensIssued() int64 { return is.tokensIssued.Load() }

func (is *Issuer) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{
		"issuer":                                is.URL,
		"authorization_endpoint":                is.URL + "/authorize",
		"token_endpoint":                        is.URL + "/token",
		"registration_endpoint":                 is.URL + "/register",
		"jwks_uri":                              is.URL + "/jwks",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"none"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256", "RS256", "EdDSA"},
	})
}

func (is *Issuer) jwks(w http.ResponseWriter, _ *http.Request) {
	is.jwksFetches.Add(1)
	is.mu.Lock()
	keys := []map[string]any{}
	for _, k := range is.published {
		keys = append(keys, k.Public())
	}
	is.mu.Unlock()
	writeJSON(w, map[string]any{"keys": keys})
}

// register is RFC 7591 dynamic client registration for public clients.
func (is *Issuer) register(w http.ResponseWriter, r *http.Request) {
	var md struct {
		RedirectURIs []string `json:"redirect_uris"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&md); err != nil || len(md.RedirectURIs) == 0 {
		http.Error(w, `{"error":"invalid_client_metadata"}`, http.StatusBadRequest)
		return
	}
	id := "client-" + rand.Text()[:12]
	is.mu.Lock()
	is.clients[id] = true
	is.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"client_id": id, "redirect_uris": md.RedirectURIs, "token_endpoint_auth_method": "none",
		"grant_types": []string{"authorization_code"}, "response_types": []string{"code"},
	})
}

// authorize grants a code at once and redirects to redirect_uri.
func (is *Issuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	is.mu.Lock()
	known := is.clients[q.Get("client_id")]
	is.mu.Unlock()
	if !known || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	code := rand.Text()
	is.mu.Lock()
	is.codes[code] = grant{challenge: q.Get("code_challenge"), resource: q.Get("resource"), scope: q.Get("scope"), client: q.Get("client_id"), redirect: q.Get("redirect_uri")}
	is.mu.Unlock()
	to, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	v := to.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	to.RawQuery = v.Encode()
	http.Redirect(w, r, to.String(), http.StatusFound)
}

// token exchanges a code (PKCE checked; the resource must be the one
// authorized) for an access token whose aud is that resource.
func (is *Issuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	f := r.PostForm
	is.mu.Lock()
	g, ok := is.codes[f.Get("code")]
	delete(is.codes, f.Get("code"))
	is.mu.Unlock()
	sum := sha256.Sum256([]byte(f.Get("code_verifier")))
	if !ok || f.Get("grant_type") != "authorization_code" || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge ||
		f.Get("client_id") != g.client || f.Get("resource") != g.resource || f.Get("redirect_uri") != g.redirect {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
		return
	}
	now := is.now()
	c := map[string]any{"sub": "oauth-user", "aud": g.resource, "scope": g.scope, "client_id": g.client}
	for k, v := range is.claims {
		c[k] = v
	}
	c["iss"], c["iat"], c["nbf"], c["exp"] = is.URL, now.Unix(), now.Unix(), now.Add(is.ttl).Unix()
	tok := is.Sign(is.t, is.Signing(), c)
	is.tokensIssued.Add(1)
	writeJSON(w, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(is.ttl.Seconds()), "scope": g.scope})
}

// Claims are a token's claims with the registered ones filled in for
// this issuer at now: iss, sub, aud, iat, nbf and exp (now+ttl).
func (is *Issuer) Claims(aud string, now time.Time, ttl time.Duration) map[string]any {
	return map[string]any{"iss": is.URL, "sub": "alice", "aud": aud, "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(ttl).Unix()}
}

// Sign signs claims with k, its kid in the header.
func (is *Issuer) Sign(t testing.TB, k *Key, claims map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(methods[k.Alg], jwt.MapClaims(claims))
	tok.Header["kid"], tok.Header["typ"] = k.ID, "at+jwt"
	out, err := tok.SignedString(k.key)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Unsigned is claims with alg "none" and an empty signature.
func Unsigned(t testing.TB, claims map[string]any) string {
	t.Helper()
	return compact(t, map[string]any{"alg": "none", "typ": "JWT"}, claims, nil)
}

// HMACWithPublicKey is the algorithm-confusion forgery: claims "signed"
// HS256 with k's public key (its JWK's JSON, and its PKIX DER, are the
// secrets a naive verifier would use), kid set to k's.
func HMACWithPublicKey(t testing.TB, k *Key, claims map[string]any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return compact(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": k.ID}, claims, der)
}

func compact(t testing.TB, hdr, claims map[string]any, hmacKey []byte) string {
	t.Helper()
	h, _ := json.Marshal(hdr)
	c, _ := json.Marshal(claims)
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	if hmacKey == nil {
		return in + "."
	}
	m := hmac.New(sha256.New, hmacKey)
	m.Write([]byte(in))
	return in + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Tamper replaces a signed token's payload with claims, keeping the
// header and the signature.
func Tamper(t testing.TB, token string, claims map[string]any) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("oidctest: Tamper of a token with %d parts", len(parts))
	}
	c, _ := json.Marshal(claims)
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(c) + "." + parts[2]
}

// FetchCode follows an authorization URL the way a browser would: GET
// it, and read the code and state from the redirect it answers (to the
// client's redirect URI, which is never requested).
func FetchCode(c *http.Client, authURL string) (code, state string, err error) {
	cl := *c
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := cl.Get(authURL)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return "", "", fmt.Errorf("authorize: HTTP %d", resp.StatusCode)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return "", "", err
	}
	return loc.Query().Get("code"), loc.Query().Get("state"), nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
