package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/internal/nametest"
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
	for _, tc := range nametest.IDs {
		if got := registry.ValidateServerName(tc.Name) == nil; got != tc.OK {
			t.Fatalf("registry.ValidateServerName(%q) ok=%v; this table says %v", tc.Name, got, tc.OK)
		}
		status, eb := post("/admin/v1/tenants/acme/servers", map[string]string{"name": tc.Name, "url": "https://mcp.example.com/mcp"})
		check("server name", tc.Name, "name", tc.OK, status, eb)
		status, eb = post("/admin/v1/tenants", map[string]string{"id": tc.Name})
		check("tenant id", tc.Name, "id", tc.OK, status, eb)
	}
	for _, tc := range nametest.Callers {
		if got := registry.ValidateCaller(tc.Name) == nil; got != tc.OK {
			t.Fatalf("registry.ValidateCaller(%q) ok=%v; this table says %v", tc.Name, got, tc.OK)
		}
		status, eb := post("/admin/v1/tenants/acme/keys", map[string]string{"caller": tc.Name})
		check("caller", tc.Name, "caller", tc.OK, status, eb)
	}
}
