package tenantview_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/testclock"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/tenantview"
)

// countingStore counts the views read (with and without pins) and the
// keys read; onView, when set, runs inside each view read.
type countingStore struct {
	*memstore.Store
	mu                sync.Mutex
	views, pinViews   int
	keys              int
	onView, onKeyRead func()
}

func (s *countingStore) TenantView(ctx context.Context, tenant string, pins bool) (tenantview.View, error) {
	s.mu.Lock()
	if pins {
		s.pinViews++
	} else {
		s.views++
	}
	f := s.onView
	s.mu.Unlock()
	if f != nil {
		f()
	}
	return s.Store.TenantView(ctx, tenant, pins)
}

func (s *countingStore) Key(ctx context.Context, id string) (registry.Key, error) {
	s.mu.Lock()
	s.keys++
	f := s.onKeyRead
	s.mu.Unlock()
	if f != nil {
		f()
	}
	return s.Store.Key(ctx, id)
}

// reads returns the views read without and with pins since the last call.
func (s *countingStore) reads() (views, pinViews int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	views, pinViews = s.views, s.pinViews
	s.views, s.pinViews = 0, 0
	return views, pinViews
}

// pinPart is a Part that keeps what it was filled with.
type pinPart struct {
	life  time.Duration
	mu    sync.Mutex
	at    map[string]time.Time
	pins  []registry.Pin
	fills int
}

func (p *pinPart) Due(tenant string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.at[tenant]
	return !ok || now.Sub(at) >= p.life
}

