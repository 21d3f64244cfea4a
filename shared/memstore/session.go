package memstore

import (
	"context"
	"maps"
	"time"

	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

type sessionRec = session.Record

func sessionKey(tenant, id string) string { return tenant + "\x00" + id }

// sessionSweep forgets expired sessions, which DynamoDB's TTL does for the
// other store: every sweepEvery creations (counters.go), the records
// expired under the session limits (SetSessionLimits, else those the last
// Touch used) at the latest time the store has seen (a Touch, or the
// creation time of a new record) are dropped, so that a client minting a
// session per call cannot grow the process without end.
type sessionSweep struct {
	creates int
	limits  session.Limits
	now     time.Time
}

// SetSessionLimits tells the store the session limits in force, so that it
// can forget expired sessions before any of them is touched.
func (s *Store) SetSessionLimits(l session.Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep.limits = l
}

// Create implements session.Store.
func (s *Store) Create(_ context.Context, r session.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sessionKey(r.Tenant, r.ID)
	if _, ok := s.sessions[k]; ok {
		return store.ErrConflict
	}
	if r.Created.After(s.sweep.now) {
		s.sweep.now = r.Created
	}
	if s.sweep.creates++; s.sweep.creates%sweepEvery == 0 && s.sweep.limits != (session.Limits{}) {
		for key, old := range s.sessions {
			if s.sweep.limits.Expired(old, s.sweep.now) {
				delete(s.sessions, key)
			}
		}
	}
	r.Upstream = maps.Clone(r.Upstream)
	s.sessions[k] = r
	return nil
}

// Touch implements session.Store.
func (s *Store) Touch(_ context.Context, tenant, id string, now time.Time, l session.Limits) (session.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep.limits = l
	if now.After(s.sweep.now) {
		s.sweep.now = now
	}
	k := sessionKey(tenant, id)
	r, ok := s.sessions[k]
	if !ok || l.Expired(r, now) {
		return session.Record{}, store.ErrNotFound
	}
	r.LastSeen = now
	s.sessions[k] = r
	r.Upstream = maps.Clone(r.Upstream)
	return r, nil
}

// SetUpstream implements session.Store.
func (s *Store) SetUpstream(_ context.Context, tenant, id, server, upstreamID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sessionKey(tenant, id)
	r, ok := s.sessions[k]
	if !ok {
		return store.ErrNotFound
	}
	if r.Upstream == nil {
		r.Upstream = map[string]string{}
	}
	if upstreamID == "" {
		delete(r.Upstream, server)
	} else {
		r.Upstream[server] = upstreamID
	}
	s.sessions[k] = r
	return nil
}

// Delete implements session.Store.
func (s *Store) Delete(_ context.Context, tenant, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sessionKey(tenant, id))
	return nil
}

var _ session.Store = (*Store)(nil)
