package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// testTenantView: one TenantView read gives a tenant's record, servers,
// stops and pin tally, and its pins when asked, nothing of another
// tenant and nothing else of its own (keys, policy); an unknown tenant
// is not found.
func testTenantView(t *testing.T, nb NewBackend) {
	b, c := nb(t, Options{}), ctx(t)
	if v, err := b.TenantView(c, "nobody", true); err != nil || v.Found {
		t.Fatalf("TenantView(unknown) = %+v, %v; want not found", v, err)
	}
	for _, id := range []string{"acme", "acme2"} {
		must(t, b.PutTenant(c, registry.Tenant{ID: id, Tier: registry.TierFree, Created: t0}))
		must(t, b.PutServer(c, registry.Server{Tenant: id, Name: "tools", URL: "http://127.0.0.1:1/mcp", Created: t0}))
	}
	must(t, b.PutServer(c, registry.Server{Tenant: "acme", Name: "docs", URL: "http://127.0.0.1:2/mcp", Created: t0}))
	must(t, b.PutStop(c, killswitch.Stop{Tenant: "acme", Server: "tools", Tool: "rm", By: "ops", At: t0}))
	must(t, b.PutKey(c, registry.Key{ID: "k1", Tenant: "acme", Caller: "agent", Hash: strings.Repeat("a", 64), Created: t0}))
	must(t, b.PutPolicy(c, registry.Policy{Tenant: "acme", Source: "roles: {}\n", Updated: t0}))
	v, err := b.TenantView(c, "acme", false)
	if err != nil || !v.Found || v.Tenant.ID != "acme" || len(v.Servers) != 2 || len(v.Stops) != 1 || v.Stops[0].Tool != "rm" || v.PinsRead || len(v.Pins) != 0 {
		t.Fatalf("TenantView(acme) = %+v, %v; want acme, 2 servers, 1 stop, no pins", v, err)
	}
	if v.Tally != (registry.PinTally{}) {
		t.Fatalf("tally of a tenant without pins = %+v, want zero", v.Tally)
	}
	p1 := registry.Pin{Tenant: "acme", Server: "tools", Tool: "add", Hash: "sha256:aa", By: registry.PinnedOnFirstUse, At: t0}
	p2 := registry.Pin{Tenant: "acme", Server: "docs", Kind: registry.PinPrompt, Tool: "greet", Hash: "sha256:bb", By: "ops", At: t0}
	if _, err := b.PinIfAbsent(c, p1); err != nil {
		t.Fatal(err)
	}
	must(t, b.PutPin(c, p2))
	must(t, b.PutPin(c, registry.Pin{Tenant: "acme2", Server: "tools", Tool: "add", Hash: "sha256:cc", By: "ops", At: t0}))
	v, err = b.TenantView(c, "acme", true)
	want := registry.PinTally{Count: 2, Bytes: registry.PinSize(p1) + registry.PinSize(p2), Version: v.Tally.Version}
	if err != nil || !v.PinsRead || len(v.Pins) != 2 || v.Pins[0].Server != "docs" || v.Pins[1].Tool != "add" || v.Tally != want || v.Tally.Version < 2 {
		t.Fatalf("TenantView(acme, pins) = %+v, %v; want docs/greet, tools/add, tally %+v (version >= 2)", v, err, want)
	}
	if tl, err := b.PinTally(c, "acme"); err != nil || tl != v.Tally {
		t.Fatalf("PinTally = %+v, %v; want the view's %+v", tl, err, v.Tally)
	}
}

// NewBoundedPinStore returns an empty pin store for one test whose
// tenants' pins are bounded by b.
type NewBoundedPinStore func(t *testing.T, b registry.PinBounds) registry.PinStore

