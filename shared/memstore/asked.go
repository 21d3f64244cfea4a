package memstore

import (
	"context"

	"time"

	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

// askedSize is one outstanding request's share of its session's bytes.
func askedSize(key string, a session.Asked) int { return 64 + len(key) + len(a.Server) + len(a.Method) }

// Ask implements session.Outstanding: the entry lives with its session
// (and is forgotten with it), counted in the session's bytes.
func (s *Store) Ask(_ context.Context, tenant, id, key string, a session.Asked, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &s.sessions
	e, ok := t.m[sessionKey(tenant, id)]
	if !ok {
		return store.ErrNotFound
	}
	grow := 0
	for k, x := range e.asked {
		if k == key || !now.Before(x.Expires) {
			grow -= askedSize(k, x)
			delete(e.asked, k)
		}
	}
	if len(e.asked) >= session.MaxAsked {
		e.size += grow
		t.bytes += grow
		return session.ErrTooManyAsked
	}
	if e.asked == nil {
		e.asked = map[string]session.Asked{}
	}
	e.asked[key] = a
	grow += askedSize(key, a)
	e.size += grow
	t.bytes += grow
	return nil
}

// Answer implements session.Outstanding.
func (s *Store) Answer(_ context.Context, tenant, id, key string, now time.Time) (session.Asked, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &s.sessions
	e, ok := t.m[sessionKey(tenant, id)]
	if !ok {
		return session.Asked{}, store.ErrNotFound
	}
	a, ok := e.asked[key]
	if !ok {
		return session.Asked{}, store.ErrNotFound
	}
	delete(e.asked, key)
	e.size -= askedSize(key, a)
	t.bytes -= askedSize(key, a)
	if !now.Before(a.Expires) {
		return session.Asked{}, store.ErrNotFound
	}
	return a, nil
}

var _ session.Outstanding = (*Store)(nil)
