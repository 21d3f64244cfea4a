package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// TestNamesFollowTheRegistryRule: the admin API accepts exactly the tenant
// ids, server names and callers the registry's rule accepts, the same ones
// the config file accepts (config's TestNamesFollowTheRegistryRule has the
// same examples). docs/design/names.md gives the rule.
func TestNamesFollowTheRegistryRule(t *testing.T) {
	m := memstore.New()
	must(t, m.PutTenant(context.Background(), registry.Tenant{ID: "acme", Tier: registry.TierFree}))
	key := admin.NewKey()
	h, err := admin.New(m, &admin.Options{AdminKey: key})
	must(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(path string, body map[string]string) (int, admin.ErrorBody) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(string(b)))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var eb admin.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		return resp.StatusCode, eb
	}
	check := func(kind, name, field string, ok bool, status int, eb admin.ErrorBody) {
		t.Helper()
		switch {
		case ok && status != http.StatusCreated:
			t.Errorf("%s %q = %d %+v; want 201", kind, name, status, eb.Error)
		case !ok && (status != http.StatusBadRequest || eb.Error.Field != field):
			t.Errorf("%s %q = %d %+v; want 400 on %s", kind, name, status, eb.Error, field)
		}
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"billing", true},
		{"mock-primary-2", true},
		{strings.Repeat("a", 63), true},
		{"Acme.Tools_1", false},
		{"Billing", false},
		{"acme.tools", false},
		{"acme_tools", false},
		{"-billing", false},
		{strings.Repeat("a", 64), false},
	} {
		if got := registry.ValidateServerName(tc.name) == nil; got != tc.ok {
			t.Fatalf("registry.ValidateServerName(%q) ok=%v; this table says %v", tc.name, got, tc.ok)
		}
		status, eb := post("/admin/v1/tenants/acme/servers", map[string]string{"name": tc.name, "url": "https://mcp.example.com/mcp"})
		check("server name", tc.name, "name", tc.ok, status, eb)
		status, eb = post("/admin/v1/tenants", map[string]string{"id": tc.name})
		check("tenant id", tc.name, "id", tc.ok, status, eb)
	}
	for _, tc := range []struct {
		caller string
		ok     bool
	}{
		{"support-agent", true},
		{"Acme.Tools_1", true},
		{"arn:aws:iam::123456789012:role/agent", true},
		{"support agent", false},
		{"bot\nadmin", false},
	} {
		if got := registry.ValidateCaller(tc.caller) == nil; got != tc.ok {
			t.Fatalf("registry.ValidateCaller(%q) ok=%v; this table says %v", tc.caller, got, tc.ok)
		}
		status, eb := post("/admin/v1/tenants/acme/keys", map[string]string{"caller": tc.caller})
		check("caller", tc.caller, "caller", tc.ok, status, eb)
	}
}
