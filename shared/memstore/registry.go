package memstore

import (
	"context"
	"sort"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

type tenantRec struct {
	t       registry.Tenant
	servers map[string]registry.Server
	policy  *registry.Policy // policy.go; nil: none stored
}

type keyRec = registry.Key

// Key implements registry.Reader.
func (s *Store) Key(_ context.Context, id string) (registry.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[id]
	if !ok {
		return registry.Key{}, store.ErrNotFound
	}
	return k, nil
}

// Tenant implements registry.Reader.
func (s *Store) Tenant(_ context.Context, id string) (registry.Tenant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tenants[id]
	if !ok {
		return registry.Tenant{}, store.ErrNotFound
	}
	return t.t, nil
}

// Servers implements registry.Reader; servers come sorted by name.
func (s *Store) Servers(_ context.Context, tenant string) ([]registry.Server, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tenants[tenant]
	if !ok {
		return nil, nil
	}
	out := make([]registry.Server, 0, len(t.servers))
	for _, sv := range t.servers {
		out = append(out, sv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// PutTenant implements registry.Writer.
func (s *Store) PutTenant(_ context.Context, t registry.Tenant) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.tenants[t.ID]
	r.t = t
	if r.servers == nil {
		r.servers = map[string]registry.Server{}
	}
	s.tenants[t.ID] = r
	return nil
}

// ListTenants implements registry.Writer; sorted by id.
func (s *Store) ListTenants(_ context.Context) ([]registry.Tenant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]registry.Tenant, 0, len(s.tenants))
	for _, t := range s.tenants {
		out = append(out, t.t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// PutServer implements registry.Writer; the tenant must exist.
func (s *Store) PutServer(_ context.Context, sv registry.Server) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tenants[sv.Tenant]
	if !ok {
		return store.ErrNotFound
	}
	t.servers[sv.Name] = sv
	return nil
}

// DeleteServer implements registry.Writer.
func (s *Store) DeleteServer(_ context.Context, tenant, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tenants[tenant]; ok {
		delete(t.servers, name)
	}
	return nil
}

// PutKey implements registry.Writer.
func (s *Store) PutKey(_ context.Context, k registry.Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[k.ID] = k
	return nil
}

// ListKeys implements registry.Writer; sorted by id.
func (s *Store) ListKeys(_ context.Context, tenant string) ([]registry.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []registry.Key
	for _, k := range s.keys {
		if k.Tenant == tenant {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// RevokeKey implements registry.Writer.
func (s *Store) RevokeKey(_ context.Context, tenant, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[id]
	if !ok || k.Tenant != tenant {
		return store.ErrNotFound
	}
	k.Revoked = true
	s.keys[id] = k
	return nil
}

var _ registry.Store = (*Store)(nil)