func (p *pinPart) Fill(tenant string, v *tenantview.View, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.at[tenant] = at
	p.fills++
	if v.PinsRead {
		p.pins = v.Pins
	}
}

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func setup(t *testing.T) (*countingStore, *testclock.Clock, registry.Key) {
	t.Helper()
	ctx := context.Background()
	st := &countingStore{Store: memstore.New()}
	must(t, st.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierFree, Created: t0}))
	must(t, st.PutServer(ctx, registry.Server{Tenant: "acme", Name: "tools", URL: "http://127.0.0.1:1/mcp", Created: t0}))
	k := registry.Key{ID: "k1", Tenant: "acme", Caller: "agent", Hash: "h", Created: t0}
	must(t, st.PutKey(ctx, k))
	return st, testclock.New(t0), k
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestOneReadFillsEveryPart: a tenant's record, servers, stops and pins
// come from one read that fills every part; each part's lifetime is kept
// (a stop is in force within the kill switch's refresh, read through the
// view); pins are read again only when their tally's version moved on
// by a write of someone else.
func TestOneReadFillsEveryPart(t *testing.T) {
	ctx := context.Background()
	st, clock, _ := setup(t)
	stops := killswitch.New(st, 2*time.Second, clock.Now, nil)
	pins := &pinPart{life: 5 * time.Second, at: map[string]time.Time{}}
	c := tenantview.NewCache(st, tenantview.Options{TTL: 10 * time.Second, MaxStale: time.Minute, Now: clock.Now})
	c.AddPart(stopsPart{stops})
	c.AddPart(pins)

	if _, err := c.Tenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if sv, err := c.Servers(ctx, "acme"); err != nil || len(sv) != 1 {
		t.Fatalf("Servers = %v, %v", sv, err)
	}
	if v, p := st.reads(); v != 0 || p != 1 {
		t.Fatalf("first use: %d views, %d with pins; want one with pins", v, p)
	}
	// Within every lifetime: no read.
	clock.Advance(time.Second)
	c.Servers(ctx, "acme")
	if v, p := st.reads(); v+p != 0 {
		t.Fatalf("within the lifetimes: %d reads, want none", v+p)
	}

	// A stop written now is in force within the kill switch's 2 s, read
	// by the view (the kill switch reads nothing itself).
	must(t, st.PutStop(ctx, killswitch.Stop{Tenant: "acme", Server: "tools", Tool: "rm", At: clock.Now()}))
	clock.Advance(time.Second) // the stops were read 2 s ago
	c.Tenant(ctx, "acme")
	if v, p := st.reads(); v != 1 || p != 0 {
		t.Fatalf("stops due: %d views, %d with pins; want one without pins (the tally says they are unchanged)", v, p)
	}
	if stopped, err := stops.Stopped(ctx, "acme", "tools", "rm"); err != nil || !stopped {
		t.Fatalf("the stop is not in force after the kill switch's refresh: %v, %v", stopped, err)
	}

	// A pin written by another instance: the next read sees the tally
	// moved on and reads the pins (two reads, once).
	must(t, st.PutPin(ctx, registry.Pin{Tenant: "acme", Server: "tools", Tool: "add", Hash: "sha256:aa", By: "ops", At: t0}))
	clock.Advance(2 * time.Second)
	c.Tenant(ctx, "acme")
	if v, p := st.reads(); v != 1 || p != 1 {
		t.Fatalf("after another's pin: %d views, %d with pins; want one of each", v, p)
	}
	if len(pins.pins) != 1 || pins.pins[0].Tool != "add" {
		t.Fatalf("the pins part holds %+v, want the new pin", pins.pins)
	}

	// A pin written through the cache (this instance's first use): the
	// tally moved on by this instance's write alone; no pin read.
	if _, err := c.PinIfAbsent(ctx, registry.Pin{Tenant: "acme", Server: "tools", Tool: "echo", Hash: "sha256:bb", By: registry.PinnedOnFirstUse, At: t0}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	c.Tenant(ctx, "acme")
	if v, p := st.reads(); v != 1 || p != 0 {
		t.Fatalf("after our own pin: %d views, %d with pins; want one without", v, p)
	}
	// Ours and someone else's: the count does not add up, pins are read.
	if _, err := c.PinIfAbsent(ctx, registry.Pin{Tenant: "acme", Server: "tools", Tool: "e2", Hash: "sha256:cc", By: registry.PinnedOnFirstUse, At: t0}); err != nil {
		t.Fatal(err)
	}
	must(t, st.DeletePin(ctx, "acme", "tools", registry.PinTool, "add"))
	clock.Advance(2 * time.Second)
	c.Tenant(ctx, "acme")
	if v, p := st.reads(); v != 1 || p != 1 {
		t.Fatalf("after ours and another's: %d views, %d with pins; want one of each", v, p)
	}
	if len(pins.pins) != 2 {
		t.Fatalf("the pins part holds %+v, want echo and e2", pins.pins)
	}
}

// TestWriteDuringReadRereadsPins: a pin write of this instance that is in
// flight while the view is read may or may not be in it; the pins are
// read again at the next refresh rather than taken for current.
func TestWriteDuringReadRereadsPins(t *testing.T) {
	ctx := context.Background()
	st, clock, _ := setup(t)
	pins := &pinPart{life: 5 * time.Second, at: map[string]time.Time{}}
	c := tenantview.NewCache(st, tenantview.Options{TTL: 10 * time.Second, MaxStale: time.Minute, Now: clock.Now}, pins)
	c.Tenant(ctx, "acme")
	st.reads()
	clock.Advance(6 * time.Second)
	st.onView = func() {
		st.onView = nil
		if _, err := c.PinIfAbsent(ctx, registry.Pin{Tenant: "acme", Server: "tools", Tool: "echo", Hash: "sha256:bb", By: registry.PinnedOnFirstUse, At: t0}); err != nil {
			t.Error(err)
		}
	}
	c.Tenant(ctx, "acme")
	if v, p := st.reads(); v != 1 || p != 1 {
		t.Fatalf("a write during the read: %d views, %d with pins; want the pins read after the view", v, p)
	}
	clock.Advance(6 * time.Second)
	c.Tenant(ctx, "acme")
	// The pin read itself ran after the write had finished: current.
	if v, p := st.reads(); v != 1 || p != 0 {
		t.Fatalf("next refresh: %d views, %d with pins; want one without", v, p)
	}
}

// TestStaleKeyReadWithView: a key older than the TTL, of a tenant whose
// view is due, is read while the view is read (the key read waits for
// the view read to start: it would time out if they ran one after the
// other); a fresh key reads nothing.
func TestStaleKeyReadWithView(t *testing.T) {
	ctx := context.Background()
	st, clock, k := setup(t)
	c := tenantview.NewCache(st, tenantview.Options{TTL: 10 * time.Second, MaxStale: time.Minute, Now: clock.Now})
	if _, err := c.Key(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	c.Tenant(ctx, "acme")
	clock.Advance(11 * time.Second)
	started := make(chan struct{})
	st.onView = func() { close(started) }
	st.onKeyRead = func() {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Error("the key was read before the view's read started: not in parallel")
		}
	}
	got, err := c.Key(ctx, k.ID)
	if err != nil || got.Tenant != "acme" {
		t.Fatalf("Key = %+v, %v", got, err)
	}
	st.onView, st.onKeyRead = nil, nil
	st.reads()
	if _, err := c.Tenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if v, p := st.reads(); v+p != 0 {
		t.Fatalf("Tenant after the parallel read: %d reads, want none", v+p)
	}
	keys := st.keys
	c.Key(ctx, k.ID)
	if st.keys != keys {
		t.Fatal("a fresh key was read again")
	}
}

// stopsPart is the kill switch as a Part (as the gateway wires it).
type stopsPart struct{ k *killswitch.Check }

func (p stopsPart) Due(tenant string, now time.Time) bool { return p.k.Due(tenant, now) }
func (p stopsPart) Fill(tenant string, v *tenantview.View, at time.Time) {
	p.k.Fill(tenant, v.Stops, at)
}
