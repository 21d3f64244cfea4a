package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/ratelimit"
)

// counters are kept apart from the registry's lock: they sit on every call.
type counters struct {
	mu    sync.Mutex
	m     map[string]counterRec
	sweep int
}

type counterRec struct {
	n       int64
	expires time.Time
}

// sweepEvery is how many increments pass between sweeps of finished windows.
const sweepEvery = 4096

// Incr implements ratelimit.Counter and quota.Meter.
func (s *Store) Incr(_ context.Context, key string, limit int64, expires time.Time) (int64, bool, error) {
	c := &s.counters
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]counterRec{}
	}
	if c.sweep++; c.sweep >= sweepEvery {
		// Forget finished windows. Keys name their window, so this is
		// housekeeping only: the wall clock never decides a count.
		c.sweep = 0
		now := time.Now()
		for k, r := range c.m {
			if r.expires.Before(now) {
				delete(c.m, k)
			}
		}
	}
	r := c.m[key]
	if limit > 0 && r.n >= limit {
		return r.n, false, nil
	}
	r.n++
	if expires.After(r.expires) {
		r.expires = expires
	}
	c.m[key] = r
	return r.n, true, nil
}

// Decr implements ratelimit.Counter and quota.Meter.
func (s *Store) Decr(_ context.Context, key string) error {
	c := &s.counters
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.m[key]; ok && r.n > 0 {
		r.n--
		c.m[key] = r
	}
	return nil
}

// Value implements ratelimit.Counter and quota.Meter.
func (s *Store) Value(_ context.Context, key string) (int64, error) {
	c := &s.counters
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key].n, nil
}

var (
	_ ratelimit.Counter = (*Store)(nil)
	_ quota.Meter       = (*Store)(nil)
)
