package memstore

import (
	"context"
	"slices"
	"sync"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// MaxPins caps the pins of all tenants together, besides each tenant's
// bounds (registry.DefaultPinBounds): past
// either, a write that would add a pin fails with registry.ErrPinLimit
// and nothing is stored or dropped.
const MaxPins = 100_000

type pinKey struct{ tenant, server, kind, name string }

func keyOfPin(p registry.Pin) pinKey { return pinKey{p.Tenant, p.Server, p.Kind, p.Tool} }

// pinTable is the pins (registry.PinStore), under its own lock, with each
// tenant's tally (count, bytes, version).
type pinTable struct {
	mu      sync.Mutex
	m       map[pinKey]registry.Pin
	tallies map[string]registry.PinTally
	bounds  registry.PinBounds // zero: registry.DefaultPinBounds; lowered by tests
}

// Pins implements registry.PinStore.
func (s *Store) Pins(_ context.Context, tenant, server string) ([]registry.Pin, error) {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	return s.pins.list(tenant, server), nil
}

func (t *pinTable) list(tenant, server string) []registry.Pin {
	var out []registry.Pin
	for k, p := range t.m {
		if k.tenant == tenant && (server == "" || k.server == server) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, registry.ComparePins)
	return out
}

// set stores p in place of the pin at its key (old, had), within the
// bounds, and moves its tenant's tally on.
func (t *pinTable) set(p registry.Pin, old registry.Pin, had bool) error {
	dn, db := 1, registry.PinSize(p)
	if had {
		dn, db = 0, db-registry.PinSize(old)
	}
	tl := t.tallies[p.Tenant]
	if !tl.Fits(dn, db, t.bounds.OrDefault()) || dn > 0 && len(t.m) >= MaxPins {
		return registry.ErrPinLimit
	}
	if t.m == nil {
		t.m, t.tallies = map[pinKey]registry.Pin{}, map[string]registry.PinTally{}
	}
	t.m[keyOfPin(p)] = p
	t.tallies[p.Tenant] = registry.PinTally{Count: tl.Count + dn, Bytes: tl.Bytes + db, Version: tl.Version + 1}
	return nil
}

// PinIfAbsent implements registry.PinStore.
func (s *Store) PinIfAbsent(_ context.Context, p registry.Pin) (registry.Pin, error) {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	if old, ok := s.pins.m[keyOfPin(p)]; ok {
		return old, nil
	}
	if err := s.pins.set(p, registry.Pin{}, false); err != nil {
		return registry.Pin{}, err
	}
	return p, nil
}

// SwapPin implements registry.PinStore.
func (s *Store) SwapPin(_ context.Context, old, p registry.Pin) (registry.Pin, error) {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	k := keyOfPin(p)
	cur, ok := s.pins.m[k]
	switch {
	case !ok:
		return registry.Pin{}, store.ErrNotFound
	case keyOfPin(old) != k || cur.Hash != old.Hash || cur.By != old.By || !cur.At.Equal(old.At):
		return cur, nil
	}
	if err := s.pins.set(p, cur, true); err != nil {
		return registry.Pin{}, err
	}
	return p, nil
}

// PutPin implements registry.PinStore.
func (s *Store) PutPin(_ context.Context, p registry.Pin) error {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	old, had := s.pins.m[keyOfPin(p)]
	return s.pins.set(p, old, had)
}

// DeletePin implements registry.PinStore.
func (s *Store) DeletePin(_ context.Context, tenant, server, kind, name string) error {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	k := pinKey{tenant, server, kind, name}
	old, ok := s.pins.m[k]
	if !ok {
		return store.ErrNotFound
	}
	delete(s.pins.m, k)
	tl := s.pins.tallies[tenant]
	s.pins.tallies[tenant] = registry.PinTally{Count: tl.Count - 1, Bytes: tl.Bytes - registry.PinSize(old), Version: tl.Version + 1}
	return nil
}

// PinTally implements registry.PinStore.
func (s *Store) PinTally(_ context.Context, tenant string) (registry.PinTally, error) {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	return s.pins.tallies[tenant], nil
}

var _ registry.PinStore = (*Store)(nil)