// PinBounds is the contract of the per-tenant pin bounds
// (registry.PinBounds), run on both stores with lowered bounds: the tally
// counts pins and bytes, its version moves on with every write that
// lands and with none that does not; a write past a bound fails with
// registry.ErrPinLimit and changes nothing; deleting pins makes room;
// replacing a pin at the count bound is allowed; other tenants are not
// affected.
func PinBounds(t *testing.T, nps NewBoundedPinStore) {
	bounds := registry.PinBounds{Count: 20, Bytes: 8 << 10}
	s, c := nps(t, bounds), ctx(t)
	pin := func(tenant, tool string, defBytes int) registry.Pin {
		def, _ := json.Marshal(map[string]string{"name": tool, "description": strings.Repeat("x", defBytes)})
		return registry.Pin{Tenant: tenant, Server: "tools", Tool: tool, Hash: "sha256:" + tool, Def: def, By: "ops", At: t0}
	}
	tally := func(tenant string) registry.PinTally {
		t.Helper()
		tl, err := s.PinTally(c, tenant)
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	// Bytes: pins of about 1.5 KB each, until the next does not fit.
	var bytes, n int
	for i := 0; ; i++ {
		p := pin("big", fmt.Sprintf("t%d", i), 1500)
		before := tally("big")
		err := s.PutPin(c, p)
		if bytes+registry.PinSize(p) > bounds.Bytes {
			if !errors.Is(err, registry.ErrPinLimit) || !errors.Is(err, store.ErrConflict) {
				t.Fatalf("PutPin past %d bytes = %v; want registry.ErrPinLimit", bounds.Bytes, err)
			}
			if got, err := s.PinIfAbsent(c, p); !errors.Is(err, registry.ErrPinLimit) {
				t.Fatalf("PinIfAbsent past the bytes = %+v, %v; want registry.ErrPinLimit", got, err)
			}
			if after := tally("big"); after != before {
				t.Fatalf("a refused write moved the tally: %+v, then %+v", before, after)
			}
			if list, _ := s.Pins(c, "big", ""); len(list) != n {
				t.Fatalf("%d pins after a refused write, want %d", len(list), n)
			}
			break
		}
		if err != nil {
			t.Fatalf("PutPin %d: %v", i, err)
		}
		bytes += registry.PinSize(p)
		n++
		if got := tally("big"); got.Count != n || got.Bytes != bytes || got.Version != before.Version+1 {
			t.Fatalf("tally after %d pins = %+v; want %d pins, %d bytes, version %d", n, got, n, bytes, before.Version+1)
		}
	}
	// A smaller pin still fits; deleting one makes room for a big one.
	if _, err := s.PinIfAbsent(c, pin("big", "small", 10)); err != nil {
		t.Fatalf("a small pin under the bound: %v", err)
	}
	must(t, s.DeletePin(c, "big", "tools", registry.PinTool, "t0"))
	if err := s.PutPin(c, pin("big", "again", 1500)); err != nil {
		t.Fatalf("PutPin after a delete made room: %v", err)
	}

	// Count: bounds.Count small pins, pinned at once, then no more.
	var wg sync.WaitGroup
	errs := make(chan error, bounds.Count)
	for i := range bounds.Count {
		wg.Go(func() {
			if _, err := s.PinIfAbsent(c, pin("many", fmt.Sprintf("t%d", i), 1)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("pin under the count bound: %v", err)
	}
	if got := tally("many"); got.Count != bounds.Count || got.Version != int64(bounds.Count) {
		t.Fatalf("tally after %d pins = %+v", bounds.Count, got)
	}
	if _, err := s.PinIfAbsent(c, pin("many", "one-more", 1)); !errors.Is(err, registry.ErrPinLimit) {
		t.Fatalf("PinIfAbsent past %d pins = %v; want registry.ErrPinLimit", bounds.Count, err)
	}
	// Past the bound by many at once: none lands.
	errs = make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, err := s.PinIfAbsent(c, pin("many", fmt.Sprintf("over%d", i), 1))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, registry.ErrPinLimit) {
			t.Fatalf("PinIfAbsent past the bound, at once = %v; want registry.ErrPinLimit", err)
		}
	}
	// Replacing a pin at the count bound adds none: allowed.
	if err := s.PutPin(c, pin("many", "t1", 2)); err != nil {
		t.Fatalf("replacing a pin at the count bound: %v", err)
	}
	if got := tally("many"); got.Count != bounds.Count {
		t.Fatalf("tally after a replacement = %+v, want %d pins", got, bounds.Count)
	}
	// Another tenant is not affected.
	if _, err := s.PinIfAbsent(c, pin("other", "t1", 1)); err != nil {
		t.Fatalf("another tenant's pin: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
