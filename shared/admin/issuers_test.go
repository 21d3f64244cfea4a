package admin_test

import (
	"reflect"
	"testing"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/registry"
)

// TestIssuers: a tenant's issuers are set at creation or replaced with
// PUT .../issuers, with the config file's rules (registry.ValidateIssuers),
// and read back with the tenant.
func TestIssuers(t *testing.T) {
	e := newEnv(t, "", nil)
	k := e.adminKey
	var tn registry.Tenant
	body := `{"id":"beta","issuers":[{"url":"https://login.example.com","audiences":["https://gw.example.com/t/beta/mcp"],"scope_roles":{"tools:write":["writer"]}}]}`
	if code := e.admin("POST", "/admin/v1/tenants", k, body, &tn); code != 201 || len(tn.Issuers) != 1 || tn.Issuers[0].URL != "https://login.example.com" {
		t.Fatalf("create = %d %+v", code, tn)
	}
	want := []registry.Issuer{{URL: "https://idp.example.com/realms/beta", Audiences: []string{"https://gw.example.com/t/beta/mcp"}, Algorithms: []string{"ES256"}, RequiredScopes: []string{"mcp"}}}
	var put registry.Tenant
	if code := e.admin("PUT", "/admin/v1/tenants/beta/issuers", k, `{"issuers":[{"url":"https://idp.example.com/realms/beta","audiences":["https://gw.example.com/t/beta/mcp"],"algorithms":["ES256"],"required_scopes":["mcp"]}]}`, &put); code != 200 || !reflect.DeepEqual(put.Issuers, want) {
		t.Fatalf("put = %d %+v", code, put)
	}
	var got registry.Tenant
	if e.admin("GET", "/admin/v1/tenants/beta", k, "", &got); !reflect.DeepEqual(got.Issuers, want) || got.Tier != "free" {
		t.Fatalf("get = %+v", got)
	}
	for _, c := range []struct {
		method, path, body string
		status             int
		field              string
	}{
		{"PUT", "/admin/v1/tenants/beta/issuers", `{"issuers":[{"url":"http://169.254.169.254","audiences":["https://gw/t/beta/mcp"]}]}`, 400, "issuers[0].url"},
		{"PUT", "/admin/v1/tenants/beta/issuers", `{"issuers":[{"url":"https://a.example","audiences":["https://gw/t/beta/mcp"],"algorithms":["HS256"]}]}`, 400, "issuers[0].algorithms[0]"},
		{"PUT", "/admin/v1/tenants/beta/issuers", `{"issuers":[{"url":"https://a.example"}]}`, 400, "issuers[0].audiences"},
		{"POST", "/admin/v1/tenants", `{"id":"gamma","issuers":[{"url":"ftp://a.example","audiences":["https://gw/t/gamma/mcp"]}]}`, 400, "issuers[0].url"},
		{"PUT", "/admin/v1/tenants/nope/issuers", `{"issuers":[]}`, 404, ""},
	} {
		var b admin.ErrorBody
		if status := e.admin(c.method, c.path, k, c.body, &b); status != c.status || b.Error.Field != c.field {
			t.Errorf("%s %s %s = %d %+v; want %d field %q", c.method, c.path, c.body, status, b, c.status, c.field)
		}
	}
	// An empty list leaves API keys only.
	var cleared registry.Tenant
	if code := e.admin("PUT", "/admin/v1/tenants/beta/issuers", k, `{"issuers":[]}`, &cleared); code != 200 || cleared.Issuers != nil {
		t.Fatalf("clear = %d %+v", code, cleared)
	}
}
