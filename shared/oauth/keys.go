package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/netguard"
)

// keyCache holds each issuer's public keys, found by discovery. An
// issuer's keys are fetched on first use, again after KeysTTL, and again
// when a token names a kid they do not hold; never twice within
// RefreshInterval, so a flood of tokens with made-up kids costs one fetch
// per interval. Fetches of one issuer are serialised (the others wait for
// the one in flight); a fetch (discovery and JWKS) has FetchTimeout and
// reads at most MaxDocumentBytes per document. A fetch that fails keeps
// the keys known.
type keyCache struct {
	o *Options

	mu      sync.Mutex
	issuers map[string]*issuerKeys
}

type issuerKeys struct {
	mu      sync.Mutex // held while fetching
	set     []publicKey
	fetched time.Time // last successful fetch
	tried   time.Time // last attempt
	lastErr error
}

func newKeyCache(o *Options) *keyCache {
	return &keyCache{o: o, issuers: map[string]*issuerKeys{}}
}

// keys returns issuer's keys, refreshed as the type's doc says when kid
// ("" when the token names none) is not among them.
func (c *keyCache) keys(ctx context.Context, issuer, kid string) ([]publicKey, error) {
	c.mu.Lock()
	ik := c.issuers[issuer]
	if ik == nil {
		if len(c.issuers) >= MaxIssuersCached {
			for k := range c.issuers { // drop any one: it is fetched again when used
				delete(c.issuers, k)
				break
			}
		}
		ik = &issuerKeys{}
		c.issuers[issuer] = ik
	}
	c.mu.Unlock()

	ik.mu.Lock()
	defer ik.mu.Unlock()
	now := c.o.Now()
	stale := ik.fetched.IsZero() || now.Sub(ik.fetched) >= c.o.KeysTTL
	if !stale && (kid == "" || hasKid(ik.set, kid)) {
		return ik.set, nil
	}
	if !ik.tried.IsZero() && now.Sub(ik.tried) < c.o.RefreshInterval {
		if ik.fetched.IsZero() {
			return nil, ik.lastErr
		}
		return ik.set, nil // refreshed lately: an unknown kid stays unknown
	}
	ik.tried = now
	// One fetch serves every request waiting for it: it is not cancelled
	// when the request that started it ends, and has FetchTimeout for the
	// discovery document and the JWKS together.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.FetchTimeout)
	set, err := c.fetch(fctx, issuer)
	cancel()
	if err != nil {
		ik.lastErr = err
		if ik.fetched.IsZero() {
			return nil, err
		}
		c.o.Logger.WarnContext(ctx, "oauth: issuer keys not refreshed; the known keys stay in use", "issuer", issuer, "err", err)
		return ik.set, nil
	}
	ik.set, ik.fetched, ik.lastErr = set, now, nil
	return set, nil
}

func hasKid(set []publicKey, kid string) bool {
	for _, k := range set {
		if k.kid == kid {
			return true
		}
	}
	return false
}

// discovery is what is read of a discovery document.
type discovery struct {
	Issuer  string `json:"issuer"`
	JWKSURI string `json:"jwks_uri"`
}

