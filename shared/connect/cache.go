package connect

import (
	"crypto/subtle"
	"sync"
	"time"
)

// Bounds of the cache of opened access tokens (per process).
const (
	// MaxCached and MaxCachedBytes bound the cache; past either, the
	// entry that expires first is dropped.
	MaxCached      = 10_000
	MaxCachedBytes = 16 << 20
	// MaxCacheLifetime bounds how long an opened token is reused without
	// reading its connection again: a connection revoked or broken on
	// another instance stops being used here within it.
	MaxCacheLifetime = 5 * time.Minute
	// RefreshMargin: a token that expires within it is refreshed first,
	// and never cached past its expiry less the margin.
	RefreshMargin  = time.Minute
	cachedOverhead = 128
)

type cachedToken struct {
	access, connID string
	// bound, when set, is what the token was obtained for (an exchanged
	// token: a hash of the subject token and the server's URL); get
	// serves it only to the same.
	bound string
	until time.Time
}

func (c cachedToken) size(k connKey) int {
	return cachedOverhead + len(c.access) + len(c.connID) + len(c.bound) + len(k.tenant) + len(k.caller) + len(k.server)
}

type connKey struct{ tenant, caller, server string }

// tokenCache keeps opened access tokens, bounded by count, bytes and
// lifetime (never past the token's expiry less RefreshMargin, never longer
// than MaxCacheLifetime). Safe for concurrent use.
type tokenCache struct {
	mu    sync.Mutex
	m     map[connKey]cachedToken
	bytes int
}

func (c *tokenCache) get(k connKey, now time.Time) (cachedToken, bool) {
	return c.getBound(k, "", now)
}

// getBound is get of an entry put with bound (putBound).
func (c *tokenCache) getBound(k connKey, bound string, now time.Time) (cachedToken, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !now.Before(e.until) || subtle.ConstantTimeCompare([]byte(e.bound), []byte(bound)) != 1 {
		return cachedToken{}, false
	}
	return e, true
}

// put keeps e for k until the earlier of expires-RefreshMargin and
// now+MaxCacheLifetime; a token without an expiry, or about to expire, is
// not kept.
func (c *tokenCache) put(k connKey, access, connID string, expires, now time.Time) {
	c.putBound(k, access, connID, "", expires, now)
}

// putBound is put of a token obtained for bound: getBound serves it only
// with the same bound. k keeps one entry, whatever its bound.
func (c *tokenCache) putBound(k connKey, access, connID, bound string, expires, now time.Time) {
	until := now.Add(MaxCacheLifetime)
	if expires.IsZero() {
		return
	}
	if e := expires.Add(-RefreshMargin); e.Before(until) {
		until = e
	}
	if !now.Before(until) {
		return
	}
	e := cachedToken{access: access, connID: connID, bound: bound, until: until}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[connKey]cachedToken{}
	}
	c.dropLocked(k)
	n := e.size(k)
	for len(c.m) > 0 && (len(c.m) >= MaxCached || c.bytes+n > MaxCachedBytes) {
		var first connKey
		var firstUntil time.Time
		for ok, oe := range c.m {
			if firstUntil.IsZero() || oe.until.Before(firstUntil) {
				first, firstUntil = ok, oe.until
			}
		}
		c.dropLocked(first)
	}
	c.m[k] = e
	c.bytes += n
}

func (c *tokenCache) drop(k connKey) {
	c.mu.Lock()
	c.dropLocked(k)
	c.mu.Unlock()
}

func (c *tokenCache) dropLocked(k connKey) {
	if e, ok := c.m[k]; ok {
		c.bytes -= e.size(k)
		delete(c.m, k)
	}
}

// len and size report what is held (tests).
func (c *tokenCache) usage() (n, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.bytes
}
