package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/store"
)

// ParamsKeys implements audit.KeyStore: the current key first, then the
// retired ones, newest first.
func (s *Store) ParamsKeys(context.Context) ([]audit.StoredKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.paramsKeys), nil
}

// InitParamsKey implements audit.KeyStore.
func (s *Store) InitParamsKey(_ context.Context, k audit.StoredKey) (audit.StoredKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.paramsKeys) == 0 {
		k.Retired = time.Time{}
		s.paramsKeys = []audit.StoredKey{k}
	}
	return s.paramsKeys[0], nil
}

// RotateParamsKey implements audit.KeyStore.
func (s *Store) RotateParamsKey(_ context.Context, prev string, next audit.StoredKey, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(s.paramsKeys) == 0:
		return store.ErrNotFound
	case s.paramsKeys[0].Key.ID() != prev:
		return store.ErrConflict
	}
	for _, k := range s.paramsKeys {
		if k.Key.ID() == next.Key.ID() {
			return store.ErrConflict
		}
	}
	keys := slices.Clone(s.paramsKeys)
	keys[0].Retired = now.UTC()
	next.Retired = time.Time{}
	s.paramsKeys = append([]audit.StoredKey{next}, keys...)
	return nil
}

var _ audit.KeyStore = (*Store)(nil)
