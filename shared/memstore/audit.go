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
	"github.com/aegis-gw/aegis/shared/timefmt"
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
	byTenant  map[string]*tenantAudit
}

// tenantAudit is one tenant's records, sorted by sort key: recs[head:] are
// live; the slots before head were dropped (and cleared), and are reused by
// moving the live records down when an append would otherwise grow the
// array, so a full log costs no allocation per record.
type tenantAudit struct {
	recs  []auditRec
	head  int
	bytes int // the sum of the live records' sizes
	// cps are the tenant's checkpoints, by time (checkpoint.go), at most
	// MaxAuditCheckpoints.
	cps []audit.Checkpoint
	// dropped is the newest time of a record or checkpoint the bounds
	// dropped before it expired (KeptSince).
	dropped time.Time
}

func (t *tenantAudit) live() []auditRec { return t.recs[t.head:] }

// lateSteps is how far back insert looks one record at a time before it
// searches: a record is late by at most the calls in flight beside it.
const lateSteps = 16

// insert puts rec in sort-key order: at the end, unless a record written
// at the same time by another call sorts after it.
func (t *tenantAudit) insert(rec auditRec) {
	l := t.live()
	i := len(l)
	for back := 0; i > 0 && l[i-1].sk > rec.sk; back++ {
		if back == lateSteps {
			i = sort.Search(i, func(j int) bool { return l[j].sk > rec.sk })
			break
		}
		i--
	}
	if len(t.recs) == cap(t.recs) && t.head > 0 {
		n := len(l)
		if free := cap(t.recs) - n; free < n/4 {
			// Too little room would move the records at every few
			// writes: grow once by half.
			grown := make([]auditRec, n, n+n/2+1)
			copy(grown, l)
			t.recs = grown
		} else {
			copy(t.recs, l)
			clear(t.recs[n:])
			t.recs = t.recs[:n]
		}
		t.head = 0
		l = t.recs
	}
	t.recs = append(t.recs, auditRec{})
	l = t.live()
	copy(l[i+1:], l[i:])
	l[i] = rec
}

// dropHead drops the n oldest live records.
func (t *tenantAudit) dropHead(n int, now time.Time, ret time.Duration) {
	l := t.live()
	for i := range n {
		t.bytes -= l[i].size
		if at := l[i].r.Time; at.Add(ret).After(now) && at.After(t.dropped) {
			t.dropped = at // dropped by a bound, not expired
		}
	}
	// Clearing the slots lets their records go now.
	clear(l[:n])
	t.head += n
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
	var buf [64]byte
	b := timefmt.AppendSortTime(buf[:0], t)
	b = append(b, '#')
	return string(strconv.AppendInt(b, 1e15+seq, 10))
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
		a.byTenant = map[string]*tenantAudit{}
	}
	a.seq++
	rec := auditRec{sk: auditSortKey(r.Time, a.seq), r: r}
	rec.size = len(rec.sk) + r.Size()
	t := a.byTenant[r.Tenant]
	if t == nil {
		t = &tenantAudit{}
		a.byTenant[r.Tenant] = t
	}
	t.insert(rec)
	t.bytes += rec.size
	// Sweep the expired head: records are sorted by time.
	l := t.live()
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
	bytes := t.bytes
	for i := range drop {
		bytes -= l[i].size
	}
	for drop < len(l)-1 && bytes > s.bounds.auditBytes {
		bytes -= l[drop].size
		drop++
	}
	t.dropHead(drop, now, ret)
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
	var l []auditRec
	if t := a.byTenant[q.Tenant]; t != nil {
		l = t.live()
	}
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
