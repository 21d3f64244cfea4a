package registry

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/store"
)

// Cache is a Reader that keeps what it read for TTL, so a warm Lambda
// instance does not read the registry on every call. When the backing
// reader fails with anything but store.ErrNotFound, the last known value is
// served for up to MaxStale (the registry's "last known state" bound when
// DynamoDB is unreachable). A revoked key or a changed server therefore
// takes effect within TTL.
type Cache struct {
	r        Reader
	ttl      time.Duration
	maxStale time.Duration
	now      func() time.Time

	mu      sync.Mutex
	keys    map[string]entry[Key]
	tenants map[string]entry[Tenant]
	servers map[string]entry[[]Server]
}

type entry[T any] struct {
	v    T
	at   time.Time
	miss bool // cached store.ErrNotFound
}

// NewCache wraps r.
func NewCache(r Reader, ttl, maxStale time.Duration, now func() time.Time) *Cache {
	return &Cache{r: r, ttl: ttl, maxStale: maxStale, now: now,
		keys: map[string]entry[Key]{}, tenants: map[string]entry[Tenant]{}, servers: map[string]entry[[]Server]{}}
}

// maxEntries bounds each map, so a flood of unknown key ids cannot grow
// the cache without limit; a full map is simply emptied.
const maxEntries = 10000

func put[T any](m map[string]entry[T], k string, e entry[T]) {
	if len(m) >= maxEntries {
		clear(m)
	}
	m[k] = e
}

func lookup[T any](c *Cache, m map[string]entry[T], k string, load func() (T, error)) (T, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := m[k]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.ttl {
		if e.miss {
			var zero T
			return zero, store.ErrNotFound
		}
		return e.v, nil
	}
	v, err := load()
	switch {
	case err == nil:
		c.mu.Lock()
		put(m, k, entry[T]{v: v, at: now})
		c.mu.Unlock()
		return v, nil
	case errors.Is(err, store.ErrNotFound):
		c.mu.Lock()
		put(m, k, entry[T]{at: now, miss: true})
		c.mu.Unlock()
		return v, err
	case ok && !e.miss && now.Sub(e.at) < c.ttl+c.maxStale:
		return e.v, nil // backing store down: last known state
	}
	return v, err
}

// Key implements Reader.
func (c *Cache) Key(ctx context.Context, id string) (Key, error) {
	return lookup(c, c.keys, id, func() (Key, error) { return c.r.Key(ctx, id) })
}

// Tenant implements Reader.
func (c *Cache) Tenant(ctx context.Context, id string) (Tenant, error) {
	return lookup(c, c.tenants, id, func() (Tenant, error) { return c.r.Tenant(ctx, id) })
}

// Servers implements Reader.
func (c *Cache) Servers(ctx context.Context, tenant string) ([]Server, error) {
	return lookup(c, c.servers, tenant, func() ([]Server, error) { return c.r.Servers(ctx, tenant) })
}

var _ Reader = (*Cache)(nil)

// KnownTenant returns the tenant of key id as this cache last read it,
// however old that read (a key never moves to another tenant), so that a
// caller can read the tenant's state while the key is read again.
func (c *Cache) KnownTenant(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.keys[id]
	if !ok || e.miss {
		return "", false
	}
	return e.v.Tenant, true
}

// KeyFresh reports whether key id (or its absence) was read within TTL:
// Key answers it without a read.
func (c *Cache) KeyFresh(id string) bool {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.keys[id]
	return ok && now.Sub(e.at) < c.ttl
}
