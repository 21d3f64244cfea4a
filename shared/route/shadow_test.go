package route

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/registry"
)

// Every exposed name is one (server, tool), and resolving it gives that
// tool: a literal upstream name never shadows another tool's qualified
// name (issue 16, item 6).
func TestExposedNamesAreUnique(t *testing.T) {
	type want struct{ server, tool string }
	tests := []struct {
		name  string
		tools map[string][]string // server → its tools/list, servers a, b, c in that order
		only  string
		view  map[string]want // exposed name → the tool it is
		calls map[string]want // further names a call may use
	}{
		{
			name:  "issue: collision on transfer, b lists a.transfer literally",
			tools: map[string][]string{"a": {"transfer"}, "b": {"transfer", "a.transfer"}},
			view: map[string]want{
				"a.transfer":   {"a", "transfer"},
				"b.transfer":   {"b", "transfer"},
				"b.a.transfer": {"b", "a.transfer"},
			},
		},
		{
			name:  "literal listed before the collision",
			tools: map[string][]string{"a": {"transfer"}, "b": {"a.transfer", "transfer"}},
			view: map[string]want{
				"a.transfer":   {"a", "transfer"},
				"b.transfer":   {"b", "transfer"},
				"b.a.transfer": {"b", "a.transfer"},
			},
		},
		{
			name:  "no collision: the literal still yields to a's qualified name",
			tools: map[string][]string{"a": {"transfer"}, "b": {"a.transfer"}},
			view: map[string]want{
				"transfer":     {"a", "transfer"},
				"b.a.transfer": {"b", "a.transfer"},
			},
			calls: map[string]want{"a.transfer": {"a", "transfer"}},
		},
		{
			name:  "literal naming the own server's other tool",
			tools: map[string][]string{"b": {"x", "b.x"}},
			view: map[string]want{
				"x":     {"b", "x"},
				"b.b.x": {"b", "b.x"},
			},
			calls: map[string]want{"b.x": {"b", "x"}},
		},
		{
			name:  "chain: c lists b.a.transfer, b lists a.transfer",
			tools: map[string][]string{"a": {"transfer"}, "b": {"a.transfer"}, "c": {"b.a.transfer"}},
			view: map[string]want{
				"transfer":       {"a", "transfer"},
				"b.a.transfer":   {"b", "a.transfer"},
				"c.b.a.transfer": {"c", "b.a.transfer"},
			},
		},
		{
			name:  "dotted name of no server keeps its name",
			tools: map[string][]string{"a": {"transfer"}, "b": {"zz.transfer"}},
			view: map[string]want{
				"transfer":    {"a", "transfer"},
				"zz.transfer": {"b", "zz.transfer"},
			},
		},
		{
			name:  "one server listing a name twice",
			tools: map[string][]string{"a": {"echo", "echo"}, "b": {"other"}},
			view: map[string]want{
				"a.echo": {"a", "echo"},
				"other":  {"b", "other"},
			},
		},
		{
			name:  "one server's view: the path names the server",
			tools: map[string][]string{"a": {"transfer"}, "b": {"transfer", "a.transfer"}},
			only:  "b",
			view: map[string]want{
				"transfer":   {"b", "transfer"},
				"a.transfer": {"b", "a.transfer"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var servers []registry.Server
			for _, n := range []string{"a", "b", "c"} {
				if _, ok := tc.tools[n]; ok {
					servers = append(servers, registry.Server{Tenant: "t", Name: n, URL: "https://" + n,
						Tools: map[string]registry.ToolSettings{"transfer": {RequiresApproval: n == "a"}}})
				}
			}
			c := NewCatalog(&regFake{servers: servers}, &listerFake{tools: tc.tools}, time.Minute, func() time.Time { return time.Unix(1000, 0) })
			ctx := context.Background()
			view, errs, err := c.View(ctx, "t", tc.only)
			if err != nil || len(errs) > 0 {
				t.Fatal(err, errs)
			}
			got := map[string]want{}
			var names []string
			for _, e := range view {
				if _, dup := got[e.Name]; dup {
					t.Errorf("tools/list has %q twice", e.Name)
				}
				got[e.Name] = want{e.Server.Name, e.Tool.Name}
				names = append(names, e.Name)
			}
			sort.Strings(names)
			if len(got) != len(tc.view) {
				t.Errorf("tools/list names %q; want %v", names, tc.view)
			}
			for n, w := range tc.view {
				if got[n] != w {
					t.Errorf("tools/list: %q is %v; want %v (names %q)", n, got[n], w, names)
				}
			}
			// Resolve agrees with the list, and with the further names.
			for n, w := range merge(tc.view, tc.calls) {
				e, ok, _, err := c.Resolve(ctx, "t", tc.only, n)
				if err != nil || !ok {
					t.Errorf("Resolve(%q) = %v, %v; want %v", n, ok, err, w)
					continue
				}
				if g := (want{e.Server.Name, e.Tool.Name}); g != w {
					t.Errorf("Resolve(%q) = %v; want %v", n, g, w)
				}
			}
		})
	}
}

func merge[K comparable, V any](a, b map[K]V) map[K]V {
	out := map[K]V{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// The call: "a.transfer" in the aggregate reaches server a's
// approval-gated transfer, with a's settings, not b's literal tool.
func TestQualifiedNameReachesItsToolWithItsSettings(t *testing.T) {
	servers := []registry.Server{
		{Tenant: "t", Name: "a", URL: "https://a", Tools: map[string]registry.ToolSettings{"transfer": {RequiresApproval: true}}},
		{Tenant: "t", Name: "b", URL: "https://b"},
	}
	cat := NewCatalog(&regFake{servers: servers}, &listerFake{tools: map[string][]string{"a": {"transfer"}, "b": {"transfer", "a.transfer"}}}, time.Minute, func() time.Time { return time.Unix(1000, 0) })
	c := &pipeline.Call{Method: "tools/call", Tenant: registry.Tenant{ID: "t"}, Tool: "a.transfer"}
	if err := NewCheck(cat).Check(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if c.Server == nil || c.Server.Name != "a" || c.UpstreamTool != "transfer" || !c.Settings.RequiresApproval {
		t.Fatalf("a.transfer routed to %v tool %q (approval %v); want server a's transfer, approval-gated", c.Server, c.UpstreamTool, c.Settings.RequiresApproval)
	}
}
