package memstore

import (
	"context"

	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

// stepBytes is what one recorded step adds to a session's size.
const stepBytes = 8

// Count implements session.Counter under the store's lock
// (session.Counted). The record's Steps slice is replaced, never grown in
// place, so a record a Touch handed out earlier is not changed.
func (s *Store) Count(_ context.Context, tenant, id string, u session.Use) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &s.sessions
	e, ok := t.m[sessionKey(tenant, id)]
	if !ok {
		return store.ErrNotFound
	}
	t.resize(e, session.Counted(e.rec, u))
	return nil
}

// Reserve implements session.Counter under the store's lock.
func (s *Store) Reserve(_ context.Context, tenant, id string, limit int) (int, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.sessions.m[sessionKey(tenant, id)]
	if !ok {
		return 0, false, store.ErrNotFound
	}
	n := e.rec.ToolCalls
	if limit > 0 && n >= limit {
		return n, false, nil
	}
	e.rec.ToolCalls++
	return n, true, nil
}

// Release implements session.Counter under the store's lock.
func (s *Store) Release(_ context.Context, tenant, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.sessions.m[sessionKey(tenant, id)]
	if !ok {
		return store.ErrNotFound
	}
	if e.rec.ToolCalls > 0 {
		e.rec.ToolCalls--
	}
	return nil
}

var _ session.Counter = (*Store)(nil)
