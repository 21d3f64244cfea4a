package gateway

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/pipeline"
)

// The URL elicitations (-32042) this instance gave to MCP 2025-11-25
// sessions and still waits to see completed, so that when the person
// completes the connection at this instance's callback, the session that
// was asked gets notifications/elicitation/complete on its GET stream.
// Bounded per session and in all, by count and bytes; each lives as long
// as the link (connect.PendingTTL).
const (
	MaxElicitationsPerSession = 8
	MaxElicitations           = 4096
	MaxElicitationBytes       = 1 << 20
)

// sessionKey names one gateway session of one caller of one tenant.
type sessionKey struct{ tenant, caller, session string }

func (k sessionKey) size() int { return len(k.tenant) + len(k.caller) + len(k.session) }

type asked struct {
	to      sessionKey
	expires time.Time
	done    bool // completed while the session had no GET stream open
}

// elicitations holds the open elicitations (by id) and the GET streams
// that may carry their completion (by session). Safe for concurrent use.
type elicitations struct {
	mu        sync.Mutex
	byID      map[string]asked
	bySession map[sessionKey]int
	bytes     int
	streams   map[sessionKey]map[*stream]struct{} // bounded by streamSlots
}

// entrySize is what one elicitation of k with id costs in bytes (its
// strings and a fixed overhead for the maps' entries).
func entrySize(k sessionKey, id string) int { return 2*k.size() + len(id) + 96 }

// asked remembers that c's session was given the elicitation id, until
// now+connect.PendingTTL. False when it is not remembered (no session, or
// the bounds are reached): the client then is not told of the completion
// and retries when its person says so, as before.
func (e *elicitations) ask(c *pipeline.Call, id string, now time.Time) bool {
	if c.SessionID == "" || c.Stateless {
		return false
	}
	k := sessionKey{c.Tenant.ID, c.Caller, c.SessionID}
	e.mu.Lock()
	defer e.mu.Unlock()
	n := entrySize(k, id)
	full := func() bool {
		return e.bySession[k] >= MaxElicitationsPerSession || len(e.byID) >= MaxElicitations || e.bytes+n > MaxElicitationBytes
	}
	if full() {
		e.expire(now) // only when a bound is reached: one pass, not one per call
	}
	if _, dup := e.byID[id]; dup || full() {
		return false
	}
	if e.byID == nil {
		e.byID, e.bySession = map[string]asked{}, map[sessionKey]int{}
	}
	e.byID[id] = asked{to: k, expires: now.Add(connect.PendingTTL)}
	e.bySession[k]++
	e.bytes += n
	return true
}

// expire forgets the elicitations whose links expired (under mu).
func (e *elicitations) expire(now time.Time) {
	for id, a := range e.byID {
		if !now.Before(a.expires) {
			e.forget(id, a)
		}
	}
}

// forget drops elicitation id (under mu).
func (e *elicitations) forget(id string, a asked) {
	delete(e.byID, id)
	if e.bySession[a.to]--; e.bySession[a.to] <= 0 {
		delete(e.bySession, a.to)
	}
	e.bytes -= entrySize(a.to, id)
}

// listen adds out as a GET stream of c's session, sending on it the
// completions that came while the session had none open; the returned
// func removes it.
func (e *elicitations) listen(c *pipeline.Call, out *stream, now time.Time) (stop func()) {
	k := sessionKey{c.Tenant.ID, c.Caller, c.SessionID}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expire(now)
	for id, a := range e.byID {
		if a.done && a.to == k && out.Event(completion(id)) {
			e.forget(id, a)
		}
	}
	if e.streams == nil {
		e.streams = map[sessionKey]map[*stream]struct{}{}
	}
	if e.streams[k] == nil {
		e.streams[k] = map[*stream]struct{}{}
	}
	e.streams[k][out] = struct{}{}
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.streams[k], out)
		if len(e.streams[k]) == 0 {
			delete(e.streams, k)
		}
	}
}

// complete sends notifications/elicitation/complete for d's elicitation
// to the GET streams of the session it was given to, when that session is
// of d's tenant and caller and the elicitation has not expired; it is
// then forgotten. When that session has no GET stream open on this
// instance, the completion waits for its next one (listen) until the
// elicitation expires. It reports how many streams it was sent on. It writes
// under mu, so that no stream is written once its listen has stopped
// (its handler may have returned).
func (e *elicitations) complete(d *connect.Completed, now time.Time) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.byID[d.ElicitationID]
	if !ok {
		return 0
	}
	if !now.Before(a.expires) || a.to.tenant != d.Tenant || a.to.caller != d.Caller {
		e.forget(d.ElicitationID, a)
		return 0
	}
	msg := completion(d.ElicitationID)
	sent := 0
	for out := range e.streams[a.to] {
		if out.Event(msg) {
			sent++
		}
	}
	if sent == 0 {
		a.done = true
		e.byID[d.ElicitationID] = a
		return 0
	}
	e.forget(d.ElicitationID, a)
	return sent
}

// completion is notifications/elicitation/complete of elicitation id.
func completion(id string) []byte {
	params, _ := json.Marshal(map[string]string{"elicitationId": id})
	return notification("notifications/elicitation/complete", params)
}
