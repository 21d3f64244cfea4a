package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/policy"
)

const policyTenant = `tenants:
  - id: acme
    tier: free
%s    keys:
      - id: opskey1
        caller: ops-agent
        sha256: 0000000000000000000000000000000000000000000000000000000000000000
        roles: [ops]
%s`

func policyConfig(tenant, key string) []byte {
	return []byte(strings.Replace(strings.Replace(policyTenant, "%s", tenant, 1), "%s", key, 1))
}

func TestFilePolicy(t *testing.T) {
	for _, tc := range []struct {
		name, tenant, key string
		err               string // "" valid
	}{
		{"none", "", "", ""},
		{"inline cedar, roles, audit mode, manifest", "    cedar_policies: |\n      permit (principal, action, resource);\n    roles: {ops: {allow: [\"*/*\"]}}\n    policy_mode: audit\n    manifest: {max_tool_calls: 5}\n", "        manifest: {max_steps: 3}\n", ""},
		{"cedar syntax error", "    cedar_policies: |\n      permit (principal, action, resource);\n      forbid (principal action, resource);\n", "", "tenants[0]: cedar_policies:2:"},
		{"bad mode", "    policy_mode: maybe\n", "", "tenants[0]: policy: policy_mode"},
		{"bad role pattern name", "    roles: {\"bad role\": {allow: [\"*/*\"]}}\n", "", "tenants[0]: policy: roles"},
		{"bad key manifest", "", "        manifest: {max_tool_calls: -1}\n", "tenants[0].keys[0].manifest"},
		{"missing cedar file", "    cedar_policies: nope.cedar\n", "", "tenants[0].cedar_policies"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFile(policyConfig(tc.tenant, tc.key), func(string) string { return "" }, true)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ps, err := f.Policies()
			if err != nil || len(ps) != 1 || ps[0].Tenant != "acme" {
				t.Fatalf("Policies = %+v, %v", ps, err)
			}
			// What serve stores is the same set: it parses, and hashes alike.
			set, err := policy.ParseSet([]byte(ps[0].Source))
			if err != nil {
				t.Fatalf("stored source %q: %v", ps[0].Source, err)
			}
			h1, _ := policy.Hash(set)
			h2, _ := policy.Hash(f.Tenants[0].PolicySet())
			if h1 != h2 {
				t.Errorf("stored set hashes %s, config's %s", h1, h2)
			}
			_, _, ks := f.Registry()
			if len(ks) != 1 || len(ks[0].Roles) != 1 || ks[0].Roles[0] != "ops" {
				t.Errorf("key roles = %+v", ks)
			}
		})
	}
}

func TestCedarFileRelativeToConfig(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "policies"), 0o700))
	must(os.WriteFile(filepath.Join(dir, "policies", "acme.cedar"), []byte("permit (principal, action, resource);\n"), 0o600))
	must(os.WriteFile(filepath.Join(dir, "aegis.yaml"), policyConfig("    cedar_policies: policies/acme.cedar\n", ""), 0o600))
	f, err := LoadFile(filepath.Join(dir, "aegis.yaml"), true)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Tenants[0].CedarPolicies; got != "permit (principal, action, resource);\n" {
		t.Fatalf("cedar_policies = %q, want the file's text", got)
	}
	must(os.WriteFile(filepath.Join(dir, "policies", "acme.cedar"), []byte("permit (principal action, resource);\n"), 0o600))
	if _, err := LoadFile(filepath.Join(dir, "aegis.yaml"), true); err == nil || !strings.Contains(err.Error(), "cedar_policies:1:") || !strings.Contains(err.Error(), "acme.cedar") {
		t.Fatalf("bad Cedar file: err = %v; want its line, column and file", err)
	}
}
