package policycheck_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/policycheck"
	"github.com/aegis-gw/aegis/shared/registry"
)

// benchSet is scripts/bench's 20-policy set (roles and Cedar).
func benchSet() string {
	var b strings.Builder
	b.WriteString("roles:\n  agent: {allow: [\"mock/*\"], deny: [\"mock/test_error_handling\"]}\ncedar_policies: |\n")
	b.WriteString("  @id(\"simple-text\")\n  permit (principal in Role::\"agent\", action == Action::\"tools/call\", resource == Tool::\"mock/echo\");\n")
	for i := 1; i <= 19; i++ {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "  permit (principal in Role::\"agent\", action == Action::\"tools/call\", resource == Tool::\"mock/tool_%d\");\n", i)
		case 1:
			fmt.Fprintf(&b, "  forbid (principal, action == Action::\"tools/call\", resource) when { resource.name == \"danger_%d\" };\n", i)
		case 2:
			fmt.Fprintf(&b, "  permit (principal, action == Action::\"tools/call\", resource in Server::\"other%d\") when { resource.annotations has readOnlyHint && resource.annotations.readOnlyHint };\n", i)
		case 3:
			fmt.Fprintf(&b, "  forbid (principal, action == Action::\"tools/call\", resource == Tool::\"mock/pay_%d\") when { context.arguments has amount && context.arguments.amount > 100 };\n", i)
		}
	}
	return b.String()
}

// BenchmarkCheck is one policy stage decision and its count, for a tenant
// with scripts/bench's 20-policy set, the set cached.
func BenchmarkCheck(b *testing.B) {
	fs := &fakeStore{sets: map[string]string{"acme": benchSet()}, keys: map[string]registry.Key{"k1": {ID: "k1", Tenant: "acme", Roles: []string{"agent"}}}}
	k := newBenchCheck(fs)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c := newCall("acme", "echo")
		c.Params = []byte(`{"name":"echo","arguments":{"message":"hello"}}`)
		c.ToolDef = []byte(`{"name":"echo","annotations":{"readOnlyHint":true}}`)
		if err := k.Check(ctx, c); err != nil {
			b.Fatal(err)
		}
		c.Finish(audit.OutcomeAllowed)
		fs.mu.Lock()
		fs.counts = fs.counts[:0]
		fs.mu.Unlock()
	}
}

func newBenchCheck(fs *fakeStore) *policycheck.Check { return policycheck.New(fs, fs, fs, nil) }

// BenchmarkCheckEmptySet is the stage for a tenant with no policy set.
func BenchmarkCheckEmptySet(b *testing.B) {
	fs := &fakeStore{sets: map[string]string{}, keys: map[string]registry.Key{"k1": {ID: "k1", Tenant: "acme"}}}
	k := newBenchCheck(fs)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c := newCall("acme", "echo")
		if err := k.Check(ctx, c); err != nil {
			b.Fatal(err)
		}
		c.Finish(audit.OutcomeAllowed)
		fs.mu.Lock()
		fs.counts = fs.counts[:0]
		fs.mu.Unlock()
	}
}
