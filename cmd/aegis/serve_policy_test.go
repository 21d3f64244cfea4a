package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/policy"
)

// TestServeStoresEachTenantsPolicy: `aegis serve --config` writes every
// tenant's policy set with its registry, the empty set for a tenant that
// configures none.
func TestServeStoresEachTenantsPolicy(t *testing.T) {
	src := `tenants:
  - id: acme
    tier: free
    policy_mode: audit
    cedar_policies: |
      permit (principal, action, resource);
    keys:
      - id: opskey1
        caller: ops
        sha256: 0000000000000000000000000000000000000000000000000000000000000000
        roles: [ops]
  - id: beta
    tier: free
`
	f, err := config.ParseFile([]byte(src), func(string) string { return "" }, true)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registryOf(f, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	m := memstore.New()
	ctx := context.Background()
	if err := reg.load(ctx, m); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tenant, want string
	}{
		{"acme", "policy_mode: audit"},
		{"beta", "{}"},
	} {
		p, err := m.Policy(ctx, tc.tenant)
		if err != nil || !strings.Contains(p.Source, tc.want) {
			t.Fatalf("%s: policy %+v, %v; want a source with %q", tc.tenant, p, err, tc.want)
		}
		if _, err := policy.ParseSet([]byte(p.Source)); err != nil {
			t.Errorf("%s: stored source does not parse: %v", tc.tenant, err)
		}
	}
	k, err := m.Key(ctx, "opskey1")
	if err != nil || len(k.Roles) != 1 || k.Roles[0] != "ops" {
		t.Fatalf("key = %+v, %v; want roles [ops]", k, err)
	}
}
