package oauth

import (
	"slices"

	"github.com/aegis-gw/aegis/shared/registry"
)

// ResourceMetadata is the RFC 9728 protected resource metadata document
// the gateway serves at /.well-known/oauth-protected-resource{path}.
type ResourceMetadata struct {
	// Resource is the resource's URL, exactly the one the metadata's
	// well-known URL was formed from (RFC 9728 §3.3).
	Resource string `json:"resource"`
	// AuthorizationServers are the tenant's issuers; none for a resource
	// that takes API keys only.
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// AddIssuers lists issuers as authorization servers, and the scopes they
// require or map to roles as the scopes supported (sorted, once each).
func (m *ResourceMetadata) AddIssuers(issuers []registry.Issuer) {
	for _, is := range issuers {
		m.AuthorizationServers = append(m.AuthorizationServers, is.URL)
		m.ScopesSupported = append(m.ScopesSupported, is.RequiredScopes...)
		for s := range is.ScopeRoles {
			m.ScopesSupported = append(m.ScopesSupported, s)
		}
	}
	slices.Sort(m.ScopesSupported)
	m.ScopesSupported = slices.Compact(m.ScopesSupported)
}
