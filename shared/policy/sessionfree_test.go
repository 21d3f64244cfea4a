package policy

import (
	"context"
	"testing"
	"time"
)

// TestBuildSessionFree: the session-free part refuses what Build's
// decider refuses whatever the session holds (a role's deny, no role, a
// Cedar forbid or no permit whose candidates read no context.session),
// says nothing (allows) where a candidate reads the session, and is nil
// where it could never refuse (no layers, audit mode).
func TestBuildSessionFree(t *testing.T) {
	const sessionCedar = `cedar_policies: |
  @id("all")
  permit (principal, action, resource);
  @id("short")
  forbid (principal, action == Action::"tools/call", resource) when { resource.name == "echo" && context.session.tool_calls > 3 };
`
	for _, tc := range []struct {
		name, src, tool string
		roles           []string
		refused         bool
	}{
		{name: "a role's deny", src: tenantYAML, tool: "transfer", roles: []string{"ops"}, refused: true},
		{name: "no role allows", src: tenantYAML, tool: "transfer", roles: []string{"guest"}, refused: true},
		{name: "a Cedar forbid", src: tenantYAML, tool: "delete_all", roles: []string{"ops"}, refused: true},
		{name: "allowed", src: tenantYAML, tool: "refund", roles: []string{"ops"}},
		{name: "a forbid that reads the session", src: sessionCedar, tool: "echo"},
		{name: "no permit, nothing reads the session", src: "cedar_policies: |\n  @id(\"x\")\n  permit (principal, action, resource) when { resource.name == \"x\" };\n", tool: "echo", refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := mustParse(t, tc.src)
			free, err := BuildSessionFree(set)
			if err != nil || free == nil {
				t.Fatalf("BuildSessionFree = %v, %v", free, err)
			}
			req := &Request{Method: MethodToolsCall, Tenant: "acme", Server: "payments", Tool: tc.tool,
				Caller: Caller{ID: "a", Roles: tc.roles}, Now: time.Unix(1e9, 0)}
			if tc.src != tenantYAML {
				req.Server = "mock"
			}
			got := free.Decide(context.Background(), req)
			if got.Refused() != tc.refused {
				t.Fatalf("%+v, want refused %v", got, tc.refused)
			}
			if !tc.refused {
				return
			}
			// Whatever the session: Build's decider refuses too, with a
			// session far past any count.
			full, err := Build(set)
			if err != nil {
				t.Fatal(err)
			}
			req.Session = Session{ID: "s", Started: req.Now, ToolCalls: 1}
			if v := full.Decide(context.Background(), req); !v.Refused() {
				t.Errorf("Build's decider: %+v, want refused", v)
			}
		})
	}
	audit := mustParse(t, tenantYAML)
	audit.Mode = ModeAudit
	for _, set := range []*Set{mustParse(t, "manifest: {max_tool_calls: 5}\n"), audit} {
		if free, err := BuildSessionFree(set); err != nil || free != nil {
			t.Errorf("mode %q: BuildSessionFree = %v, %v; want nil (never refuses)", set.Mode, free, err)
		}
	}
}
