package storetest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

func testRegistry(t *testing.T, nb NewBackend) {
	b := nb(t, Options{})
	r, c := b, ctx(t)

	if _, err := r.Tenant(c, "acme"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Tenant(absent) err = %v, want ErrNotFound", err)
	}
	acme := registry.Tenant{ID: "acme", Tier: registry.TierGrowth, RefusalShape: registry.ShapeResult,
		WebhookURL: "https://hooks.example/a", WebhookSecretRef: "env:HOOK", Created: t0,
		// Issuers are stored with the tenant, every field round-tripped.
		Issuers: []registry.Issuer{{
			URL: "https://login.example/realms/acme", Audiences: []string{"https://gw.example/t/acme/mcp"},
			Algorithms: []string{"RS256", "EdDSA"}, CallerClaim: "email", RolesClaim: "groups",
			ScopeRoles: map[string][]string{"tools:write": {"writer", "ops"}}, RequiredScopes: []string{"mcp"},
		}, {URL: "https://idp.example", Audiences: []string{"https://gw.example/t/acme/mcp", "https://gw.example/t/acme/mcp/files"}}}}
	beta := registry.Tenant{ID: "beta", Tier: registry.TierFree, Created: t0}
	for _, tn := range []registry.Tenant{beta, acme} {
		if err := r.PutTenant(c, tn); err != nil {
			t.Fatalf("PutTenant(%s): %v", tn.ID, err)
		}
	}
	got, err := r.Tenant(c, "acme")
	if err != nil || !reflect.DeepEqual(got, acme) {
		t.Fatalf("Tenant(acme) = %+v, %v; want %+v", got, err, acme)
	}
	acme.Disabled = true
	if err := r.PutTenant(c, acme); err != nil {
		t.Fatal(err)
	}
	list, err := r.ListTenants(c)
	if err != nil || !reflect.DeepEqual(list, []registry.Tenant{acme, beta}) {
		t.Fatalf("ListTenants = %+v, %v; want acme (disabled), beta", list, err)
	}

	// Servers: the tenant must exist; sorted by name; deep round trip.
	if err := r.PutServer(c, registry.Server{Tenant: "nobody", Name: "x", URL: "http://x"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PutServer(unknown tenant) err = %v, want ErrNotFound", err)
	}
	s1 := registry.Server{Tenant: "acme", Name: "payments", URL: "https://p.example/mcp",
		Credential: &registry.Credential{Header: "Authorization", Ref: "env:PAY"},
		Tools:      map[string]registry.ToolSettings{"transfer": {RequiresApproval: true}, "echo": {}}, Created: t0}
	s2 := registry.Server{Tenant: "acme", Name: "docs", URL: "https://d.example/mcp", Created: t0}
	s3 := registry.Server{Tenant: "beta", Name: "docs", URL: "https://other.example/mcp", Created: t0}
	for _, s := range []registry.Server{s1, s2, s3} {
		if err := r.PutServer(c, s); err != nil {
			t.Fatalf("PutServer(%s/%s): %v", s.Tenant, s.Name, err)
		}
	}
	servers, err := r.Servers(c, "acme")
	if err != nil || !reflect.DeepEqual(servers, []registry.Server{s2, s1}) {
		t.Fatalf("Servers(acme) = %+v, %v; want docs, payments", servers, err)
	}
	if err := r.DeleteServer(c, "acme", "docs"); err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteServer(c, "acme", "never-there"); err != nil {
		t.Fatalf("DeleteServer(absent) = %v, want nil", err)
	}
	servers, err = r.Servers(c, "acme")
	if err != nil || !reflect.DeepEqual(servers, []registry.Server{s1}) {
		t.Fatalf("Servers(acme) after delete = %+v, %v", servers, err)
	}
	if servers, err := r.Servers(c, "nobody"); err != nil || len(servers) != 0 {
		t.Fatalf("Servers(unknown) = %+v, %v; want none", servers, err)
	}

	// Keys: by id, listed per tenant sorted by id, revocable within their tenant only.
	k1 := registry.Key{ID: "k2", Tenant: "acme", Caller: "agent-1", Hash: "ab12", Created: t0}
	k2 := registry.Key{ID: "k1", Tenant: "acme", Caller: "agent-2", Hash: "cd34", Created: t0}
	k3 := registry.Key{ID: "k3", Tenant: "beta", Caller: "bot", Hash: "ef56", Created: t0}
	for _, k := range []registry.Key{k1, k2, k3} {
		if err := r.PutKey(c, k); err != nil {
			t.Fatalf("PutKey(%s): %v", k.ID, err)
		}
	}
	if got, err := r.Key(c, "k2"); err != nil || !reflect.DeepEqual(got, k1) {
		t.Fatalf("Key(k2) = %+v, %v", got, err)
	}
	if _, err := r.Key(c, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Key(absent) err = %v, want ErrNotFound", err)
	}
	keys, err := r.ListKeys(c, "acme")
	if err != nil || !reflect.DeepEqual(keys, []registry.Key{k2, k1}) {
		t.Fatalf("ListKeys(acme) = %+v, %v; want k1, k2", keys, err)
	}
	if err := r.RevokeKey(c, "beta", "k2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RevokeKey(other tenant's key) err = %v, want ErrNotFound", err)
	}
	if err := r.RevokeKey(c, "acme", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RevokeKey(absent) err = %v, want ErrNotFound", err)
	}
	if err := r.RevokeKey(c, "acme", "k2"); err != nil {
		t.Fatal(err)
	}
	k1.Revoked = true
	if got, err := r.Key(c, "k2"); err != nil || !reflect.DeepEqual(got, k1) {
		t.Fatalf("Key(k2) after revoke = %+v, %v", got, err)
	}
	keys, err = r.ListKeys(c, "acme")
	if err != nil || !reflect.DeepEqual(keys, []registry.Key{k2, k1}) {
		t.Fatalf("ListKeys(acme) after revoke = %+v, %v", keys, err)
	}
}
