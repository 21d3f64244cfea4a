// Package oauth makes aegis an OAuth 2.1 resource server: it validates the
// JWT access tokens of the issuers a tenant trusts (registry.Issuer) and
// turns a valid one into the caller, with roles, exactly as an API key is
// (docs/oauth.md; the decisions are in docs/design/oauth.md).
//
// A token is valid for a tenant when, in this order:
//
//   - it is a compact JWS of at most MaxTokenBytes, without crit, whose alg is one of
//     registry.SigningAlgorithms and of the issuer's Algorithms (never
//     "none", never an HMAC: keys are public, and a token "signed" with
//     one as an HMAC secret is refused before any key is looked at);
//   - its iss is exactly the URL of one of the tenant's issuers;
//   - it verifies with a key of that issuer's JWKS, found by discovery
//     (keys.go), the kid's key when the token names one;
//   - exp is present and not passed, nbf and iat are not in the future,
//     each with Options.Skew of tolerance; each is a JSON number (RFC
//     7519's NumericDate: "1767225600", a string, is refused);
//   - aud names the resource the token is presented to, exactly: the URL
//     of the endpoint as its protected resource metadata advertises it
//     (ResourceMetadata.Resource), and that resource is one the issuer's
//     Audiences allow (ResourceAllowed). A token for one endpoint is
//     refused on every other, of the same tenant too;
//   - the caller claim is a valid caller name.
//
// A token valid in all that but missing one of the issuer's
// RequiredScopes is refused with 403 insufficient_scope. Every refusal is
// an *auth.Error whose text never contains the token.
//
// A validated token is cached under the SHA-256 of the tenant, the
// resource and the token until it expires (cache.go), so a warm instance validates a
// client's token once.
package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/netguard"
	"github.com/aegis-gw/aegis/shared/registry"
)

// Defaults of Options.
const (
	// DefaultSkew is the tolerance on exp, nbf and iat for clocks that
	// disagree: small, since a token's lifetime is minutes.
	DefaultSkew = 30 * time.Second
	// DefaultRefreshInterval is the least time between two fetches of one
	// issuer's keys: a token with an unknown kid makes at most one fetch
	// per interval, however many such tokens arrive.
	DefaultRefreshInterval = 30 * time.Second
	// DefaultKeysTTL is how long fetched keys are used before they are
	// fetched again (a key the issuer withdrew stops being accepted
	// within it). A failed refetch keeps the keys known.
	DefaultKeysTTL = 15 * time.Minute
	// DefaultFetchTimeout bounds one fetch of an issuer's keys: its
	// discovery document and its JWKS together.
	DefaultFetchTimeout = 5 * time.Second
	// DefaultCacheEntries and DefaultCacheBytes bound the validated-token
	// cache.
	DefaultCacheEntries = 10000
	DefaultCacheBytes   = 16 << 20
)

// Fixed bounds.
const (
	// MaxTokenBytes bounds a presented token; longer ones are refused
	// unread.
	MaxTokenBytes = 8 << 10
	// MaxDocumentBytes bounds a discovery document and a JWKS.
	MaxDocumentBytes = 64 << 10
	// MaxKeys bounds the keys kept of one JWKS.
	MaxKeys = 32
	// MaxIssuersCached bounds the issuers whose keys are kept.
	MaxIssuersCached = 256
)

// Options configure a Validator. The zero value is valid.
type Options struct {
	// HTTP fetches discovery documents and key sets. It must dial with
	// netguard.Control and follow no redirects, as the gateway's
	// upstream client does (gateway.NewHTTPClient); nil: such a client.
	HTTP *http.Client
	// Local allows http issuers (aegis serve); outside it every fetched
	// URL must be https.
	Local  bool
	Now    func() time.Time // nil: time.Now
	Logger *slog.Logger     // nil: slog.Default()

	Skew            time.Duration // 0: DefaultSkew
	RefreshInterval time.Duration // 0: DefaultRefreshInterval
	KeysTTL         time.Duration // 0: DefaultKeysTTL
	FetchTimeout    time.Duration // 0: DefaultFetchTimeout
	CacheEntries    int           // 0: DefaultCacheEntries
	CacheBytes      int           // 0: DefaultCacheBytes
}

// Identity is who a valid token says is calling.
type Identity struct {
	Issuer string
	Caller string
	// Roles are the tenant's roles the token carries (the roles claim
	// and the scopes' roles), sorted, once each; never nil.
	Roles  []string
	Scopes []string
	// Claims is the token's payload (a JSON object), for the policy
	// (Cedar's principal.claims). It is not a credential: without the
	// signature it authenticates nothing.
	Claims  json.RawMessage
	Expires time.Time
}

