package registry

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/aegis-gw/aegis/shared/netguard"
)

// Issuer is an OAuth 2.1 authorization server a tenant trusts to issue
// access tokens for its resource (shared/oauth, docs/oauth.md). A bearer
// token that is not an aegis API key is a JWT this issuer signed, for one
// of Audiences, presented on the tenant's path (/t/{tenant}/mcp).
type Issuer struct {
	// URL is the issuer identifier: the token's iss, exactly, and the
	// base of its discovery document (OpenID Connect discovery, else RFC
	// 8414 authorization server metadata).
	URL string `json:"url" yaml:"url"`
	// Audiences are the resource URLs tokens must name in aud (one of
	// them): this gateway's URL for the tenant, e.g.
	// https://gw.example.com/t/acme/mcp.
	Audiences []string `json:"audiences" yaml:"audiences"`
	// Algorithms the tokens may be signed with, from SigningAlgorithms;
	// nil: all of them.
	Algorithms []string `json:"algorithms,omitempty" yaml:"algorithms"`
	// CallerClaim names the claim whose string value is the caller;
	// "": "sub".
	CallerClaim string `json:"caller_claim,omitempty" yaml:"caller_claim"`
	// RolesClaim names a claim carrying roles directly (an array of
	// strings, or one space-separated string); "": none.
	RolesClaim string `json:"roles_claim,omitempty" yaml:"roles_claim"`
	// ScopeRoles maps a scope (from the scope or scp claim) to the
	// tenant's roles it grants.
	ScopeRoles map[string][]string `json:"scope_roles,omitempty" yaml:"scope_roles"`
	// RequiredScopes must all be in a token's scopes; a token without
	// one is answered 403 insufficient_scope naming them.
	RequiredScopes []string `json:"required_scopes,omitempty" yaml:"required_scopes"`
}

// SigningAlgorithms are the JWS algorithms an issuer may use. Never
// "none", never an HMAC: a resource server holds only public keys.
var SigningAlgorithms = []string{"RS256", "ES256", "EdDSA"}

// MaxIssuers bounds a tenant's trusted issuers.
const MaxIssuers = 8

// Bounds of an issuer's fields.
const (
	maxIssuerURL   = 512
	maxAudiences   = 16
	maxScopeRoles  = 64
	maxClaimName   = 64
	maxScopeOrRole = 128
)

// IssuerError is a bad issuer field: Field is its path under the
// issuer ("url", "audiences[0]", ...).
type IssuerError struct {
	Index  int
	Field  string
	Reason string
}

func (e *IssuerError) Error() string {
	return fmt.Sprintf("issuers[%d].%s: %s", e.Index, e.Field, e.Reason)
}

// ValidateIssuers checks a tenant's issuers with one rule for the config
// file and the admin API: at most MaxIssuers, distinct URLs, each URL https
// (http only when local, under aegis serve) passing the address checks of
// upstream URLs (shared/netguard), with no query or fragment; audiences
// absolute URLs; algorithms from SigningAlgorithms; scopes and roles
// without spaces or control characters. The first bad field is returned
// as an *IssuerError.
func ValidateIssuers(issuers []Issuer, local bool) error {
	if len(issuers) > MaxIssuers {
		return &IssuerError{Index: MaxIssuers, Field: "url", Reason: fmt.Sprintf("at most %d issuers per tenant", MaxIssuers)}
	}
	seen := map[string]bool{}
	for i, is := range issuers {
		bad := func(field, format string, args ...any) error {
			return &IssuerError{Index: i, Field: field, Reason: fmt.Sprintf(format, args...)}
		}
		if is.URL == "" {
			return bad("url", "required: the issuer identifier (the tokens' iss)")
		}
		if len(is.URL) > maxIssuerURL {
			return bad("url", "longer than %d characters", maxIssuerURL)
		}
		if err := netguard.ValidateURL(is.URL, local); err != nil {
			return bad("url", "%v", err)
		}
		if u, _ := url.Parse(is.URL); u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
			return bad("url", "an issuer identifier has no query or fragment")
		}
		if seen[is.URL] {
			return bad("url", "%q: duplicate issuer", is.URL)
		}
		seen[is.URL] = true
		if len(is.Audiences) == 0 {
			return bad("audiences", "required: this gateway's resource URL for the tenant (https://HOST/t/TENANT/mcp)")
		}
		if len(is.Audiences) > maxAudiences {
			return bad("audiences", "at most %d", maxAudiences)
		}
		for j, a := range is.Audiences {
			u, err := url.Parse(a)
			if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || len(a) > maxIssuerURL {
				return bad(fmt.Sprintf("audiences[%d]", j), "%q: want an absolute http(s) URL of at most %d characters", a, maxIssuerURL)
			}
		}
		for j, a := range is.Algorithms {
			if !slices.Contains(SigningAlgorithms, a) {
				return bad(fmt.Sprintf("algorithms[%d]", j), "%q: want one of %s (never none, never an HMAC)", a, strings.Join(SigningAlgorithms, ", "))
			}
		}
		for _, c := range []struct{ field, v string }{{"caller_claim", is.CallerClaim}, {"roles_claim", is.RolesClaim}} {
			if c.v != "" && (len(c.v) > maxClaimName || !plainWord(c.v)) {
				return bad(c.field, "%q: want a claim name of 1-%d printable characters without spaces", c.v, maxClaimName)
			}
		}
		if len(is.ScopeRoles) > maxScopeRoles {
			return bad("scope_roles", "at most %d scopes", maxScopeRoles)
		}
		for scope, roles := range is.ScopeRoles {
			if !validScope(scope) {
				return bad("scope_roles", "%q: want a scope of 1-%d printable characters without spaces", scope, maxScopeOrRole)
			}
			for _, r := range roles {
				if !validScope(r) {
					return bad("scope_roles."+scope, "%q: want a role name of 1-%d printable characters without spaces", r, maxScopeOrRole)
				}
			}
		}
		for j, s := range is.RequiredScopes {
			if !validScope(s) {
				return bad(fmt.Sprintf("required_scopes[%d]", j), "%q: want a scope of 1-%d printable characters without spaces", s, maxScopeOrRole)
			}
		}
	}
	return nil
}

func validScope(s string) bool { return len(s) <= maxScopeOrRole && plainWord(s) }

// plainWord: non-empty printable ASCII without spaces, quotes or
// backslashes (RFC 6749's scope-token, minus the characters a
// WWW-Authenticate quoted string would need escaped).
func plainWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
