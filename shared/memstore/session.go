package memstore

import (
	"container/list"
	"context"
	"errors"
	"maps"
	"time"

	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

func sessionKey(tenant, id string) string { return string(appendSessionKey(nil, tenant, id)) }

// appendSessionKey appends sessionKey(tenant, id) to b: a lookup builds it
// on the stack (m[string(b)] does not allocate).
func appendSessionKey(b []byte, tenant, id string) []byte {
	return append(append(append(b, tenant...), 0), id...)
}

// sessionTable is the gateway sessions, under Store.mu: a map, and a list
// of the same entries from the least recently seen to the most (Create and
// a successful Touch move an entry to the back). The store forgets
// sessions by itself, as DynamoDB's TTL does for the other store:
//
//   - expired: each Create first sweeps the front of the list while its
//     entries are expired under the session limits (SetSessionLimits, else
//     those the last Touch used) at the latest time the store has seen (a
//     Touch, or the creation time of a new record). Idle expiry follows
//     the list's order, so this is amortised O(1); a session past its
//     lifetime but still in use goes when it idles or reaches a cap.
//   - over a cap: past MaxSessions or MaxSessionBytes the front entry, the
//     session seen least recently, is forgotten, expired or not. Its
//     client then gets the session error and opens a new one.
//
// Every session forgotten so, if it holds upstream sessions, is handed to
// the OnSessionEnd hook (sweep.go) so that they are ended too. A session
// deleted with Delete is not: its deleter ends them (the gateway's DELETE
// does).
type sessionTable struct {
	m      map[string]*sessionEntry
	lru    list.List // of *sessionEntry, least recently seen first
	bytes  int
	limits session.Limits
	now    time.Time
}

type sessionEntry struct {
	key   string
	rec   session.Record
	asked map[string]session.Asked // outstanding server requests (asked.go)
	size  int
	elem  *list.Element
}

// sessionOverhead is a record's fixed part in memory (times, string and
// map headers, the map and list entries), rounded up.
const sessionOverhead = 320

func sessionSize(key string, r session.Record) int {
	n := sessionOverhead + len(key) + len(r.ID) + len(r.Tenant) + len(r.Caller) + len(r.Protocol) + len(r.Capabilities) + len(r.Manifest)
	for k, v := range r.Upstream {
		n += 64 + len(k) + len(v)
	}
	for k := range r.Windows.Tools {
		n += 48 + len(k)
	}
	return n + len(r.Steps)*stepBytes
}

// errUpstreamIDTooLong refuses an upstream session over MaxUpstreamIDBytes.
var errUpstreamIDTooLong = errors.New("memstore: upstream session id longer than 1024 bytes; not kept")

// SetSessionLimits tells the store the session limits in force, so that it
// can forget expired sessions before any of them is touched.
func (s *Store) SetSessionLimits(l session.Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions.limits = l
}

// Create implements session.Store.
func (s *Store) Create(_ context.Context, r session.Record) error {
	k := sessionKey(r.Tenant, r.ID)
	r.Upstream = maps.Clone(r.Upstream)
	r.Windows.Tools = maps.Clone(r.Windows.Tools)
	e := &sessionEntry{key: k, rec: r, size: sessionSize(k, r)}
	var gone []session.Record
	s.mu.Lock()
	t := &s.sessions
	if _, ok := t.m[k]; ok {
		s.mu.Unlock()
		return store.ErrConflict
	}
	if r.Created.After(t.now) {
		t.now = r.Created
	}
	if t.limits != (session.Limits{}) {
		for f := t.lru.Front(); f != nil; f = t.lru.Front() {
			old := f.Value.(*sessionEntry)
			if !t.limits.Expired(old.rec, t.now) {
				break
			}
			gone = t.forget(old, gone)
		}
	}
	for len(t.m) > 0 && (len(t.m)+1 > s.bounds.sessions || t.bytes+e.size > s.bounds.sessionBytes) {
		gone = t.forget(t.lru.Front().Value.(*sessionEntry), gone)
	}
	e.elem = t.lru.PushBack(e)
	t.m[k] = e
	t.bytes += e.size
	s.mu.Unlock()
	s.ended(gone...)
	return nil
}

// forget drops e, adding its record to gone when it holds upstream
// sessions that are still to be ended.
func (t *sessionTable) forget(e *sessionEntry, gone []session.Record) []session.Record {
	t.lru.Remove(e.elem)
	delete(t.m, e.key)
	t.bytes -= e.size
	if len(e.rec.Upstream) > 0 {
		gone = append(gone, e.rec)
	}
	return gone
}

// Session implements session.Store. It changes no record; the session
// moves to the back of the list, as it was seen.
func (s *Store) Session(_ context.Context, tenant, id string, now time.Time, l session.Limits) (session.Record, error) {
	return s.seen(tenant, id, now, l, false)
}

// Touch implements session.Store.
func (s *Store) Touch(_ context.Context, tenant, id string, now time.Time, l session.Limits) (session.Record, error) {
	return s.seen(tenant, id, now, l, true)
}

// live is the entry of a session that has not expired at now under l,
// or nil; it moves the table's clock and limits to the caller's. Under
// the store's lock.
func (t *sessionTable) live(tenant, id string, now time.Time, l session.Limits) *sessionEntry {
	t.limits = l
	if now.After(t.now) {
		t.now = now
	}
	var kb [256]byte
	e, ok := t.m[string(appendSessionKey(kb[:0], tenant, id))]
	if !ok || l.Expired(e.rec, now) {
		return nil
	}
	return e
}

// seen is Session, and Touch when touch.
func (s *Store) seen(tenant, id string, now time.Time, l session.Limits, touch bool) (session.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &s.sessions
	e := t.live(tenant, id, now, l)
	if e == nil {
		return session.Record{}, store.ErrNotFound
	}
	if touch {
		e.rec.LastSeen = now
	}
	t.lru.MoveToBack(e.elem)
	// The record's Upstream map is shared, not copied: SetUpstream puts a
	// new map in its place rather than changing it, and no caller writes
	// to it (a session.Record's maps are read-only to its holders).
	return e.rec, nil
}

// SetUpstream implements session.Store. An upstream session over
// MaxUpstreamIDBytes is refused (an error; nothing is kept). One recorded
// for a session the store no longer has is handed to the OnSessionEnd hook
// to be ended: its gateway session was forgotten while the call was out.
func (s *Store) SetUpstream(_ context.Context, tenant, id, server, upstreamID string) error {
	if len(upstreamID) > MaxUpstreamIDBytes {
		return errUpstreamIDTooLong
	}
	s.mu.Lock()
	t := &s.sessions
	e, ok := t.m[sessionKey(tenant, id)]
	if !ok {
		s.mu.Unlock()
		if upstreamID != "" {
			s.ended(session.Record{ID: id, Tenant: tenant, Upstream: map[string]string{server: upstreamID}})
		}
		return store.ErrNotFound
	}
	r := &e.rec
	// A new map, never the kept one changed: Touch hands the kept map out
	// without a copy (a call's read, once per call; this write is once per
	// upstream session).
	up := make(map[string]string, len(r.Upstream)+1)
	for k, v := range r.Upstream {
		if k != server {
			up[k] = v
		}
	}
	if upstreamID != "" {
		up[server] = upstreamID
	}
	r.Upstream = up
	t.bytes -= e.size
	e.size = sessionSize(e.key, *r)
	for k, a := range e.asked {
		e.size += askedSize(k, a)
	}
	t.bytes += e.size
	s.mu.Unlock()
	return nil
}

// Delete implements session.Store.
func (s *Store) Delete(_ context.Context, tenant, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.sessions.m[sessionKey(tenant, id)]; ok {
		s.sessions.forget(e, nil)
	}
	return nil
}

var _ session.Store = (*Store)(nil)

// Admit implements session.Admitter by session.Admitted, under the lock.
func (s *Store) Admit(_ context.Context, tenant, id, caller string, now time.Time, l session.Limits, w session.Window) (session.Record, session.Admission, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &s.sessions
	e := t.live(tenant, id, now, l)
	if e == nil || e.rec.Caller != caller {
		return session.Record{}, session.Admission{}, store.ErrNotFound
	}
	before := e.rec
	r, a := session.Admitted(before, now, w)
	if !a.Counted() {
		return r, a, nil
	}
	t.resize(e, r)
	t.lru.MoveToBack(e.elem)
	return session.Found(r, before), a, nil
}

// GiveBack implements session.Admitter by session.GivenBack.
func (s *Store) GiveBack(_ context.Context, tenant, id string, w session.Window, found session.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &s.sessions
	if e, ok := t.m[sessionKey(tenant, id)]; ok {
		t.resize(e, session.GivenBack(e.rec, w, found))
	}
	return nil
}

// resize puts r in e's place and accounts for its size (its windows'
// tools included; session.MaxToolWindows bounds them).
func (t *sessionTable) resize(e *sessionEntry, r session.Record) {
	e.rec = r
	t.bytes -= e.size
	e.size = sessionSize(e.key, r)
	for k, a := range e.asked {
		e.size += askedSize(k, a)
	}
	t.bytes += e.size
}

var _ session.Admitter = (*Store)(nil)
