package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/oauth"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// tenantPrefix starts the per-tenant paths: /t/{tenant}/mcp,
// /t/{tenant}/mcp/{server} and /t/{tenant}/v1/invoke serve what /mcp,
// /mcp/{server} and /v1/invoke do, for that tenant only. They are the
// tenants' OAuth resources (docs/oauth.md): a JWT from a tenant's issuer is
// accepted there and nowhere else, and an API key there must be one of
// that tenant.
const tenantPrefix = "/t/"

// WellKnownResource is the RFC 9728 protected resource metadata path;
// the path-specific form appends the resource's path
// (/.well-known/oauth-protected-resource/t/acme/mcp).
const WellKnownResource = "/.well-known/oauth-protected-resource"

// caller is who authenticate found: an API key, or a token's identity.
type caller struct {
	key registry.Key // the API key; for a token its caller, tenant and auth.TokenKeyID
	// token: the caller came with an OAuth token; roles and claims are
	// then the token's (never nil roles), not a key record's.
	token  bool
	roles  []string
	claims json.RawMessage
	// subject is the token itself and its issuer, for token exchange
	// (connect.go): exchanged at the tenant's token service, never sent
	// on, never logged.
	subject connect.Subject
}

// errKeyOfOtherTenant: an API key of one tenant on another's path.
var errKeyOfOtherTenant = &auth.Error{Reason: "the API key is not one of the tenant this path names"}

// errMissingToken: no credential at all on an OAuth resource (a tenant
// path whose tenant has issuers), where a client is to get a token.
var errMissingToken = &auth.Error{Reason: "missing token; send Authorization: Bearer with an access token for this resource from this tenant's issuer (resource_metadata in WWW-Authenticate names it), or an API key of this tenant"}

// authenticate checks the request's Authorization header for ep: an aegis
// API key anywhere (of ep.tenant on a tenant path), or a JWT of one of
// ep.tenant's issuers on a tenant path (shared/oauth), for this path's
// resource exactly (resourceURL: what its metadata advertises). The presented
// credential is never logged, never put in an error and never forwarded:
// the upstream gets the server's brokered credential only.
func (g *Gateway) authenticate(ctx context.Context, r *http.Request, ep endpoint) (caller, registry.Tenant, error) {
	h := r.Header.Get("Authorization")
	bearer, _ := strings.CutPrefix(h, "Bearer ")
	bearer = strings.TrimSpace(bearer)
	if ep.tenant == "" || bearer == "" || strings.HasPrefix(bearer, auth.Prefix) {
		key, t, err := g.auth.Authenticate(ctx, h)
		if err == nil && ep.tenant != "" && t.ID != ep.tenant {
			return caller{}, registry.Tenant{}, errKeyOfOtherTenant
		}
		return caller{key: key}, t, err
	}
	t, err := g.reg.Tenant(ctx, ep.tenant)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && (t.Disabled || len(t.Issuers) == 0)):
		return caller{}, registry.Tenant{}, oauth.ErrIssuer
	case err != nil:
		return caller{}, registry.Tenant{}, err
	}
	if s := g.o.Settings.Served; s != nil && !s(t.ID) {
		return caller{}, registry.Tenant{}, auth.ErrNotServed
	}
	resource, ok := resourceURL(r, r.URL.EscapedPath())
	if !ok {
		return caller{}, registry.Tenant{}, oauth.ErrAudience // no resource to name: no token can be for it
	}
	id, err := g.tokens.Validate(ctx, t, resource, bearer)
	if err != nil {
		return caller{}, registry.Tenant{}, err
	}
	key := registry.Key{ID: auth.TokenKeyID(id.Issuer, id.Caller), Tenant: t.ID, Caller: id.Caller}
	return caller{key: key, token: true, roles: id.Roles, claims: id.Claims, subject: connect.Subject{Token: bearer, Issuer: id.Issuer}}, t, nil
}

