package memstore

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
)

// DefaultAuditRetention is how long audit records are kept unless
// SetAuditRetention says otherwise (AUDIT_RETENTION_DAYS=90).
const DefaultAuditRetention = 90 * 24 * time.Hour

// MaxAuditRecords is how many audit records the embedded store keeps per
// tenant, with at most MaxAuditBytes of them; older ones are dropped first.
// DynamoDB keeps everything until its TTL.
const MaxAuditRecords = 10000

type auditLog struct {
	mu        sync.Mutex
	seq       int64
	retention time.Duration
	now       func() time.Time
	byTenant  map[string][]auditRec // sorted by sort key
	bytes     map[string]int        // per tenant: the sum of its records' sizes
}

type auditRec struct {
	sk   string
	r    audit.Record
	size int
}

// SetAuditRetention sets how long audit records stay readable (the
// AuditRetention setting) and the clock that ages them (nil = time.Now).
// Expired records are never returned, whether or not they were swept yet.
func (s *Store) SetAuditRetention(d time.Duration, now func() time.Time) {
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	a.retention, a.now = d, now
}

func (a *auditLog) clock() (time.Time, time.Duration) {
	now, ret := time.Now, a.retention
	if a.now != nil {
		now = a.now
	}
	if ret <= 0 {
		ret = DefaultAuditRetention
	}
	return now(), ret
}

// auditSortKey orders records by time, then by arrival.
func auditSortKey(t time.Time, seq int64) string {
	return t.UTC().Format(audit.SortTimeLayout) + "#" + strconv.FormatInt(1e15+seq, 10)
}

// Write implements audit.Writer. The record is kept Bounded: its long
// fields cut, with a marker.
func (s *Store) Write(_ context.Context, r audit.Record) error {
	if r.Tenant == "" {
		return errors.New("memstore: audit record without tenant")
	}
	r = r.Bounded()
	r.Degraded = slices.Clone(r.Degraded)
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byTenant == nil {
		a.byTenant = map[string][]auditRec{}
		a.bytes = map[string]int{}
	}
	a.seq++
	rec := auditRec{sk: auditSortKey(r.Time, a.seq), r: r}
	rec.size = len(rec.sk) + r.Size()
	bytes := a.bytes[r.Tenant] + rec.size
	l := a.byTenant[r.Tenant]
	i := sort.Search(len(l), func(i int) bool { return l[i].sk > rec.sk })
	l = append(l, auditRec{})
	copy(l[i+1:], l[i:])
	l[i] = rec
	// Sweep the expired head: records are sorted by time.
	now, ret := a.clock()
	drop := 0
	for drop < len(l) && !l[drop].r.Time.Add(ret).After(now) {
		drop++
	}
	// Bound memory: the embedded store keeps the newest MaxAuditRecords
	// per tenant, at most MaxAuditBytes of them (a long `aegis serve` run
	// must not grow without limit).
	if n := len(l) - drop; n > s.bounds.auditRecords {
		drop += n - s.bounds.auditRecords
	}
	for i := range drop {
		bytes -= l[i].size
	}
	for drop < len(l)-1 && bytes > s.bounds.auditBytes {
		bytes -= l[drop].size
		drop++
	}
	// Reslicing keeps the dropped head in the array until append next grows
	// it; clearing it lets its records go now, and the growth copies only
	// live records, so memory stays bounded.
	clear(l[:drop])
	a.byTenant[r.Tenant] = l[drop:]
	a.bytes[r.Tenant] = bytes
	return nil
}

// Query implements audit.Reader: oldest first, From inclusive, To exclusive,
// expired records excluded. The cursor is opaque.
func (s *Store) Query(_ context.Context, q audit.Query) ([]audit.Record, string, error) {
	limit := audit.PageSize(q.Limit)
	after := ""
	if q.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		if err != nil {
			return nil, "", audit.ErrBadCursor
		}
		after = string(b)
	}
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	now, ret := a.clock()
	from := q.From.UTC().Format(audit.SortTimeLayout)
	to := q.To.UTC().Format(audit.SortTimeLayout)
	l := a.byTenant[q.Tenant]
	i := sort.Search(len(l), func(i int) bool { return l[i].sk >= from && l[i].sk > after })
	var out []audit.Record
	last := ""
	for ; i < len(l) && l[i].sk < to; i++ {
		if !l[i].r.Time.Add(ret).After(now) {
			continue // expired: never returned, whatever the sweep did
		}
		if len(out) == limit {
			return out, base64.RawURLEncoding.EncodeToString([]byte(last)), nil
		}
		out = append(out, l[i].r)
		last = l[i].sk
	}
	return out, "", nil
}

var (
	_ audit.Writer = (*Store)(nil)
	_ audit.Reader = (*Store)(nil)
)
