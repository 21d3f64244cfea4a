package memstore

import (
	"context"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// Policy implements registry.PolicyStore.
func (s *Store) Policy(_ context.Context, tenant string) (registry.Policy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tenants[tenant]
	if !ok || t.policy == nil {
		return registry.Policy{}, store.ErrNotFound
	}
	return *t.policy, nil
}

// PutPolicy implements registry.PolicyStore: the tenant must exist.
func (s *Store) PutPolicy(_ context.Context, p registry.Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tenants[p.Tenant]
	if !ok {
		return store.ErrNotFound
	}
	t.policy = &p
	s.tenants[p.Tenant] = t
	return nil
}

var _ registry.PolicyStore = (*Store)(nil)