// refuseAuth answers a failed authentication: 401 (or 403 for a token
// without a required scope) with {"error":"..."} and a WWW-Authenticate
// challenge, or 503 when the registry could not be read. Only an OAuth
// resource (a tenant path whose tenant has issuers) names its metadata
// (RFC 9728 §5.1), which names the issuers: on the API-key endpoints no
// OAuth flow can succeed, so none is advertised, and the challenge says
// plainly that the key was wrong or missing (error_description). On an
// OAuth resource a request without credentials is told to bring a token.
func (g *Gateway) refuseAuth(w http.ResponseWriter, r *http.Request, ep endpoint, corr string, err error) {
	var ae *auth.Error
	if !errors.As(err, &ae) {
		g.o.Logger.Error("registry unavailable during authentication", "correlation_id", corr, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, `{"error":"unavailable: the key registry could not be read; correlation id `+corr+`"}`)
		return
	}
	oauthResource := g.oauthResource(r.Context(), ep)
	if oauthResource && ae == auth.ErrMissing {
		ae = errMissingToken
	}
	b, _ := json.Marshal(map[string]string{"error": ae.Error()})
	w.Header().Set("WWW-Authenticate", challenge(r, ae, oauthResource))
	writeFrame(w, ae.HTTPStatus(), b)
}

// oauthResource reports whether ep is an OAuth resource: a tenant path
// whose tenant is registered, enabled and has issuers (what its resource
// metadata names). A registry failure counts as not one: the answer then
// advertises nothing it cannot back.
func (g *Gateway) oauthResource(ctx context.Context, ep endpoint) bool {
	if ep.tenant == "" {
		return false
	}
	t, err := g.reg.Tenant(ctx, ep.tenant)
	return err == nil && !t.Disabled && len(t.Issuers) > 0
}

// challenge is the Bearer challenge of ae for r (RFC 6750 §3, RFC 9728
// §5.1): the realm; on an OAuth resource the resource metadata's URL; the
// error code (invalid_token for any credential refused, insufficient_scope
// with the required scope); and ae's reason as error_description, so that
// a client that shows only the challenge still shows why. A request
// without credentials gets no error code (RFC 6750 §3.1), only the
// description. Every value is ours or checked to need no escaping
// (publicBase, registry.ValidateIssuers' scope rule, describable).
func challenge(r *http.Request, ae *auth.Error, oauthResource bool) string {
	var b strings.Builder
	b.WriteString(`Bearer realm="aegis"`)
	if base, ok := publicBase(r); ok && oauthResource && quotable(r.URL.EscapedPath()) {
		b.WriteString(`, resource_metadata="` + base + WellKnownResource + r.URL.EscapedPath() + `"`)
	}
	code := ae.Challenge
	if code == "" && ae != auth.ErrMissing && ae != errMissingToken && ae != auth.ErrNotServed {
		code = "invalid_token" // an API key was presented and refused
	}
	if code != "" {
		b.WriteString(`, error="` + code + `"`)
	}
	if ae.Scope != "" {
		b.WriteString(`, scope="` + ae.Scope + `"`)
	}
	if describable(ae.Reason) {
		b.WriteString(`, error_description="` + ae.Reason + `"`)
	}
	return b.String()
}

// describable: s may stand in error_description's quoted string as is
// (RFC 6750 §3: printable ASCII without '"' and '\').
func describable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return s != ""
}

// publicBase is the scheme and host the client used: https when the
// connection is TLS or the proxy in front says so (API Gateway sets
// X-Forwarded-Proto), else http; the Host header, when it is a plain host
// name or address with an optional port (anything else has no base, so
// that no client-chosen text reaches a header unchecked).
func publicBase(r *http.Request) (string, bool) {
	host := r.Host
	if host == "" || len(host) > 255 {
		return "", false
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == ':' || c == '[' || c == ']') {
			return "", false
		}
	}
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + host, true
}

// resourceURL is the resource URL of the endpoint at escapedPath, as r
// reached it: the one URL the endpoint's metadata advertises as its
// resource and a token's aud must name to be accepted there (one
// function for both, so that they cannot disagree).
func resourceURL(r *http.Request, escapedPath string) (string, bool) {
	base, ok := publicBase(r)
	return base + escapedPath, ok
}

