package gateway

import (
	"context"
	"sync"

	"github.com/aegis-gw/aegis/shared/pipeline"
)

// The long-lived event streams one instance holds open (GET /mcp, and
// 2026-07-28's subscriptions/listen): each keeps a connection to the
// client and one to each upstream for up to ListenTimeout, so their number
// is bounded per API key (or OAuth caller) and in all.
const (
	MaxStreamsPerKey = 8
	MaxStreams       = 1024
)

// streamSlots counts the open streams by key. An entry exists only while
// its key holds a stream, so the map holds at most MaxStreams entries.
type streamSlots struct {
	mu    sync.Mutex
	byKey map[string]int
	total int
}

// take reserves a stream for key; false when key already holds
// MaxStreamsPerKey or the instance MaxStreams. release gives it back
// (once; later calls do nothing).
func (s *streamSlots) take(key string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.total >= MaxStreams || s.byKey[key] >= MaxStreamsPerKey {
		return nil, false
	}
	if s.byKey == nil {
		s.byKey = map[string]int{}
	}
	s.byKey[key]++
	s.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.byKey[key]--; s.byKey[key] <= 0 {
				delete(s.byKey, key)
			}
			s.total--
		})
	}, true
}

// streamOwner is whose streams c's stream counts among: its tenant's API
// key (an OAuth caller has a key id of its own, auth.TokenKeyID).
func streamOwner(c *pipeline.Call) string { return c.Tenant.ID + "/" + c.KeyID }

// CloseStreams ends every stream of notifications outside a call that the
// gateway holds (GET on /mcp, 2026-07-28's subscriptions/listen), and
// every one opened from then on, as the transport lets a server do at any
// time: a GET stream's response ends (a client may open another), a
// subscriptions/listen ends with its result (resultType complete), as it
// does at Options.ListenTimeout. Calls in flight are not touched. A host
// calls it when it stops (aegis serve, on SIGTERM or Ctrl-C), so that
// idle streams do not hold its drain; it is safe to call more than once
// and from any goroutine.
func (g *Gateway) CloseStreams() { g.closeStreams() }

// streamContext is ctx, also cancelled by CloseStreams; stop releases it.
func (g *Gateway) streamContext(ctx context.Context) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(g.closing, cancel)
	return ctx, func() {
		unhook()
		cancel()
	}
}
