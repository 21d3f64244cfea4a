package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// cedar100 is a tenant's set of 100 policies of the shapes tenants write:
// per-tool permits by role, annotation rules, argument forbids.
func cedar100() string {
	var b strings.Builder
	for i := range 100 {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "@id(\"role-%d\") permit (principal in Role::\"team%d\", action == Action::\"tools/call\", resource == Tool::\"srv%d/tool%d\");\n", i, i%10, i%7, i)
		case 1:
			fmt.Fprintf(&b, "@id(\"ro-%d\") permit (principal, action == Action::\"tools/call\", resource in Server::\"srv%d\") when { resource.annotations has readOnlyHint && resource.annotations.readOnlyHint && principal.roles.contains(\"team%d\") };\n", i, i%7, i%10)
		case 2:
			fmt.Fprintf(&b, "@id(\"cap-%d\") forbid (principal, action == Action::\"tools/call\", resource == Tool::\"srv%d/tool%d\") when { context.arguments has amount && context.arguments.amount > %d };\n", i, i%7, i, 1000+i)
		case 3:
			fmt.Fprintf(&b, "@id(\"budget-%d\") forbid (principal, action, resource) when { principal.tenant == \"t%d\" && context.session.tool_calls > %d };\n", i, i, 500+i)
		}
	}
	return b.String()
}

// BenchmarkCedarDecision is one Cedar decision (the layer alone, and the
// whole tenant chain) for a tenant with 100 policies. Target: under 20 µs.
func BenchmarkCedarDecision(b *testing.B) {
	text := cedar100()
	l, err := compileCedar(text)
	if err != nil {
		b.Fatal(err)
	}
	if n := len(l.meta); n != 100 {
		b.Fatalf("%d policies, want 100", n)
	}
	d, err := Build(&Set{Cedar: text, Manifest: &Manifest{MaxToolCalls: 1000}})
	if err != nil {
		b.Fatal(err)
	}
	req := toolCall("srv1", "tool1")
	req.Caller.Roles = []string{"team1", "team3"}
	req.Annotations = json.RawMessage(`{"readOnlyHint":true,"destructiveHint":false,"title":"Tool one"}`)
	req.Arguments = json.RawMessage(`{"amount":250,"to":"acct-42","memo":"invoice 7781","tags":["a","b"]}`)
	if v := l.Decide(context.Background(), req); !v.Allow {
		b.Fatalf("benchmark request refused: %+v", v)
	}
	b.Run("layer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l.Decide(context.Background(), req)
		}
	})
	b.Run("tenant", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d.Decide(context.Background(), req)
		}
	})
	b.Run("visible", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Visible(context.Background(), d, req, "srv1", "tool1", req.Annotations)
		}
	})
}