// Validator validates tokens. It is safe for concurrent use.
type Validator struct {
	o     Options
	keys  *keyCache
	cache *tokenCache
}

// New returns a Validator; o may be nil.
func New(o *Options) *Validator {
	v := &Validator{}
	if o != nil {
		v.o = *o
	}
	if v.o.Now == nil {
		v.o.Now = time.Now
	}
	if v.o.Logger == nil {
		v.o.Logger = slog.Default()
	}
	if v.o.HTTP == nil {
		v.o.HTTP = newHTTPClient(v.o.Local)
	}
	if v.o.Skew <= 0 {
		v.o.Skew = DefaultSkew
	}
	if v.o.RefreshInterval <= 0 {
		v.o.RefreshInterval = DefaultRefreshInterval
	}
	if v.o.KeysTTL <= 0 {
		v.o.KeysTTL = DefaultKeysTTL
	}
	if v.o.FetchTimeout <= 0 {
		v.o.FetchTimeout = DefaultFetchTimeout
	}
	if v.o.CacheEntries <= 0 {
		v.o.CacheEntries = DefaultCacheEntries
	}
	if v.o.CacheBytes <= 0 {
		v.o.CacheBytes = DefaultCacheBytes
	}
	v.keys = newKeyCache(&v.o)
	v.cache = newTokenCache(v.o.CacheEntries, v.o.CacheBytes, v.o.Skew)
	return v
}

func newHTTPClient(local bool) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, Control: netguard.Control(local)}).DialContext
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// The refusals, one per cause (docs/oauth.md lists them). Status 401
// unless said otherwise.
var (
	ErrMalformed   = invalid("token is not a JWT (a compact JWS)")
	ErrTooLong     = invalid("token is longer than 8 KiB")
	ErrAlgorithm   = invalid("token signature algorithm is not allowed (RS256, ES256 or EdDSA as the issuer allows; never none or HMAC)")
	ErrIssuer      = invalid("token issuer is not trusted by this tenant")
	ErrUnknownKey  = invalid("token is signed by a key the issuer does not publish")
	ErrSignature   = invalid("token signature is invalid")
	ErrNoExpiry    = invalid("token has no exp")
	ErrExpired     = invalid("token has expired")
	ErrNotYetValid = invalid("token is not valid yet (nbf or iat in the future)")
	ErrDate        = invalid("token's exp, nbf or iat is not a number (RFC 7519 NumericDate)")
	ErrAudience    = invalid("token audience is not this endpoint's resource")
	ErrCaller      = invalid("token's caller claim is missing or not a valid caller name")
	ErrKeys        = invalid("the issuer's keys could not be fetched; try again later")
)

func invalid(reason string) *auth.Error {
	return &auth.Error{Reason: reason, Challenge: "invalid_token"}
}

// insufficientScope is the 403 of a token without every required scope.
func insufficientScope(required []string) *auth.Error {
	return &auth.Error{Reason: "insufficient_scope: the token lacks a required scope (" + strings.Join(required, " ") + ")",
		Status: http.StatusForbidden, Challenge: "insufficient_scope", Scope: strings.Join(required, " ")}
}

// methods verify the allowed algorithms (golang-jwt's implementations);
// nothing else is ever looked up, so no other algorithm can verify.
var methods = map[string]jwt.SigningMethod{
	"RS256": jwt.SigningMethodRS256,
	"ES256": jwt.SigningMethodES256,
	"EdDSA": jwt.SigningMethodEdDSA,
}

// Validate checks token, presented to the endpoint whose resource URL is
// resource, for tenant t (see the package doc) and returns the caller it
// names. Refusals are *auth.Error.
func (v *Validator) Validate(ctx context.Context, t registry.Tenant, resource, token string) (Identity, error) {
	if len(token) > MaxTokenBytes {
		return Identity{}, ErrTooLong
	}
	now := v.o.Now()
	ck := cacheKey(t.ID, resource, token)
	if id, is, ok := v.cache.get(ck, now); ok {
		if cur := issuerOf(t, is.URL); cur != nil && sameIssuer(cur, &is) {
			id.Roles = slices.Clone(id.Roles)
			return id, nil
		}
		v.cache.drop(ck) // the tenant's issuers changed: validate again
	}
	id, is, err := v.validate(ctx, t, resource, token, now)
	if err != nil {
		return Identity{}, err
	}
	v.cache.put(ck, id, *is, now)
	id.Roles = slices.Clone(id.Roles)
	return id, nil
}

