package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/breaker"
	"github.com/aegis-gw/aegis/shared/store"
)

// breakerState holds circuits and in-flight leases, apart from the
// registry's lock: both sit on every call.
type breakerState struct {
	mu       sync.Mutex
	circuits map[string]breaker.Circuit
	leases   map[string]map[string]time.Time // key → holder → expiry
}

// Circuit implements breaker.Store.
func (s *Store) Circuit(_ context.Context, key string) (breaker.Circuit, error) {
	b := &s.breaker
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.circuits[key]
	c.State = append([]byte(nil), c.State...)
	return c, nil
}

// PutCircuit implements breaker.Store.
func (s *Store) PutCircuit(_ context.Context, key string, c breaker.Circuit) error {
	b := &s.breaker
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.circuits == nil {
		b.circuits = map[string]breaker.Circuit{}
	}
	if b.circuits[key].Version != c.Version {
		return store.ErrConflict
	}
	c.State = append([]byte(nil), c.State...)
	c.Version++
	b.circuits[key] = c
	return nil
}

// AcquireLease implements breaker.Store.
func (s *Store) AcquireLease(_ context.Context, key, holder string, limit int, now, expires time.Time) (bool, error) {
	b := &s.breaker
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.leases == nil {
		b.leases = map[string]map[string]time.Time{}
	}
	m := b.leases[key]
	if m == nil {
		m = map[string]time.Time{}
		b.leases[key] = m
	}
	live := 0
	for h, exp := range m {
		if !exp.After(now) {
			delete(m, h) // a dead holder's slot
			continue
		}
		if h != holder {
			live++
		}
	}
	if live >= limit {
		return false, nil
	}
	m[holder] = expires
	return true, nil
}

// ReleaseLease implements breaker.Store.
func (s *Store) ReleaseLease(_ context.Context, key, holder string) error {
	b := &s.breaker
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.leases[key], holder)
	return nil
}

// InFlight implements breaker.Store.
func (s *Store) InFlight(_ context.Context, key string, now time.Time) (int, error) {
	b := &s.breaker
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, exp := range b.leases[key] {
		if exp.After(now) {
			n++
		}
	}
	return n, nil
}

var _ breaker.Store = (*Store)(nil)
