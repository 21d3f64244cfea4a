package policy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/audit"
)

const tenantYAML = `
roles:
  ops:
    allow: ["mock/*", "payments/*"]
    approve: ["payments/refund"]
    deny: ["payments/transfer"]
cedar_policies: |
  @id("all-tools")
  permit (principal, action == Action::"tools/call", resource);
  @id("no-delete")
  forbid (principal, action, resource) when { resource.name like "delete_*" };
policy_mode: enforce
manifest:
  grants:
    tools/call: ["mock/*", "payments/*"]
  max_tool_calls: 5
`

func mustParse(t *testing.T, src string) *Set {
	t.Helper()
	s, err := ParseSet([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBuildChain(t *testing.T) {
	d, err := Build(mustParse(t, tenantYAML))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		edit  func(r *Request)
		allow bool
		appr  bool
		rule  string
	}{
		{"both layers allow: the first layer's rule", func(r *Request) {}, true, false, "role:ops allow mock/*"},
		{"role denies", func(r *Request) { r.Server, r.Tool = "payments", "transfer" }, false, false, "role:ops deny payments/transfer"},
		{"role asks approval, cedar allows", func(r *Request) { r.Server, r.Tool = "payments", "refund" }, true, true, "role:ops approve payments/refund"},
		{"cedar forbids what the role allows", func(r *Request) { r.Tool = "delete_all" }, false, false, "cedar:no-delete"},
		{"no role", func(r *Request) { r.Caller.Roles = nil }, false, false, RuleNoRole},
		{"manifest first", func(r *Request) { r.Server = "files" }, false, false, "manifest:grant"},
		{"manifest budget", func(r *Request) { r.Session.ToolCalls = 5 }, false, false, "manifest:tool_calls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := toolCall("mock", "echo")
			tt.edit(req)
			v := d.Decide(context.Background(), req)
			if v.Allow != tt.allow || v.RequireApproval != tt.appr || v.Rule != tt.rule || v.Audit {
				t.Fatalf("got %+v, want allow %v approval %v rule %q", v, tt.allow, tt.appr, tt.rule)
			}
		})
	}
}

func TestAuditMode(t *testing.T) {
	s := mustParse(t, tenantYAML)
	s.Mode = ModeAudit
	d, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	req := toolCall("payments", "transfer")
	v := d.Decide(context.Background(), req)
	if !v.Audit || v.Allow || v.Rule != "role:ops deny payments/transfer" || !v.Forward() || v.Refused() {
		t.Fatalf("audit denial = %+v, want the intended denial, audit-only, forwarded", v)
	}
	// The manifest is never audit-only.
	req.Session.ToolCalls = 5
	if v := d.Decide(context.Background(), req); v.Audit || !v.Refused() || v.Reason != ReasonToolCalls {
		t.Fatalf("manifest in audit mode = %+v, want enforced", v)
	}
}

func TestBuildEmptyAndNil(t *testing.T) {
	d, err := Build(&Set{})
	if err != nil {
		t.Fatal(err)
	}
	if v := d.Decide(context.Background(), toolCall("any", "tool")); !v.Forward() || v.Audit {
		t.Fatalf("empty set = %+v, want allowed", v)
	}
	if _, err := Build(nil); err == nil {
		t.Fatal("Build(nil) succeeded, want an error (a set not loaded gets DenyAll)")
	}
}

func TestParseSet(t *testing.T) {
	tests := []struct {
		name string
		src  string
		err  string // "" = valid
	}{
		{"yaml", tenantYAML, ""},
		{"json", `{"roles":{"ops":{"allow":["mock/*"]}},"policy_mode":"audit","manifest":{"max_steps":3}}`, ""},
		{"empty document", ``, ""},
		{"unknown field", `rolez: {}`, "rolez"},
		{"unknown role field", `roles: {ops: {alow: ["mock/*"]}}`, "alow"},
		{"bad mode", `policy_mode: observe`, "policy_mode"},
		{"bad pattern", `roles: {ops: {allow: ["mock"]}}`, "ops: allow"},
		{"bad manifest", `manifest: {grants: {tools/list: ["*/*"]}}`, "tools/list"},
		{"bad cedar", "cedar_policies: |\n  permit (principal, action, resource)\n", "cedar_policies:"},
		{"two documents", "policy_mode: audit\n---\npolicy_mode: enforce\n", "more than one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSet([]byte(tt.src))
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("ParseSet: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("ParseSet error = %v, want one containing %q", err, tt.err)
			}
		})
	}
	// A Cedar error inside a set keeps its type and position.
	_, err := ParseSet([]byte("cedar_policies: |\n  permit (principal, action, resource);\n  forbid (principal, action resource);\n"))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 2 {
		t.Fatalf("err = %v, want *ParseError on line 2 of the text", err)
	}
	// An empty grant map is kept apart from an absent one.
	s := mustParse(t, "manifest: {grants: {}}")
	if s.Manifest.Grants == nil {
		t.Fatal("grants: {} decoded as absent")
	}
}

