package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const policyTestConfig = `tenants:
  - id: acme
    tier: free
    cedar_policies: acme.cedar
    roles:
      ops: {allow: ["mock/*"], approve: ["payments/refund"]}
    manifest: {grants: {tools/call: ["mock/*", "payments/*"]}}
    keys:
      - id: opskey1
        caller: ops-agent
        sha256: 0000000000000000000000000000000000000000000000000000000000000000
        roles: [ops]
      - id: rokey01
        caller: reader
        sha256: 1111111111111111111111111111111111111111111111111111111111111111
    servers:
      - name: mock
        url: http://127.0.0.1:9/mcp
`

const policyTestCedar = `@id("small-amounts")
permit (principal, action == Action::"tools/call", resource)
when { context.arguments has amount && context.arguments.amount < 100 };
@id("echo")
permit (principal, action, resource == Tool::"mock/echo");
`

func TestPolicyTestCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "aegis.yaml")
	if err := os.WriteFile(cfg, []byte(policyTestConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "acme.cedar"), []byte(policyTestCedar), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		out    []string
	}{
		{"allowed by both layers", []string{"--caller", "ops-agent", "--tool", "mock/echo"}, 0, []string{"verdict: allow", "rule:    role:ops allow mock/*"}},
		{"no role", []string{"--caller", "reader", "--tool", "mock/echo"}, 1, []string{"verdict: deny", "rule:    roles:(no role allows)", "-32003 POLICY_DENIED"}},
		{"cedar reads the arguments", []string{"--caller", "ops-agent", "--tool", "mock/transfer", "--args", `{"amount":500}`}, 1, []string{"verdict: deny", "cedar:(no permit)"}},
		{"small amount", []string{"--caller", "ops-agent", "--tool", "mock/transfer", "--args", `{"amount":5}`}, 0, []string{"verdict: allow"}},
		{"outside the grant", []string{"--caller", "ops-agent", "--tool", "files/read"}, 1, []string{"verdict: deny", "rule:    manifest:grant", "-32005 CAPABILITY_DENIED"}},
		{"approval", []string{"--caller", "ops-agent", "--tool", "payments/refund", "--args", `{"amount":5}`}, 1, []string{"verdict: approve", "role:ops approve payments/refund"}},
		{"roles flag", []string{"--caller", "anyone", "--roles", "ops", "--tool", "mock/echo"}, 0, []string{"verdict: allow"}},
		{"bad tool", []string{"--caller", "x", "--tool", "echo"}, 2, nil},
		{"bad args", []string{"--caller", "x", "--tool", "mock/echo", "--args", "[1]"}, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			got := policyTest(append([]string{"--config", cfg}, tc.args...), &out, &errb)
			if got != tc.status {
				t.Fatalf("status %d, want %d; stdout %s stderr %s", got, tc.status, out.String(), errb.String())
			}
			for _, w := range tc.out {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}

	// A caller no key names is refused without --roles (it would
	// otherwise be tested with no roles at all, silently).
	var cout, cerr bytes.Buffer
	if got := policyTest([]string{"--config", cfg, "--caller", "nobody", "--tool", "mock/echo"}, &cout, &cerr); got != 2 ||
		!strings.Contains(cerr.String(), `--caller "nobody": no key of tenant acme names that caller (its callers: ops-agent, reader)`) || cout.Len() != 0 {
		t.Fatalf("unknown caller: status %d, stdout %q, stderr %q; want 2 naming the callers", got, cout.String(), cerr.String())
	}

	// A policy that does not parse stops it with its line and column.
	if err := os.WriteFile(filepath.Join(dir, "acme.cedar"), []byte("permit (principal, action, resource);\npermit (principal action, resource);\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if got := policyTest([]string{"--config", cfg, "--caller", "x", "--tool", "mock/echo"}, &out, &errb); got != 2 || !strings.Contains(errb.String(), "cedar_policies:2:") {
		t.Fatalf("bad Cedar: status %d, stderr %q; want 2 naming cedar_policies:2:COLUMN", got, errb.String())
	}
}
