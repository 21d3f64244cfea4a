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

// maybeSweep forgets finished windows once every sweepEvery counts. Keys
// name their window, so this is housekeeping only: the wall clock never
// decides a count. c.mu is held.
func (c *counters) maybeSweep() {
	if c.sweep++; c.sweep >= sweepEvery {
		c.sweep = 0
		now := time.Now()
		for k, r := range c.m {
			if r.expires.Before(now) {
				delete(c.m, k)
			}
		}
	}
}

// Incr implements ratelimit.Counter and quota.Meter.
func (s *Store) Incr(_ context.Context, key string, limit int64, expires time.Time) (int64, bool, error) {
	c := &s.counters
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]counterRec{}
	}
	c.maybeSweep()
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

// IncrGroup implements ratelimit.Counter: key's own counter is the one
// Incr counts; an extra counter is kept under key, a zero byte and its
// name.
func (s *Store) IncrGroup(_ context.Context, key string, limit int64, extras []ratelimit.Extra, expires time.Time) ([]int64, bool, error) {
	c := &s.counters
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]counterRec{}
	}
	c.maybeSweep()
	keys := make([]string, 1+len(extras))
	n := make([]int64, len(keys))
	keys[0], n[0] = key, c.m[key].n
	full := limit > 0 && n[0] >= limit
	for i, e := range extras {
		keys[1+i] = key + "\x00" + e.Name
		n[1+i] = c.m[keys[1+i]].n
		full = full || e.Limit > 0 && n[1+i] >= e.Limit
	}
	if full {
		return n, false, nil
	}
	for i, k := range keys {
		r := c.m[k]
		r.n++
		if expires.After(r.expires) {
			r.expires = expires
		}
		c.m[k] = r
		n[i] = r.n
	}
	return n, true, nil
}

// DecrGroup implements ratelimit.Counter.
func (s *Store) DecrGroup(ctx context.Context, key string, extras []string) error {
	_ = s.Decr(ctx, key)
	for _, e := range extras {
		_ = s.Decr(ctx, key+"\x00"+e)
	}
	return nil
}

var (
	_ ratelimit.Counter = (*Store)(nil)
	_ quota.Meter       = (*Store)(nil)
)