func TestHash(t *testing.T) {
	hash := func(s *Set) string {
		t.Helper()
		h, err := Hash(s)
		if err != nil {
			t.Fatal(err)
		}
		if !audit.IsHash(h) {
			t.Fatalf("Hash = %q, not audit's format", h)
		}
		return h
	}
	base := mustParse(t, tenantYAML)
	h := hash(base)

	same := []struct {
		name string
		s    *Set
	}{
		{"role lists reordered and repeated", mustParse(t, strings.Replace(tenantYAML, `allow: ["mock/*", "payments/*"]`, `allow: ["payments/*", "mock/*", "mock/*"]`, 1))},
		{"grant lists reordered", mustParse(t, strings.Replace(tenantYAML, `tools/call: ["mock/*", "payments/*"]`, `tools/call: ["payments/*", "mock/*"]`, 1))},
		{"json form", func() *Set {
			b, _ := json.Marshal(base)
			var s Set
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			return &s
		}()},
		{"mode spelled out vs default", func() *Set { c := *base; c.Mode = ""; return &c }()},
		{"CRLF and trailing blanks", func() *Set { c := *base; c.Cedar = strings.ReplaceAll(base.Cedar, "\n", "  \r\n"); return &c }()},
	}
	for _, tt := range same {
		if got := hash(tt.s); got != h {
			t.Errorf("%s: hash changed", tt.name)
		}
	}
	differ := []struct {
		name string
		s    *Set
	}{
		{"mode", func() *Set { c := *base; c.Mode = ModeAudit; return &c }()},
		{"cedar text", func() *Set { c := *base; c.Cedar += "\npermit (principal, action, resource);"; return &c }()},
		{"roles", func() *Set { c := *base; c.Roles = map[string]Role{"ops": {Allow: []string{"mock/*"}}}; return &c }()},
		{"manifest", func() *Set { c := *base; c.Manifest = &Manifest{MaxToolCalls: 6}; return &c }()},
	}
	for _, tt := range differ {
		if got := hash(tt.s); got == h {
			t.Errorf("%s: hash unchanged", tt.name)
		}
	}
	// Nil grants (everything) and empty grants (nothing) must not collide.
	if hash(&Set{Manifest: &Manifest{Grants: map[string][]string{}}}) == hash(&Set{Manifest: &Manifest{MaxToolCalls: 0, Grants: nil, MaxSteps: 1}}) {
		t.Error("distinct manifests collide")
	}
	if a, b := hash(&Set{Manifest: &Manifest{Grants: map[string][]string{}, MaxSteps: 1}}), hash(&Set{Manifest: &Manifest{MaxSteps: 1}}); a == b {
		t.Error("grants {} and absent grants hash alike")
	}
	for name, s := range map[string]*Set{"nil": nil, "zero": {}, "audit with nothing": {Mode: ModeAudit}, "zero manifest": {Manifest: &Manifest{}}} {
		if got := hash(s); got != audit.PolicyHashNone {
			t.Errorf("%s: Hash = %s, want audit.PolicyHashNone", name, got)
		}
	}
	if _, err := Hash(&Set{Mode: "bogus"}); err == nil {
		t.Error("Hash of an invalid set succeeded")
	}
}