// quotable: s may stand in a quoted-string unescaped (no quote,
// backslash or control character; an escaped path has no space).
func quotable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// splitTenant takes /t/{tenant} off the front of a tenant path.
func splitTenant(path string) (tenant, rest string, ok bool) {
	after, found := strings.CutPrefix(path, tenantPrefix)
	if !found {
		return "", path, true
	}
	tenant, rest, found = strings.Cut(after, "/")
	if !found || registry.ValidateTenantID(tenant) != nil {
		return "", "", false
	}
	return tenant, "/" + rest, true
}

// resourceMetadata serves GET /.well-known/oauth-protected-resource and its
// path-specific forms: the RFC 9728 document for the resource whose path
// follows. A tenant path names the tenant's issuers as authorization
// servers and the scopes they map; every other resource (and a tenant
// without issuers, or none of that name: the answer does not tell them
// apart) is API keys only, with no authorization servers.
func (g *Gateway) resourceMetadata(w http.ResponseWriter, r *http.Request, corr string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, `{"error":"method not allowed"}`)
		return
	}
	resPath := strings.TrimPrefix(r.URL.Path, WellKnownResource)
	tenant, rest, ok := splitTenant(resPath)
	if !ok || (resPath != "" && !isResourcePath(rest)) {
		writeJSON(w, http.StatusNotFound, `{"error":"not found"}`)
		return
	}
	resource, ok := resourceURL(r, strings.TrimPrefix(r.URL.EscapedPath(), WellKnownResource))
	if !ok {
		writeJSON(w, http.StatusBadRequest, `{"error":"bad Host header"}`)
		return
	}
	doc := oauth.ResourceMetadata{Resource: resource, BearerMethodsSupported: []string{"header"}, ResourceName: "aegis"}
	if tenant != "" {
		t, err := g.reg.Tenant(r.Context(), tenant)
		switch {
		case err == nil && !t.Disabled:
			doc.AddIssuers(t.Issuers)
		case err != nil && !errors.Is(err, store.ErrNotFound):
			g.o.Logger.Error("registry unavailable for resource metadata", "correlation_id", corr, "err", err)
			writeJSON(w, http.StatusServiceUnavailable, `{"error":"unavailable; correlation id `+corr+`"}`)
			return
		}
	}
	b, _ := json.Marshal(doc)
	// Public metadata, read by browser-based clients from other origins.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Cache-Control", "max-age=300")
	writeFrame(w, http.StatusOK, b)
}

// notAuthorizationServer answers a client that, refused with 401 on an
// API-key endpoint, looked for an OAuth authorization server at the
// gateway's own address (mcp-remote and the TypeScript SDK fall back to
// the server's origin when the resource advertises none, and end by
// printing this body): it says why there is none and what the 401 meant.
const notAuthorizationServer = `{"error":"not found: aegis is not an OAuth authorization server; /mcp, /mcp/{server} and /v1/invoke take an aegis API key (Authorization: Bearer KEY), and a 401 from them means the API key sent was wrong or missing; OAuth tokens are accepted on /t/{tenant}/... from that tenant's issuer"}`

// authorizationServerPath: a path where OAuth clients look for an
// authorization server at the resource's origin (RFC 8414 and OpenID
// discovery, and the MCP specification's fallback endpoints).
func authorizationServerPath(p string) bool {
	switch p {
	case "/register", "/authorize", "/token":
		return true
	}
	for _, wk := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		if p == wk || strings.HasPrefix(p, wk+"/") {
			return true
		}
	}
	return false
}

// isResourcePath: one of the gateway's endpoints, as parsed by ServeHTTP.
func isResourcePath(p string) bool {
	switch {
	case p == "/v1/invoke", p == "/mcp", p == "/mcp/":
		return true
	case strings.HasPrefix(p, "/mcp/") && !strings.Contains(p[5:], "/"):
		return true
	}
	return false
}
