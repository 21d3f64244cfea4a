package connect

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTokenCacheBounds: an opened token is kept no longer than its expiry
// less RefreshMargin and never more than MaxCacheLifetime; the cache
// holds at most MaxCached tokens and MaxCachedBytes, dropping the one
// that expires first.
func TestTokenCacheBounds(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	k := connKey{"acme", "alice", "docs"}
	for _, tc := range []struct {
		name    string
		expires time.Time
		until   time.Duration // how long it is served; 0: not kept
	}{
		{"long-lived token", now.Add(time.Hour), MaxCacheLifetime},
		{"token expiring in two minutes", now.Add(2 * time.Minute), 2*time.Minute - RefreshMargin},
		{"token inside the refresh margin", now.Add(30 * time.Second), 0},
		{"token without an expiry", time.Time{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c tokenCache
			c.put(k, "at", "c1", tc.expires, now)
			_, ok := c.get(k, now)
			if ok != (tc.until > 0) {
				t.Fatalf("kept = %v; want %v", ok, tc.until > 0)
			}
			if tc.until == 0 {
				return
			}
			if _, ok := c.get(k, now.Add(tc.until-time.Nanosecond)); !ok {
				t.Fatal("dropped before its time")
			}
			if _, ok := c.get(k, now.Add(tc.until)); ok {
				t.Fatal("served past its time")
			}
		})
	}

	var c tokenCache
	for i := range MaxCached + 10 {
		c.put(connKey{"acme", fmt.Sprint("caller-", i), "docs"}, "at", "c", now.Add(2*time.Minute+time.Duration(i)*time.Millisecond), now)
	}
	if n, _ := c.usage(); n != MaxCached {
		t.Fatalf("%d tokens cached; want at most %d", n, MaxCached)
	}
	if _, ok := c.get(connKey{"acme", "caller-0", "docs"}, now); ok {
		t.Fatal("the token that expires first was kept over the count")
	}
	var big tokenCache
	huge := strings.Repeat("x", MaxCachedBytes/4)
	for i := range 8 {
		big.put(connKey{"acme", fmt.Sprint("c", i), "docs"}, huge, "c", now.Add(time.Hour), now)
	}
	if n, b := big.usage(); b > MaxCachedBytes || n > 3 {
		t.Fatalf("%d tokens of %d bytes cached; want at most %d bytes", n, b, MaxCachedBytes)
	}
	big.drop(connKey{"acme", "c7", "docs"})
	if _, ok := big.get(connKey{"acme", "c7", "docs"}, now); ok {
		t.Fatal("dropped token still served")
	}
}
