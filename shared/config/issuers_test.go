package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/registry"
)

const issuersYAML = `tenants:
  - id: acme
    tier: growth
    issuers:
      - url: https://login.example.com/realms/acme
        audiences: [https://gw.example.com/t/acme/mcp]
        algorithms: [RS256]
        caller_claim: email
        roles_claim: groups
        scope_roles: {"tools:write": [writer]}
        required_scopes: [mcp]
`

func TestIssuers(t *testing.T) {
	f, err := ParseFile([]byte(issuersYAML), env(nil), false)
	if err != nil {
		t.Fatal(err)
	}
	ts, _, _ := f.Registry()
	want := []registry.Issuer{{
		URL: "https://login.example.com/realms/acme", Audiences: []string{"https://gw.example.com/t/acme/mcp"},
		Algorithms: []string{"RS256"}, CallerClaim: "email", RolesClaim: "groups",
		ScopeRoles: map[string][]string{"tools:write": {"writer"}}, RequiredScopes: []string{"mcp"},
	}}
	if len(ts) != 1 || !reflect.DeepEqual(ts[0].Issuers, want) {
		t.Fatalf("issuers = %+v, want %+v", ts, want)
	}
}

// TestBadIssuers: each bad field is named by its path; the address rules
// are those of upstream URLs.
func TestBadIssuers(t *testing.T) {
	for _, tc := range []struct {
		name, issuer string
		local        bool
		want         string
	}{
		{"http outside local mode", `{url: "http://login.example.com", audiences: [https://gw/t/acme/mcp]}`, false, "tenants[0].issuers[0].url: https is required"},
		{"loopback outside local mode", `{url: "https://127.0.0.1:8443", audiences: [https://gw/t/acme/mcp]}`, false, "tenants[0].issuers[0].url"},
		{"metadata address", `{url: "https://169.254.169.254", audiences: [https://gw/t/acme/mcp]}`, true, "tenants[0].issuers[0].url"},
		{"query in the issuer", `{url: "https://login.example.com/?x=1", audiences: [https://gw/t/acme/mcp]}`, false, "no query or fragment"},
		{"no audience", `{url: "https://login.example.com"}`, false, "tenants[0].issuers[0].audiences: required"},
		{"relative audience", `{url: "https://login.example.com", audiences: [acme]}`, false, "tenants[0].issuers[0].audiences[0]"},
		{"HMAC", `{url: "https://login.example.com", audiences: [https://gw/t/acme/mcp], algorithms: [HS256]}`, false, "tenants[0].issuers[0].algorithms[0]: \"HS256\""},
		{"none", `{url: "https://login.example.com", audiences: [https://gw/t/acme/mcp], algorithms: [none]}`, false, "never none"},
		{"scope with a quote", `{url: "https://login.example.com", audiences: [https://gw/t/acme/mcp], required_scopes: ["a\"b"]}`, false, "tenants[0].issuers[0].required_scopes[0]"},
		{"unknown field", `{url: "https://login.example.com", audiences: [https://gw/t/acme/mcp], jwks_uri: "https://x"}`, false, "jwks_uri"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := "tenants:\n  - id: acme\n    tier: free\n    issuers:\n      - " + tc.issuer + "\n"
			_, err := ParseFile([]byte(y), env(nil), tc.local)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	// Local mode allows an http loopback issuer (aegis serve).
	y := "tenants:\n  - id: acme\n    tier: free\n    issuers:\n      - {url: \"http://127.0.0.1:9000\", audiences: [http://127.0.0.1:8080/t/acme/mcp]}\n"
	if _, err := ParseFile([]byte(y), env(nil), true); err != nil {
		t.Fatalf("local http issuer: %v", err)
	}
}
