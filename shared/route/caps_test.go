package route

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// TestCatalogPerCapabilitySet: a server that lists "ask" only to clients
// that declared sampling is listed and resolved per set: the set with
// sampling sees it (by its own name, and on the aggregate), the empty set
// and a set without sampling do not; each set is listed once, and a
// Forget drops every set.
func TestCatalogPerCapabilitySet(t *testing.T) {
	now := time.Unix(1000, 0)
	reg := &regFake{servers: []registry.Server{{Tenant: "a", Name: "one", URL: "https://one"}}}
	l := &listerFake{tools: map[string][]string{"one": {"echo", "ask"}}, needs: map[string]upstream.Caps{"ask": upstream.CapSampling}}
	c := NewCatalog(reg, l, time.Minute, func() time.Time { return now })
	ctx := context.Background()
	names := func(caps upstream.Caps) string {
		v, errs, err := c.ViewFor(ctx, "a", "", caps)
		if err != nil || len(errs) > 0 {
			t.Fatal(err, errs)
		}
		var out []string
		for _, e := range v {
			out = append(out, e.Name)
		}
		return strings.Join(out, ",")
	}
	sampling := upstream.CapSampling | upstream.CapRoots
	for _, tc := range []struct {
		caps upstream.Caps
		want string
	}{{0, "echo"}, {upstream.CapRoots, "echo"}, {sampling, "echo,ask"}, {0, "echo"}, {sampling, "echo,ask"}} {
		if got := names(tc.caps); got != tc.want {
			t.Errorf("set %s lists %q, want %q", tc.caps.Tag(), got, tc.want)
		}
	}
	if l.calls != 3 {
		t.Errorf("%d listings for 3 sets, want 3 (asked %v)", l.calls, l.asked)
	}
	if _, ok, _, _ := c.ResolveFor(ctx, "a", "one", "ask", sampling); !ok {
		t.Error("ask not resolved for a client with sampling")
	}
	if _, ok, _, _ := c.ResolveFor(ctx, "a", "", "ask", upstream.CapRoots); ok {
		t.Error("ask resolved for a client without sampling")
	}
	if _, ok, _, _ := c.Resolve(ctx, "a", "", "ask"); ok {
		t.Error("ask resolved for a client of no capabilities")
	}
	before := l.calls
	c.Forget(&reg.servers[0])
	names(0)
	names(sampling)
	if l.calls != before+2 {
		t.Errorf("after Forget, %d listings, want 2 (every set dropped)", l.calls-before)
	}
}

