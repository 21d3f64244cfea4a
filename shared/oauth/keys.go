package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// keyCache holds each issuer's public keys, found by discovery. An
// issuer's keys are fetched on first use, again after KeysTTL, and again
// when a token names a kid they do not hold; never twice within
// RefreshInterval, so a flood of tokens with made-up kids costs one fetch
// per interval. Fetches of one issuer are serialised (the others wait for
// the one in flight); each request has FetchTimeout and reads at most
// MaxDocumentBytes. A fetch that fails keeps the keys known.
type keyCache struct {
	o *Options

	mu      sync.Mutex
	issuers map[string]*issuerKeys
}

type issuerKeys struct {
	mu      sync.Mutex // held while fetching
	set     []jose.JSONWebKey
	fetched time.Time // last successful fetch
	tried   time.Time // last attempt
	lastErr error
}

func newKeyCache(o *Options) *keyCache {
	return &keyCache{o: o, issuers: map[string]*issuerKeys{}}
}

// keys returns issuer's keys, refreshed as the type's doc says when kid
// ("" when the token names none) is not among them.
func (c *keyCache) keys(ctx context.Context, issuer, kid string) ([]jose.JSONWebKey, error) {
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
	set, err := c.fetch(ctx, issuer)
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

func hasKid(set []jose.JSONWebKey, kid string) bool {
	for _, k := range set {
		if k.KeyID == kid {
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
func (c *keyCache) fetch(ctx context.Context, issuer string) ([]jose.JSONWebKey, error) {
	var doc discovery
	var err error
	for _, u := range discoveryURLs(issuer) {
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
	var set []jose.JSONWebKey
	for _, raw := range jwks.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue // a key type go-jose does not know (or a bad one): skipped, like any key we cannot use
		}
		if usable(k) && len(set) < MaxKeys {
			set = append(set, k)
		}
	}
	if len(set) == 0 {
		return nil, errors.New("jwks: no usable signing key (RSA, P-256 or Ed25519 public keys)")
	}
	return set, nil
}

// usable: a public signing key of a type an allowed algorithm uses. A
// symmetric ("oct") or private key in a JWKS is never used.
func usable(k jose.JSONWebKey) bool {
	if !k.IsPublic() || !k.Valid() || (k.Use != "" && k.Use != "sig") {
		return false
	}
	switch p := k.Key.(type) {
	case *rsa.PublicKey:
		return p.N.BitLen() >= 2048 && (k.Algorithm == "" || k.Algorithm == string(jose.RS256))
	case *ecdsa.PublicKey:
		return p.Curve == elliptic.P256() && (k.Algorithm == "" || k.Algorithm == string(jose.ES256))
	case ed25519.PublicKey:
		return k.Algorithm == "" || k.Algorithm == string(jose.EdDSA)
	}
	return false
}

func discoveryURLs(issuer string) []string {
	trimmed := strings.TrimSuffix(issuer, "/")
	out := []string{trimmed + "/.well-known/openid-configuration"}
	if u, err := url.Parse(issuer); err == nil {
		path := strings.TrimSuffix(u.Path, "/")
		u.Path = "/.well-known/oauth-authorization-server" + path
		out = append(out, u.String())
	}
	return out
}

// getJSON GETs u (checked as an outbound URL first) within FetchTimeout
// and decodes at most MaxDocumentBytes of JSON into v. status is the
// response's status when one came.
func (c *keyCache) getJSON(ctx context.Context, u string, v any) (status int, err error) {
	if err := checkURL(u, c.o.Local); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.o.HTTP.Do(req)
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

// checkURL applies the rules of registered URLs to a URL about to be
// fetched (the issuer's, or the jwks_uri its document names): absolute,
// https outside local mode, no credentials, no metadata host. The
// addresses it resolves to are checked when dialed (netguard.Control, in
// the HTTP client).
func checkURL(u string, local bool) error {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", u)
	}
	if p.Scheme != "https" && !(local && p.Scheme == "http") {
		return fmt.Errorf("%q: https is required", u)
	}
	if p.User != nil {
		return fmt.Errorf("%q: credentials in the URL are not allowed", u)
	}
	if strings.EqualFold(p.Hostname(), "metadata.google.internal") {
		return errors.New("cloud metadata endpoints are not allowed")
	}
	return nil
}
