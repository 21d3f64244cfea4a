package memstore

import (
	"context"
	"sort"
	"sync"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// MaxPins caps the pins of all tenants; past it PinIfAbsent pins nothing
// new (it returns p unstored, so the tool is judged on first use again
// after a restart) and PutPin refuses with store.ErrConflict.
const MaxPins = 100_000

type pinKey struct{ tenant, server, tool string }

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
	sort.Slice(out, func(i, j int) bool {
		if out[i].Server != out[j].Server {
			return out[i].Server < out[j].Server
		}
		return out[i].Tool < out[j].Tool
	})
	return out, nil
}

// PinIfAbsent implements registry.PinStore.
func (s *Store) PinIfAbsent(_ context.Context, p registry.Pin) (registry.Pin, error) {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	k := pinKey{p.Tenant, p.Server, p.Tool}
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

// PutPin implements registry.PinStore.
func (s *Store) PutPin(_ context.Context, p registry.Pin) error {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	k := pinKey{p.Tenant, p.Server, p.Tool}
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
func (s *Store) DeletePin(_ context.Context, tenant, server, tool string) error {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	k := pinKey{tenant, server, tool}
	if _, ok := s.pins.m[k]; !ok {
		return store.ErrNotFound
	}
	delete(s.pins.m, k)
	return nil
}

var _ registry.PinStore = (*Store)(nil)