func cacheKey(tenant, resource, token string) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(resource))
	h.Write([]byte{0})
	h.Write([]byte(token))
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

func issuerOf(t registry.Tenant, url string) *registry.Issuer {
	for i := range t.Issuers {
		if t.Issuers[i].URL == url {
			return &t.Issuers[i]
		}
	}
	return nil
}

// header is what is read of the JOSE header before anything is verified.
// A header with crit (extensions the verifier must understand) is refused:
// none is understood here.
type header struct {
	Alg  string          `json:"alg"`
	Kid  string          `json:"kid"`
	Crit json.RawMessage `json:"crit"`
}

// claims are the registered claims checked here. The dates are kept raw
// so that their JSON type is checked (numericDate): encoding/json would
// read a string into a json.Number.
type claims struct {
	Iss string          `json:"iss"`
	Aud json.RawMessage `json:"aud"`
	Exp json.RawMessage `json:"exp"`
	Nbf json.RawMessage `json:"nbf"`
	Iat json.RawMessage `json:"iat"`
}

func (v *Validator) validate(ctx context.Context, t registry.Tenant, resource, token string, now time.Time) (Identity, *registry.Issuer, error) {
	h, payload, ok := split(token)
	if !ok {
		return Identity{}, nil, ErrMalformed
	}
	if !slices.Contains(registry.SigningAlgorithms, h.Alg) {
		return Identity{}, nil, ErrAlgorithm
	}
	var unverified claims
	if err := json.Unmarshal(payload, &unverified); err != nil {
		return Identity{}, nil, ErrMalformed
	}
	is := issuerOf(t, unverified.Iss)
	if is == nil || unverified.Iss == "" {
		return Identity{}, nil, ErrIssuer
	}
	if len(is.Algorithms) > 0 && !slices.Contains(is.Algorithms, h.Alg) {
		return Identity{}, nil, ErrAlgorithm
	}
	if err := v.verify(ctx, token, is.URL, h); err != nil {
		return Identity{}, nil, err
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return Identity{}, nil, ErrMalformed
	}
	if c.Iss != is.URL {
		return Identity{}, nil, ErrIssuer // cannot differ from the unverified one, but the verified one decides
	}
	if c.Exp == nil {
		return Identity{}, nil, ErrNoExpiry
	}
	exp, ok := numericDate(c.Exp)
	switch {
	case !ok:
		return Identity{}, nil, ErrDate
	case !now.Before(exp.Add(v.o.Skew)):
		return Identity{}, nil, ErrExpired
	}
	for _, raw := range []json.RawMessage{c.Nbf, c.Iat} {
		if raw == nil {
			continue
		}
		at, ok := numericDate(raw)
		if !ok {
			return Identity{}, nil, ErrDate
		}
		if at.After(now.Add(v.o.Skew)) {
			return Identity{}, nil, ErrNotYetValid
		}
	}
	if !audienceNames(c.Aud, resource) || !ResourceAllowed(is.Audiences, resource) {
		return Identity{}, nil, ErrAudience
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(payload, &all); err != nil {
		return Identity{}, nil, ErrMalformed
	}
	callerClaim := is.CallerClaim
	if callerClaim == "" {
		callerClaim = "sub"
	}
	var caller string
	if err := json.Unmarshal(all[callerClaim], &caller); err != nil || registry.ValidateCaller(caller) != nil {
		return Identity{}, nil, ErrCaller
	}
	scopes := scopesOf(all)
	roles := []string{}
	if is.RolesClaim != "" {
		roles = append(roles, words(all[is.RolesClaim])...)
	}
	for _, s := range scopes {
		roles = append(roles, is.ScopeRoles[s]...)
	}
	slices.Sort(roles)
	roles = slices.Compact(roles)
	for _, r := range is.RequiredScopes {
		if !slices.Contains(scopes, r) {
			return Identity{}, nil, insufficientScope(is.RequiredScopes)
		}
	}
	return Identity{Issuer: is.URL, Caller: caller, Roles: roles, Scopes: scopes, Claims: payload, Expires: exp}, is, nil
}

// verify checks the signature with the issuer's key for h.Kid (any of its
// keys of the algorithm's type when the token names none), refreshing the
// keys once when the kid is unknown (keyCache.keys).
func (v *Validator) verify(ctx context.Context, token, issuer string, h header) error {
	set, err := v.keys.keys(ctx, issuer, h.Kid)
	if err != nil {
		v.o.Logger.WarnContext(ctx, "oauth: issuer keys unavailable", "issuer", issuer, "err", err)
		return ErrKeys
	}
	dot := strings.LastIndexByte(token, '.')
	sig, err := base64.RawURLEncoding.DecodeString(token[dot+1:])
	if err != nil {
		return ErrMalformed
	}
	m := methods[h.Alg]
	tried := false
	for _, k := range set {
		if (h.Kid != "" && k.kid != h.Kid) || !k.fits(h.Alg) {
			continue
		}
		tried = true
		if m.Verify(token[:dot], sig, k.key) == nil {
			return nil
		}
	}
	if !tried {
		return ErrUnknownKey
	}
	return ErrSignature
}

// split reads a compact JWS: its header (without crit) and its payload,
// both base64url without padding.
func split(token string) (header, []byte, bool) {
	first := strings.IndexByte(token, '.')
	last := strings.LastIndexByte(token, '.')
	if first <= 0 || last == first || strings.Count(token, ".") != 2 {
		return header{}, nil, false
	}
	hb, err := base64.RawURLEncoding.DecodeString(token[:first])
	if err != nil {
		return header{}, nil, false
	}
	var h header
	if json.Unmarshal(hb, &h) != nil || h.Crit != nil {
		return header{}, nil, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(token[first+1 : last])
	if err != nil {
		return header{}, nil, false
	}
	return h, payload, true
}

// numericDate reads a NumericDate (RFC 7519 §2: a JSON number of seconds
// since the epoch, possibly fractional). Anything else (a string, even
// of digits, null, true, an object) is not one. raw is a single JSON
// value, as json.Unmarshal leaves it, without surrounding space.
func numericDate(raw json.RawMessage) (time.Time, bool) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return time.Time{}, false
	}
	s := string(raw)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(i, 0), true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1<<40 {
		return time.Time{}, false
	}
	sec := math.Floor(f) // not a Duration: nanoseconds overflow one in 2262
	return time.Unix(int64(sec), int64((f-sec)*1e9)), true
}

