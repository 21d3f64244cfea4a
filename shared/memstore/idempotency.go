package memstore

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/idempotency"
	"github.com/aegis-gw/aegis/shared/store"
)

// ErrLedgerFull is ClaimKey's error when the ledger is at MaxLedgerRecords
// or MaxLedgerBytes and holds nothing it may drop (only pending claims).
// The gateway then forwards the call without the ledger, as when the store
// cannot be reached.
var ErrLedgerFull = errors.New("memstore: idempotency ledger full of pending claims")

// idemLedger holds idempotency records under its own lock: a map, and a
// list of the same entries in the order they were last written (claimed or
// completed), oldest first. Expired records are swept every sweepEvery
// claims and whenever a cap is reached; over a cap, the oldest completed
// records are forgotten first (a retry of a forgotten key runs the call
// again); pending claims are never dropped.
type idemLedger struct {
	mu    sync.Mutex
	m     map[string]*idemEntry
	order list.List // of *idemEntry, oldest write first
	bytes int
	sweep int
}

type idemEntry struct {
	key  string
	rec  idempotency.Record
	size int
	elem *list.Element
}

// idemOverhead is a record's fixed part in memory, rounded up.
const idemOverhead = 192

func idemSize(key string, r idempotency.Record) int {
	return idemOverhead + 2*len(key) + len(r.ParamsHash) + len(r.Holder) + len(r.Result) + len(r.Error)
}

func idemKey(tenant, key string) string { return tenant + "\x00" + key }

func (l *idemLedger) remove(e *idemEntry) {
	l.order.Remove(e.elem)
	delete(l.m, e.key)
	l.bytes -= e.size
}

// put stores r under k (replacing what is there) as the newest write.
func (l *idemLedger) put(k string, r idempotency.Record) {
	if old, ok := l.m[k]; ok {
		l.remove(old)
	}
	e := &idemEntry{key: k, rec: cloneIdem(r), size: idemSize(k, r)}
	e.elem = l.order.PushBack(e)
	l.m[k] = e
	l.bytes += e.size
}

// sweepExpired drops every record expired at now.
func (l *idemLedger) sweepExpired(now time.Time) {
	for f := l.order.Front(); f != nil; {
		e := f.Value.(*idemEntry)
		f = f.Next()
		if !e.rec.Expires.After(now) {
			l.remove(e)
		}
	}
}

// full reports whether one more record of size would be over b's caps.
func (l *idemLedger) full(b bounds, size int) bool {
	return len(l.m)+1 > b.ledgerRecords || l.bytes+size > b.ledgerBytes
}

// dropDone forgets the oldest completed records until one more record of
// size fits under b's caps, and reports whether it does. Pending claims
// are never dropped.
func (l *idemLedger) dropDone(b bounds, size int) bool {
	for f := l.order.Front(); f != nil && l.full(b, size); {
		e := f.Value.(*idemEntry)
		f = f.Next()
		if e.rec.Done {
			l.remove(e)
		}
	}
	return !l.full(b, size)
}

// ClaimKey implements idempotency.Store.
func (s *Store) ClaimKey(_ context.Context, tenant, key string, r idempotency.Record, now time.Time) (idempotency.Record, bool, error) {
	l := &s.idem
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*idemEntry{}
	}
	if l.sweep++; l.sweep >= sweepEvery {
		l.sweep = 0
		l.sweepExpired(now)
	}
	k := idemKey(tenant, key)
	if got, ok := l.m[k]; ok {
		if got.rec.Expires.After(now) {
			return cloneIdem(got.rec), false, nil
		}
		l.remove(got)
	}
	size := idemSize(k, r)
	if l.full(s.bounds, size) {
		l.sweepExpired(now)
	}
	if !l.dropDone(s.bounds, size) {
		return idempotency.Record{}, false, ErrLedgerFull
	}
	l.put(k, r)
	return idempotency.Record{}, true, nil
}

// CompleteKey implements idempotency.Store. A completion that does not fit
// under the caps makes room by dropping the oldest completed records.
func (s *Store) CompleteKey(_ context.Context, tenant, key, holder string, r idempotency.Record) error {
	l := &s.idem
	l.mu.Lock()
	defer l.mu.Unlock()
	k := idemKey(tenant, key)
	got, ok := l.m[k]
	if !ok || got.rec.Holder != holder || got.rec.Done {
		return store.ErrConflict
	}
	l.remove(got) // replaced by r
	l.dropDone(s.bounds, idemSize(k, r))
	l.put(k, r)
	return nil
}

// ReleaseKey implements idempotency.Store.
func (s *Store) ReleaseKey(_ context.Context, tenant, key, holder string) error {
	l := &s.idem
	l.mu.Lock()
	defer l.mu.Unlock()
	if got, ok := l.m[idemKey(tenant, key)]; ok && got.rec.Holder == holder && !got.rec.Done {
		l.remove(got)
	}
	return nil
}

func cloneIdem(r idempotency.Record) idempotency.Record {
	r.Result = append([]byte(nil), r.Result...)
	r.Error = append([]byte(nil), r.Error...)
	if len(r.Result) == 0 {
		r.Result = nil
	}
	if len(r.Error) == 0 {
		r.Error = nil
	}
	return r
}

var _ idempotency.Store = (*Store)(nil)
