package oauth

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/registry"
)

// tokenCache keeps validated tokens by the SHA-256 of tenant and token
// (never the token) until they expire, bounded by count and by bytes: a
// full cache first drops what has expired, then entries in map order
// (random) until the new one fits. A hit costs a hash and a map lookup.
type tokenCache struct {
	maxEntries, maxBytes int
	skew                 time.Duration

	mu    sync.Mutex
	m     map[[sha256.Size]byte]*cached
	bytes int
}

type cached struct {
	id    Identity
	is    registry.Issuer // the issuer configuration it was validated with
	until time.Time       // exp + skew
	size  int
}

// cachedOverhead approximates an entry's fixed cost: the map slot, the
// structs and their headers.
const cachedOverhead = 320

func newTokenCache(entries, bytes int, skew time.Duration) *tokenCache {
	return &tokenCache{maxEntries: entries, maxBytes: bytes, skew: skew, m: map[[sha256.Size]byte]*cached{}}
}

func (c *tokenCache) get(k [sha256.Size]byte, now time.Time) (Identity, registry.Issuer, bool) {
	c.mu.Lock()
	e := c.m[k]
	c.mu.Unlock()
	if e == nil || !now.Before(e.until) {
		return Identity{}, registry.Issuer{}, false
	}
	return e.id, e.is, true
}

func (c *tokenCache) drop(k [sha256.Size]byte) {
	c.mu.Lock()
	c.remove(k)
	c.mu.Unlock()
}

func (c *tokenCache) remove(k [sha256.Size]byte) {
	if e := c.m[k]; e != nil {
		c.bytes -= e.size
		delete(c.m, k)
	}
}

func (c *tokenCache) put(k [sha256.Size]byte, id Identity, is registry.Issuer, now time.Time) {
	size := cachedOverhead + len(id.Issuer) + len(id.Caller) + len(id.Claims)
	for _, s := range id.Roles {
		size += len(s) + 16
	}
	for _, s := range id.Scopes {
		size += len(s) + 16
	}
	if size > c.maxBytes {
		return
	}
	e := &cached{id: id, is: is, until: id.Expires.Add(c.skew), size: size}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(k)
	if len(c.m)+1 > c.maxEntries || c.bytes+size > c.maxBytes {
		for key, old := range c.m {
			if !now.Before(old.until) {
				c.remove(key)
			}
		}
		for key := range c.m {
			if len(c.m)+1 <= c.maxEntries && c.bytes+size <= c.maxBytes {
				break
			}
			c.remove(key)
		}
	}
	c.m[k] = e
	c.bytes += size
}

// len and size are for tests.
func (c *tokenCache) len() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.bytes
}