// TestCatalogBounds: one server's lists are kept for at most MaxSets
// sets (the one fetched longest ago goes first), and all lists for at
// most MaxBytes of definitions.
func TestCatalogBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	reg := &regFake{servers: []registry.Server{{Tenant: "a", Name: "one", URL: "https://one"}}}
	l := &listerFake{tools: map[string][]string{"one": {"echo"}}}
	c := NewCatalog(reg, l, time.Minute, func() time.Time { return now })
	ctx := context.Background()
	for i := range MaxSets + 3 {
		now = now.Add(time.Millisecond)
		if _, _, err := c.ViewFor(ctx, "a", "", upstream.Caps(i)); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	n := len(c.entries)
	_, first := c.entries[cacheKey(&reg.servers[0], 0, "")]
	_, last := c.entries[cacheKey(&reg.servers[0], upstream.Caps(MaxSets+2), "")]
	c.mu.Unlock()
	if n != MaxSets || first || !last {
		t.Fatalf("%d lists kept (the first %v, the last %v), want %d, the oldest dropped", n, first, last, MaxSets)
	}

	// Bytes: two servers whose lists are each over half of MaxBytes.
	big := strings.Repeat("x", MaxBytes/2+1)
	reg = &regFake{servers: []registry.Server{{Tenant: "a", Name: "one", URL: "https://one"}, {Tenant: "a", Name: "two", URL: "https://two"}}}
	c = NewCatalog(reg, bigLister(big), time.Minute, func() time.Time { return now })
	for _, only := range []string{"one", "two"} {
		now = now.Add(time.Millisecond)
		if v, _, err := c.ViewFor(ctx, "a", only, 0); err != nil || len(v) != 1 {
			t.Fatal(v, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) != 1 || c.bytes > MaxBytes {
		t.Fatalf("%d lists of %d bytes kept, want 1 within %d", len(c.entries), c.bytes, MaxBytes)
	}
	if _, ok := c.entries[cacheKey(&reg.servers[1], 0, "")]; !ok {
		t.Fatal("the list just fetched was dropped")
	}
}

type bigLister string

func (b bigLister) ListTools(_ context.Context, srv *registry.Server, _ upstream.Caps) ([]Tool, error) {
	def, _ := json.Marshal(map[string]string{"name": "t", "description": string(b)})
	return []Tool{{Name: "t", Def: def}}, nil
}

// TestCheckRoutesByTheCallsSet: the route check resolves a tools/call in
// the catalog of the call's capability set: a 2026-07-28 call's _meta set
// (Call.Session.Capabilities) and a session's, from its id's tag.
func TestCheckRoutesByTheCallsSet(t *testing.T) {
	now := time.Unix(1000, 0)
	reg := &regFake{servers: []registry.Server{{Tenant: "a", Name: "one", URL: "https://one"}}}
	l := &listerFake{tools: map[string][]string{"one": {"echo", "ask"}}, needs: map[string]upstream.Caps{"ask": upstream.CapElicitForm}}
	k := NewCheck(NewCatalog(reg, l, time.Minute, func() time.Time { return now }))
	const id = "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name      string
		stateless bool
		session   string
		caps      string
		want      bool
	}{
		{"session without a tag", false, id, "", false},
		{"session tagged with elicitation", false, id + "-" + upstream.CapElicitForm.Tag(), "", true},
		{"session tagged with roots", false, id + "-" + upstream.CapRoots.Tag(), "", false},
		{"session with a malformed tag", false, id + "-zz", "", false},
		{"2026-07-28 with elicitation", true, "", `{"elicitation":{}}`, true},
		{"2026-07-28 with none", true, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &pipeline.Call{Method: "tools/call", Tool: "ask", SessionID: tc.session, Stateless: tc.stateless}
			c.Tenant.ID = "a"
			c.Session.Capabilities = tc.caps
			err := k.Check(context.Background(), c)
			if got := err == nil; got != tc.want {
				t.Fatalf("routed %v (%v), want %v", got, err, tc.want)
			}
			if tc.want && (c.Server == nil || c.Server.Name != "one") {
				t.Fatalf("routed to %v", c.Server)
			}
		})
	}
}

// TestViewRebuiltAfterARelistAtTheSameInstant: a view is reused only while
// its lists are the ones it was built from, even when a list is fetched
// again at the very instant of the last (a frozen clock): the catalog
// relisted by one view is seen by every other view of that server.
func TestViewRebuiltAfterARelistAtTheSameInstant(t *testing.T) {
	now := time.Unix(1000, 0)
	reg := &regFake{servers: []registry.Server{{Tenant: "a", Name: "one", URL: "https://one"}}}
	l := &listerFake{tools: map[string][]string{"one": {"old"}}}
	c := NewCatalog(reg, l, time.Minute, func() time.Time { return now })
	ctx := context.Background()
	if v, _, _ := c.View(ctx, "a", "one"); len(v) != 1 || v[0].Name != "old" {
		t.Fatal(v)
	}
	l.tools["one"] = []string{"new"}
	c.Forget(&reg.servers[0])
	if v, _, _ := c.View(ctx, "a", ""); len(v) != 1 || v[0].Name != "new" {
		t.Fatal(v)
	}
	if v, _, _ := c.View(ctx, "a", "one"); len(v) != 1 || v[0].Name != "new" {
		t.Fatalf("the server's own view is %v after the relist, want new", v)
	}
}
