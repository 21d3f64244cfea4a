package memstore

import (
	"sync"

	"github.com/aegis-gw/aegis/shared/session"
)

// endWorkers is how many goroutines at most call the OnSessionEnd hook at
// once.
const endWorkers = 4

// endQueue holds the forgotten sessions whose upstream sessions are still
// to be ended, at most bounds.endQueue of them, and runs the hook on them
// on at most endWorkers goroutines, which exit when the queue is empty.
type endQueue struct {
	mu      sync.Mutex
	fn      func(session.Record)
	q       []session.Record
	running int
	dropped int64
}

// OnSessionEnd registers fn to be told of every session the store forgets
// by itself (expired, or over MaxSessions or MaxSessionBytes) while it
// still holds upstream sessions, and of an upstream session recorded with
// SetUpstream for a session already gone; the gateway ends those upstream
// sessions with it. fn runs on the store's own goroutines (at most four at
// once, never under a store lock), one record at a time; it should bound
// its own time. Records wait in a queue of at most MaxEndQueue; past it
// they are dropped (their upstream sessions are left to the upstream's
// idle expiry) and counted in Usage.EndsDropped. nil (the default) ends
// nothing. A session removed with Delete is not reported: its deleter ends
// its upstream sessions.
func (s *Store) OnSessionEnd(fn func(session.Record)) {
	q := &s.ends
	q.mu.Lock()
	defer q.mu.Unlock()
	q.fn = fn
}

// ended queues recs for the hook. It must not be called under s.mu.
func (s *Store) ended(recs ...session.Record) {
	if len(recs) == 0 {
		return
	}
	q := &s.ends
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fn == nil {
		return
	}
	room := max(s.bounds.endQueue-len(q.q), 0)
	if len(recs) > room {
		q.dropped += int64(len(recs) - room)
		recs = recs[:room]
	}
	q.q = append(q.q, recs...)
	for n := min(endWorkers-q.running, len(q.q)); n > 0; n-- {
		q.running++
		go s.endLoop()
	}
}

// endLoop runs the hook on queued records until the queue is empty.
func (s *Store) endLoop() {
	q := &s.ends
	for {
		q.mu.Lock()
		if len(q.q) == 0 || q.fn == nil {
			q.running--
			q.q = nil // let the array go
			q.mu.Unlock()
			return
		}
		r, fn := q.q[0], q.fn
		q.q[0] = session.Record{}
		q.q = q.q[1:]
		q.mu.Unlock()
		fn(r)
	}
}