// audienceNames: aud (a string or an array of strings) names resource,
// byte for byte.
func audienceNames(aud json.RawMessage, resource string) bool {
	var one string
	if json.Unmarshal(aud, &one) == nil {
		return one == resource
	}
	var many []string
	return json.Unmarshal(aud, &many) == nil && slices.Contains(many, resource)
}

// ResourceAllowed reports whether an issuer with these audiences may
// issue tokens for resource (an endpoint's URL, as its protected resource
// metadata advertises it): an audience equal to resource allows that one
// endpoint; an audience that is an origin only (scheme and host, with an
// optional port and an optional "/": https://gw.example.com) allows
// every endpoint at that origin. Either way the token's aud must still
// name resource itself: the audiences say which URLs of this gateway are
// the tenant's (a Host header is the client's to choose), aud says which
// one the token is for.
func ResourceAllowed(audiences []string, resource string) bool {
	for _, a := range audiences {
		if a == resource {
			return true
		}
		if u, err := url.Parse(a); err == nil && u.Host != "" && u.User == nil && (u.Path == "" || u.Path == "/") &&
			u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" && strings.HasPrefix(resource, strings.TrimSuffix(a, "/")+"/") {
			return true
		}
	}
	return false
}

// scopesOf reads scope (RFC 8693/9068: a space-separated string) or scp
// (a common array form).
func scopesOf(all map[string]json.RawMessage) []string {
	s := words(all["scope"])
	if len(s) == 0 {
		s = words(all["scp"])
	}
	return s
}

// words reads a space-separated string or an array of strings.
func words(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return strings.Fields(one)
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return slices.DeleteFunc(many, func(s string) bool { return s == "" })
	}
	return nil
}

// sameIssuer reports whether a and b are the same configuration, so that
// a cached identity was computed with the issuer the tenant has now.
func sameIssuer(a, b *registry.Issuer) bool {
	if a.URL != b.URL || a.CallerClaim != b.CallerClaim || a.RolesClaim != b.RolesClaim ||
		!slices.Equal(a.Audiences, b.Audiences) || !slices.Equal(a.Algorithms, b.Algorithms) ||
		!slices.Equal(a.RequiredScopes, b.RequiredScopes) || len(a.ScopeRoles) != len(b.ScopeRoles) {
		return false
	}
	for k, r := range a.ScopeRoles {
		if o, ok := b.ScopeRoles[k]; !ok || !slices.Equal(r, o) {
			return false
		}
	}
	return true
}
