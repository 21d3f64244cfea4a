package policy

import (
	"context"
	"testing"
)

func TestRoles(t *testing.T) {
	l, err := compileRoles(map[string]Role{
		"ops":     {Allow: []string{"mock/*", "payments/*"}, Deny: []string{"payments/transfer"}, Approve: []string{"payments/refund"}},
		"auditor": {Allow: []string{"*/read_*"}},
		"admin":   {Allow: []string{"*/*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		roles        []string
		server, tool string
		allow, appr  bool
		rule         string
	}{
		{"allowed by glob", []string{"ops"}, "mock", "echo", true, false, "role:ops allow mock/*"},
		{"deny beats allow", []string{"ops"}, "payments", "transfer", false, false, "role:ops deny payments/transfer"},
		{"deny of one role beats another's allow", []string{"admin", "ops"}, "payments", "transfer", false, false, "role:ops deny payments/transfer"},
		{"approve allows with approval", []string{"ops"}, "payments", "refund", true, true, "role:ops approve payments/refund"},
		{"approve beats another's allow", []string{"admin", "ops"}, "payments", "refund", true, true, "role:ops approve payments/refund"},
		{"no role allows", []string{"auditor"}, "mock", "echo", false, false, RuleNoRole},
		{"no roles at all", nil, "mock", "echo", false, false, RuleNoRole},
		{"undefined role grants nothing", []string{"root"}, "mock", "echo", false, false, RuleNoRole},
		{"glob in server", []string{"auditor"}, "files", "read_dir", true, false, "role:auditor allow */read_*"},
		{"roles tried in name order", []string{"ops", "admin"}, "mock", "echo", true, false, "role:admin allow */*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := toolCall(tt.server, tt.tool)
			req.Caller.Roles = tt.roles
			v := l.Decide(context.Background(), req)
			if v.Allow != tt.allow || v.RequireApproval != tt.appr || v.Rule != tt.rule {
				t.Fatalf("got %+v, want allow %v approval %v rule %q", v, tt.allow, tt.appr, tt.rule)
			}
		})
	}
	// Roles decide tools/call only.
	req := toolCall("files", "")
	req.Method, req.ResourceURI, req.Caller.Roles = MethodResource, "file:///x", nil
	if v := l.Decide(context.Background(), req); !v.Allow || v.Rule != "" {
		t.Fatalf("resources/read = %+v, want allowed without a rule", v)
	}
	if l, err := compileRoles(nil); l != nil || err != nil {
		t.Fatalf("no roles = %v, %v; want no layer", l, err)
	}
}

func TestRolesValidate(t *testing.T) {
	tests := []struct {
		name  string
		roles map[string]Role
	}{
		{"empty name", map[string]Role{"": {}}},
		{"bad name", map[string]Role{"a b": {}}},
		{"bad pattern", map[string]Role{"ops": {Deny: []string{"noslash"}}}},
		{"empty server", map[string]Role{"ops": {Allow: []string{"/x"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := compileRoles(tt.roles); err == nil {
				t.Fatal("compiled, want an error")
			}
		})
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		g, s string
		want bool
	}{
		{"*", "", true},
		{"*", "anything/at/all", true},
		{"read_*", "read_", true},
		{"read_*", "rea", false},
		{"*_file", "read_file", true},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"**", "x", true},
	}
	for _, tt := range tests {
		if got := glob(tt.g, tt.s); got != tt.want {
			t.Errorf("glob(%q, %q) = %v, want %v", tt.g, tt.s, got, tt.want)
		}
	}
}
