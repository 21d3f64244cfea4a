package storetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/policy"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

// RunPolicy is the contract of the policy concerns: each tenant's policy
// set (registry.PolicyStore), the key record's roles and manifest, and the
// session manifest's counters (session.Counter). Both stores' contract
// tests run it beside Run.
func RunPolicy(t *testing.T, nb NewBackend) {
	t.Run("policyset", func(t *testing.T) { testPolicySet(t, nb) })
	t.Run("keyroles", func(t *testing.T) { testKeyRoles(t, nb) })
	t.Run("sessioncount", func(t *testing.T) { testSessionCount(t, nb) })
	t.Run("sessionreserve", func(t *testing.T) { testSessionReserve(t, nb) })
	t.Run("sessionmanifest", func(t *testing.T) { testSessionManifest(t, nb) })
}

func testPolicySet(t *testing.T, nb NewBackend) {
	b, c := nb(t, Options{}), ctx(t)
	if _, err := b.Policy(c, "acme"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Policy(no tenant) err = %v, want ErrNotFound", err)
	}
	p := registry.Policy{Tenant: "acme", Source: "policy_mode: audit\n", Updated: t0}
	if err := b.PutPolicy(c, p); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PutPolicy(no tenant) err = %v, want ErrNotFound", err)
	}
	if err := b.PutTenant(c, registry.Tenant{ID: "acme", Tier: registry.TierFree, Created: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Policy(c, "acme"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Policy(none stored) err = %v, want ErrNotFound", err)
	}
	if err := b.PutPolicy(c, p); err != nil {
		t.Fatal(err)
	}
	got, err := b.Policy(c, "acme")
	if err != nil || got.Tenant != p.Tenant || got.Source != p.Source || !got.Updated.Equal(p.Updated) {
		t.Fatalf("Policy = %+v, %v; want %+v", got, err, p)
	}
	// Replaced whole; a tenant written again keeps its set.
	p.Source, p.Updated = "roles: {ops: {allow: [\"*/*\"]}}\n", t0.Add(time.Minute)
	if err := b.PutPolicy(c, p); err != nil {
		t.Fatal(err)
	}
	if err := b.PutTenant(c, registry.Tenant{ID: "acme", Tier: registry.TierGrowth, Created: t0}); err != nil {
		t.Fatal(err)
	}
	if got, err = b.Policy(c, "acme"); err != nil || got.Source != p.Source {
		t.Fatalf("Policy after replace = %+v, %v; want %q", got, err, p.Source)
	}
	// One tenant's set is not another's.
	if err := b.PutTenant(c, registry.Tenant{ID: "beta", Tier: registry.TierFree, Created: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Policy(c, "beta"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Policy(beta) err = %v, want ErrNotFound", err)
	}
	big := registry.Policy{Tenant: "acme", Source: string(make([]byte, registry.MaxPolicyBytes+1))}
	if err := b.PutPolicy(c, big); err == nil {
		t.Fatal("PutPolicy over MaxPolicyBytes: no error")
	}
}

func testKeyRoles(t *testing.T, nb NewBackend) {
	b, c := nb(t, Options{}), ctx(t)
	if err := b.PutTenant(c, registry.Tenant{ID: "acme", Tier: registry.TierFree, Created: t0}); err != nil {
		t.Fatal(err)
	}
	k := registry.Key{ID: "k1abcd", Tenant: "acme", Caller: "agent", Hash: "h", Created: t0,
		Roles: []string{"ops", "reader"}, Manifest: &policy.Manifest{MaxToolCalls: 3, Grants: map[string][]string{"tools/call": {"mock/*"}}}}
	if err := b.PutKey(c, k); err != nil {
		t.Fatal(err)
	}
	got, err := b.Key(c, "k1abcd")
	if err != nil || !slices.Equal(got.Roles, k.Roles) || got.Manifest == nil || got.Manifest.MaxToolCalls != 3 ||
		!slices.Equal(got.Manifest.Grants["tools/call"], []string{"mock/*"}) {
		t.Fatalf("Key = %+v, %v; want roles %v and the manifest", got, err, k.Roles)
	}
}

func testSessionCount(t *testing.T, nb NewBackend) {
	b, c := nb(t, Options{}), ctx(t)
	if err := b.Count(c, "acme", "nope", session.Use{At: t0, ToolCall: true}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Count(unknown session) err = %v, want ErrNotFound", err)
	}
	if err := b.Create(c, session.Record{ID: "s1", Tenant: "acme", Caller: "agent", Created: t0, LastSeen: t0}); err != nil {
		t.Fatal(err)
	}
	l := session.Limits{Lifetime: time.Hour}
	got, err := b.Touch(c, "acme", "s1", t0, l)
	if err != nil || got.ToolCalls != 0 || len(got.Steps) != 0 || !got.LastAllowed.IsZero() {
		t.Fatalf("fresh session = %+v, %v; want no counts", got, err)
	}
	at := t0.Add(time.Second)
	for _, u := range []session.Use{
		{At: t0, ToolCall: true, Step: 1, Declared: true},
		{At: at, ToolCall: true, Step: 1, Declared: true}, // a step seen already
		{At: at, ToolCall: true, Step: 2, Declared: true},
		{At: at, ToolCall: true},  // no step declared
		{At: at, ToolCall: false}, // not a tools/call: the clock only
	} {
		if err := b.Count(c, "acme", "s1", u); err != nil {
			t.Fatal(err)
		}
	}
	got, err = b.Touch(c, "acme", "s1", at, l)
	steps := slices.Clone(got.Steps)
	slices.Sort(steps)
	if err != nil || got.ToolCalls != 4 || !slices.Equal(steps, []int64{1, 2}) || !got.LastAllowed.Equal(at) {
		t.Fatalf("after counting = calls %d steps %v last %v, %v; want 4 [1 2] %v", got.ToolCalls, got.Steps, got.LastAllowed, err, at)
	}

	// Concurrent counts lose nothing.
	if err := b.Create(c, session.Record{ID: "s2", Tenant: "acme", Caller: "agent", Created: t0, LastSeen: t0}); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := b.Count(c, "acme", "s2", session.Use{At: at, ToolCall: true, Step: int64(i % 4), Declared: true}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err = b.Touch(c, "acme", "s2", at, l)
	if err != nil || got.ToolCalls != n || len(got.Steps) != 4 {
		t.Fatalf("after %d concurrent counts = calls %d steps %v, %v; want %d and 4 steps", n, got.ToolCalls, got.Steps, err, n)
	}
}

// testSessionReserve: Reserve is a bound under concurrency, Release gives
// back, and both know a missing session.
func testSessionReserve(t *testing.T, nb NewBackend) {
	b, c := nb(t, Options{}), ctx(t)
	if _, _, err := b.Reserve(c, "acme", "nope", 3); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Reserve(unknown session) err = %v, want ErrNotFound", err)
	}
	if err := b.Release(c, "acme", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Release(unknown session) err = %v, want ErrNotFound", err)
	}
	if err := b.Create(c, session.Record{ID: "r1", Tenant: "acme", Caller: "agent", Created: t0, LastSeen: t0}); err != nil {
		t.Fatal(err)
	}
	// Another tenant's session of the same id is not this one.
	if _, _, err := b.Reserve(c, "beta", "r1", 3); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Reserve(other tenant) err = %v, want ErrNotFound", err)
	}
	if err := b.Release(c, "acme", "r1"); err != nil { // at zero: nothing to give back
		t.Fatal(err)
	}
	const limit, callers = 5, 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	var befores []int
	for range callers {
		wg.Go(func() {
			before, ok, err := b.Reserve(c, "acme", "r1", limit)
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				mu.Lock()
				befores = append(befores, before)
				mu.Unlock()
			} else if before < limit {
				t.Errorf("refused at %d, below the limit %d", before, limit)
			}
		})
	}
	wg.Wait()
	slices.Sort(befores)
	if !slices.Equal(befores, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("%d concurrent Reserves under limit %d: the counts before the granted ones = %v, want [0 1 2 3 4]", callers, limit, befores)
	}
	l := session.Limits{Lifetime: time.Hour}
	if got, err := b.Touch(c, "acme", "r1", t0, l); err != nil || got.ToolCalls != limit {
		t.Fatalf("after the reserves: calls %d, %v; want %d", got.ToolCalls, err, limit)
	}
	// Two given back: two more fit, and then none.
	for range 2 {
		if err := b.Release(c, "acme", "r1"); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []bool{true, true, false} {
		before, ok, err := b.Reserve(c, "acme", "r1", limit)
		if err != nil || ok != want || before != limit-2+min(i, 2) {
			t.Fatalf("reserve %d after two releases = %d, %v, %v; want ok %v", i, before, ok, err, want)
		}
	}
	// A reserved call is counted once: Count without ToolCall keeps it.
	if err := b.Count(c, "acme", "r1", session.Use{At: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Touch(c, "acme", "r1", t0, l); err != nil || got.ToolCalls != limit || !got.LastAllowed.Equal(t0.Add(time.Second)) {
		t.Fatalf("after Count = calls %d last %v, %v; want %d", got.ToolCalls, got.LastAllowed, err, limit)
	}
	// No limit: every reserve is granted.
	if before, ok, err := b.Reserve(c, "acme", "r1", 0); err != nil || !ok || before != limit {
		t.Fatalf("Reserve(no limit) = %d, %v, %v", before, ok, err)
	}
}

// testSessionManifest: a session's declared manifest is kept with its
// record and comes back from Touch, through the counters' writes.
func testSessionManifest(t *testing.T, nb NewBackend) {
	b, c := nb(t, Options{}), ctx(t)
	const m = `{"grants":{"tools/call":["mock/echo"]},"max_tool_calls":3}`
	if err := b.Create(c, session.Record{ID: "m1", Tenant: "acme", Caller: "agent", Created: t0, LastSeen: t0, Manifest: m}); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(c, session.Record{ID: "m2", Tenant: "acme", Caller: "agent", Created: t0, LastSeen: t0}); err != nil {
		t.Fatal(err)
	}
	if err := b.Count(c, "acme", "m1", session.Use{At: t0, ToolCall: true}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Reserve(c, "acme", "m1", 3); err != nil {
		t.Fatal(err)
	}
	l := session.Limits{Lifetime: time.Hour}
	if got, err := b.Touch(c, "acme", "m1", t0, l); err != nil || got.Manifest != m || got.ToolCalls != 2 {
		t.Fatalf("Touch = manifest %q calls %d, %v; want %q and 2", got.Manifest, got.ToolCalls, err, m)
	}
	if got, err := b.Touch(c, "acme", "m2", t0, l); err != nil || got.Manifest != "" {
		t.Fatalf("Touch(no manifest) = %q, %v", got.Manifest, err)
	}
}