// fetch reads the discovery document (OpenID Connect discovery at
// {issuer}/.well-known/openid-configuration; when that is absent, RFC
// 8414's /.well-known/oauth-authorization-server{path}), checks its
// issuer is exactly issuer, and reads its jwks_uri.
func (c *keyCache) fetch(ctx context.Context, issuer string) ([]publicKey, error) {
	var doc discovery
	var err error
	for _, u := range DiscoveryURLs(issuer) {
		var status int
		status, err = c.getJSON(ctx, u, &doc)
		if err == nil || status != http.StatusNotFound {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if doc.Issuer != issuer {
		return nil, fmt.Errorf("discovery: the document names issuer %q, not %q", doc.Issuer, issuer)
	}
	if doc.JWKSURI == "" {
		return nil, errors.New("discovery: the document has no jwks_uri")
	}
	var jwks struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if _, err := c.getJSON(ctx, doc.JWKSURI, &jwks); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	var set []publicKey
	for _, raw := range jwks.Keys {
		if k, ok := parseJWK(raw); ok && len(set) < MaxKeys {
			set = append(set, k)
		}
	}
	if len(set) == 0 {
		return nil, errors.New("jwks: no usable signing key (RSA of 2048 bits or more, P-256 or Ed25519 public keys)")
	}
	return set, nil
}

// publicKey is one usable key of a JWKS: its kid, the algorithm it is
// for ("" when the JWK names none: then any allowed algorithm of its
// type) and the key (*rsa.PublicKey, *ecdsa.PublicKey on P-256, or
// ed25519.PublicKey).
type publicKey struct {
	kid, alg string
	key      any
}

// jwk is what is read of a JSON Web Key (RFC 7517, 7518, 8037).
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
	D   string `json:"d"`
	K   string `json:"k"`
}

// parseJWK reads a public signing key of a type an allowed algorithm
// uses. A symmetric ("oct") key, a private key, an encryption key, an RSA
// key under 2048 bits, a point not on its curve or a malformed key is not
// usable: it is skipped, never an error of the whole set.
func parseJWK(raw json.RawMessage) (publicKey, bool) {
	var j jwk
	if json.Unmarshal(raw, &j) != nil || (j.Use != "" && j.Use != "sig") || j.D != "" || j.K != "" {
		return publicKey{}, false
	}
	b := func(s string) []byte {
		v, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			return nil
		}
		return v
	}
	k := publicKey{kid: j.Kid, alg: j.Alg}
	switch {
	case j.Kty == "RSA" && (j.Alg == "" || j.Alg == "RS256"):
		n, e := b(j.N), b(j.E)
		if len(n) < 256 || len(n) > 1024 || len(e) == 0 || len(e) > 4 {
			return publicKey{}, false
		}
		exp := new(big.Int).SetBytes(e).Int64()
		pk := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(exp)}
		if pk.N.BitLen() < 2048 || exp < 3 || exp%2 == 0 {
			return publicKey{}, false
		}
		k.key = pk
	case j.Kty == "EC" && j.Crv == "P-256" && (j.Alg == "" || j.Alg == "ES256"):
		x, y := b(j.X), b(j.Y)
		if len(x) != 32 || len(y) != 32 {
			return publicKey{}, false
		}
		pk, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return publicKey{}, false
		}
		k.key = pk
	case j.Kty == "OKP" && j.Crv == "Ed25519" && (j.Alg == "" || j.Alg == "EdDSA"):
		x := b(j.X)
		if len(x) != ed25519.PublicKeySize {
			return publicKey{}, false
		}
		k.key = ed25519.PublicKey(x)
	default:
		return publicKey{}, false
	}
	return k, true
}

// fits reports whether k may verify a signature made with alg.
func (k publicKey) fits(alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	switch k.key.(type) {
	case *rsa.PublicKey:
		return alg == "RS256"
	case *ecdsa.PublicKey:
		return alg == "ES256"
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// DiscoveryURLs are where an issuer's metadata is looked for, in order:
// OpenID Connect discovery ({issuer}/.well-known/openid-configuration),
// then RFC 8414 (/.well-known/oauth-authorization-server{path}).
func DiscoveryURLs(issuer string) []string {
	trimmed := strings.TrimSuffix(issuer, "/")
	out := []string{trimmed + "/.well-known/openid-configuration"}
	if u, err := url.Parse(issuer); err == nil {
		path := strings.TrimSuffix(u.Path, "/")
		u.Path = "/.well-known/oauth-authorization-server" + path
		out = append(out, u.String())
	}
	return out
}

func (c *keyCache) getJSON(ctx context.Context, u string, v any) (status int, err error) {
	return GetJSON(ctx, c.o.HTTP, c.o.Local, u, v)
}

// GetJSON GETs u with hc within ctx's deadline, after checking it as every
// outbound URL is (netguard.ValidateFetchURL: an issuer's own, and the
// URLs its documents name, which no operator typed; loopback, and the
// addresses a name resolves to, are checked when dialed, netguard.Control
// in the HTTP client), and decodes at most MaxDocumentBytes of JSON into
// v. status is the response's status when one came. The discovery of the
// keys here and of upstreams' authorization servers (shared/connect) use
// it.
func GetJSON(ctx context.Context, hc *http.Client, local bool, u string, v any) (status int, err error) {
	if err := netguard.ValidateFetchURL(u, local); err != nil {
		return 0, fmt.Errorf("GET %s: %w", u, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxDocumentBytes))
		return resp.StatusCode, fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocumentBytes+1))
	if err != nil {
		return resp.StatusCode, err
	}
	if len(b) > MaxDocumentBytes {
		return resp.StatusCode, fmt.Errorf("GET %s: document over %d bytes", u, MaxDocumentBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return resp.StatusCode, fmt.Errorf("GET %s: %w", u, err)
	}
	return resp.StatusCode, nil
}
