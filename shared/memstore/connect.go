package memstore

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/store"
)

// Caps of the connections (connect.Store). A connection over either cap is
// refused (store.ErrUnavailable), never made by dropping another caller's
// grant; a pending authorization over MaxPending is refused after the
// expired ones are swept (the call is asked again later).
const (
	MaxConnections     = 100_000
	MaxConnectionBytes = 64 << 20
	MaxPending         = 10_000
	// MaxRegistrations and MaxRegistrationBytes bound the clients aegis
	// registered (connect.Registration): over either a new one is refused.
	MaxRegistrations     = 10_000
	MaxRegistrationBytes = 16 << 20
	// connOverhead is the fixed part of a connection's byte estimate.
	connOverhead = 256
)

type connKey struct{ tenant, caller, server string }

type pendingKey struct{ tenant, state string }

type regKey struct{ tenant, server, issuer string }

// connTable is the connections and pending authorizations, own lock.
type connTable struct {
	mu      sync.Mutex
	m       map[connKey]connect.Connection
	bytes   int
	pending map[pendingKey]connect.Pending
	regs    map[regKey]connect.Registration
	regSize int
}

func regBytes(r connect.Registration) int {
	return connOverhead + len(r.Tenant) + len(r.Server) + len(r.Issuer) + len(r.ClientID) + len(r.Sealed)
}

func connBytes(c connect.Connection) int {
	return connOverhead + len(c.ID) + len(c.Tenant) + len(c.Caller) + len(c.Server) + len(c.Issuer) + len(c.Scope) + len(c.Sealed)
}

// Connection implements connect.Store.
func (s *Store) Connection(_ context.Context, tenant, caller, server string) (connect.Connection, error) {
	t := &s.conns
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.m[connKey{tenant, caller, server}]
	if !ok {
		return connect.Connection{}, store.ErrNotFound
	}
	c.Sealed = slices.Clone(c.Sealed)
	return c, nil
}

// PutConnection implements connect.Store.
func (s *Store) PutConnection(_ context.Context, c connect.Connection) error {
	t := &s.conns
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[connKey]connect.Connection{}
	}
	k := connKey{c.Tenant, c.Caller, c.Server}
	old, ok := t.m[k]
	switch {
	case ok && old.Version != c.Version-1, !ok && c.Version != 1:
		return store.ErrConflict
	}
	n := connBytes(c)
	grow := n
	if ok {
		grow -= connBytes(old)
	}
	if (!ok && len(t.m) >= MaxConnections) || t.bytes+grow > MaxConnectionBytes {
		return store.ErrUnavailable
	}
	c.Sealed = slices.Clone(c.Sealed)
	t.m[k] = c
	t.bytes += grow
	return nil
}

// Connections implements connect.Store.
func (s *Store) Connections(_ context.Context, tenant string) ([]connect.Connection, error) {
	t := &s.conns
	t.mu.Lock()
	var out []connect.Connection
	for k, c := range t.m {
		if k.tenant == tenant {
			c.Sealed = slices.Clone(c.Sealed)
			out = append(out, c)
		}
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b connect.Connection) int {
		return cmp.Or(cmp.Compare(a.Caller, b.Caller), cmp.Compare(a.Server, b.Server))
	})
	return out, nil
}

// DeleteConnection implements connect.Store.
func (s *Store) DeleteConnection(_ context.Context, tenant, caller, server string) error {
	t := &s.conns
	t.mu.Lock()
	defer t.mu.Unlock()
	k := connKey{tenant, caller, server}
	c, ok := t.m[k]
	if !ok {
		return store.ErrNotFound
	}
	t.bytes -= connBytes(c)
	delete(t.m, k)
	return nil
}

// PutPending implements connect.Store.
func (s *Store) PutPending(_ context.Context, p connect.Pending) error {
	t := &s.conns
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending == nil {
		t.pending = map[pendingKey]connect.Pending{}
	}
	k := pendingKey{p.Tenant, p.State}
	if _, ok := t.pending[k]; ok {
		return store.ErrConflict
	}
	if len(t.pending) >= MaxPending {
		now := time.Now()
		for pk, v := range t.pending {
			if !now.Before(v.Expires) {
				delete(t.pending, pk)
			}
		}
		if len(t.pending) >= MaxPending {
			return store.ErrUnavailable
		}
	}
	t.pending[k] = p
	return nil
}

// OpenPending implements connect.Store.
func (s *Store) OpenPending(_ context.Context, tenant, state, browser string, now time.Time) (connect.Pending, error) {
	t := &s.conns
	t.mu.Lock()
	defer t.mu.Unlock()
	k := pendingKey{tenant, state}
	p, ok := t.pending[k]
	switch {
	case !ok || !now.Before(p.Expires):
		return connect.Pending{}, store.ErrNotFound
	case p.Opened:
		return connect.Pending{}, store.ErrConflict
	}
	p.Opened, p.Browser = true, browser
	t.pending[k] = p
	return p, nil
}

// TakePending implements connect.Store.
func (s *Store) TakePending(_ context.Context, tenant, state string, now time.Time) (connect.Pending, error) {
	t := &s.conns
	t.mu.Lock()
	defer t.mu.Unlock()
	k := pendingKey{tenant, state}
	p, ok := t.pending[k]
	if !ok || !p.Opened || !now.Before(p.Expires) {
		return connect.Pending{}, store.ErrNotFound
	}
	delete(t.pending, k)
	return p, nil
}

// Registration implements connect.Store.
func (s *Store) Registration(_ context.Context, tenant, server, issuer string) (connect.Registration, error) {
	t := &s.conns
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.regs[regKey{tenant, server, issuer}]
	if !ok {
		return connect.Registration{}, store.ErrNotFound
	}
	r.Sealed = slices.Clone(r.Sealed)
	return r, nil
}

// PutRegistration implements connect.Store.
func (s *Store) PutRegistration(_ context.Context, r connect.Registration) error {
	t := &s.conns
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.regs == nil {
		t.regs = map[regKey]connect.Registration{}
	}
	k := regKey{r.Tenant, r.Server, r.Issuer}
	if _, ok := t.regs[k]; ok {
		return store.ErrConflict
	}
	n := regBytes(r)
	if len(t.regs) >= MaxRegistrations || t.regSize+n > MaxRegistrationBytes {
		return store.ErrUnavailable
	}
	r.Sealed = slices.Clone(r.Sealed)
	t.regs[k] = r
	t.regSize += n
	return nil
}

var _ connect.Store = (*Store)(nil)
