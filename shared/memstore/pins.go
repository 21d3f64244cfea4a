package memstore

import (
	"context"
	"slices"
	"sync"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// MaxPins caps the pins of all tenants; past it PinIfAbsent pins nothing
// new (it returns p unstored, so the entry is judged on first use again
// after a restart) and PutPin refuses with store.ErrConflict.
const MaxPins = 100_000

type pinKey struct{ tenant, server, kind, name string }

func keyOfPin(p registry.Pin) pinKey { return pinKey{p.Tenant, p.Server, p.Kind, p.Tool} }

// pinTable is the pins (registry.PinStore), under its own lock.
type pinTable struct {
	mu sync.Mutex
	m  map[pinKey]registry.Pin
}

// Pins implements registry.PinStore.
func (s *Store) Pins(_ context.Context, tenant, server string) ([]registry.Pin, error) {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	var out []registry.Pin
	for k, p := range s.pins.m {
		if k.tenant == tenant && (server == "" || k.server == server) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, registry.ComparePins)
	return out, nil
}

// PinIfAbsent implements registry.PinStore.
func (s *Store) PinIfAbsent(_ context.Context, p registry.Pin) (registry.Pin, error) {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	k := keyOfPin(p)
	if old, ok := s.pins.m[k]; ok {
		return old, nil
	}
	if s.pins.m == nil {
		s.pins.m = map[pinKey]registry.Pin{}
	}
	if len(s.pins.m) < MaxPins {
		s.pins.m[k] = p
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
	s.pins.m[k] = p
	return p, nil
}

// PutPin implements registry.PinStore.
func (s *Store) PutPin(_ context.Context, p registry.Pin) error {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	k := keyOfPin(p)
	if s.pins.m == nil {
		s.pins.m = map[pinKey]registry.Pin{}
	}
	if _, ok := s.pins.m[k]; !ok && len(s.pins.m) >= MaxPins {
		return store.ErrConflict
	}
	s.pins.m[k] = p
	return nil
}

// DeletePin implements registry.PinStore.
func (s *Store) DeletePin(_ context.Context, tenant, server, kind, name string) error {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	k := pinKey{tenant, server, kind, name}
	if _, ok := s.pins.m[k]; !ok {
		return store.ErrNotFound
	}
	delete(s.pins.m, k)
	return nil
}

var _ registry.PinStore = (*Store)(nil)
