package schema

import (
	"crypto/sha256"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The cache's default caps. A tool's inputSchema is typically a few hundred
// bytes to a few KiB, so the count cap is the one a deployment meets; the
// byte cap bounds the worst case (many large schemas). It counts the
// inputSchema's JSON bytes as the upstream listed them; compiled, a schema
// holds about 20 times that in memory (measured: 176 bytes → 3.1 KiB, 597
// bytes → 12 KiB), so the defaults keep at most about 20 MiB, and the
// usual case (1024 schemas of ~300 bytes) about 6 MiB.
const (
	// DefaultMaxEntries is the most compiled schemas a Cache keeps.
	DefaultMaxEntries = 1024
	// DefaultMaxBytes is the most schema JSON, summed over the kept
	// entries, a Cache keeps: 1 MiB. A single schema larger than the cap
	// is not compiled (its calls are not validated, see the package doc).
	DefaultMaxBytes = 1 << 20
)

// Hash identifies a schema: the SHA-256 of its inputSchema bytes.
type Hash [sha256.Size]byte

// compiled is one cache entry: the compiled schema, or why there is none.
type compiled struct {
	hash  Hash
	size  int                // bytes counted against the byte cap
	sch   *jsonschema.Schema // nil when err != nil
	names map[string]bool    // property names the schema declares (see declaredNames)
	err   error              // the schema did not compile; calls are not validated
}

// Cache holds compiled schemas by Hash, bounded by count and by bytes; when
// an insert would pass either cap, the oldest entries (first inserted) are
// evicted. A schema larger than the byte cap is not compiled: its entry
// records that and counts zero bytes. Safe for concurrent use; lookups
// share a read lock.
type Cache struct {
	maxEntries int
	maxBytes   int

	mu      sync.RWMutex
	entries map[Hash]*compiled
	fifo    []Hash // insertion order, oldest first (append copies only the kept tail when it grows)
	bytes   int
}

// NewCache returns a cache holding at most maxEntries schemas and maxBytes
// of schema JSON; a cap <= 0 takes its default.
func NewCache(maxEntries, maxBytes int) *Cache {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Cache{maxEntries: maxEntries, maxBytes: maxBytes, entries: make(map[Hash]*compiled)}
}

// get returns the entry for raw, compiling it on a miss. inserted is true
// for exactly one caller per entry (the one whose compile was kept), so
// that a schema that does not compile is reported once while it is cached.
func (k *Cache) get(raw []byte) (e *compiled, inserted bool) {
	h := Hash(sha256.Sum256(raw))
	k.mu.RLock()
	e = k.entries[h]
	k.mu.RUnlock()
	if e != nil {
		return e, false
	}
	// Compile outside the lock: two callers may compile one schema at
	// once, and the first to insert wins; lookups never wait on a compile.
	if len(raw) > k.maxBytes {
		e = &compiled{hash: h, err: errTooLarge}
	} else {
		e = compile(raw)
		e.hash, e.size = h, len(raw)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if got := k.entries[h]; got != nil {
		return got, false
	}
	for len(k.fifo) > 0 && (len(k.entries)+1 > k.maxEntries || k.bytes+e.size > k.maxBytes) {
		old := k.fifo[0]
		k.fifo[0] = Hash{}
		k.fifo = k.fifo[1:]
		k.bytes -= k.entries[old].size
		delete(k.entries, old)
	}
	k.entries[h] = e
	k.fifo = append(k.fifo, h)
	k.bytes += e.size
	return e, true
}

// Len reports how many schemas the cache holds and the bytes they count.
func (k *Cache) Len() (entries, bytes int) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.entries), k.bytes
}
