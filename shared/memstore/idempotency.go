package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/idempotency"
	"github.com/aegis-gw/aegis/shared/store"
)

// idemLedger holds idempotency records under its own lock.
type idemLedger struct {
	mu    sync.Mutex
	m     map[string]idempotency.Record
	sweep int
}

func idemKey(tenant, key string) string { return tenant + "\x00" + key }

// ClaimKey implements idempotency.Store.
func (s *Store) ClaimKey(_ context.Context, tenant, key string, r idempotency.Record, now time.Time) (idempotency.Record, bool, error) {
	l := &s.idem
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]idempotency.Record{}
	}
	if l.sweep++; l.sweep >= sweepEvery {
		l.sweep = 0
		for k, v := range l.m {
			if !v.Expires.After(now) {
				delete(l.m, k)
			}
		}
	}
	k := idemKey(tenant, key)
	if got, ok := l.m[k]; ok && got.Expires.After(now) {
		return cloneIdem(got), false, nil
	}
	l.m[k] = cloneIdem(r)
	return idempotency.Record{}, true, nil
}

// CompleteKey implements idempotency.Store.
func (s *Store) CompleteKey(_ context.Context, tenant, key, holder string, r idempotency.Record) error {
	l := &s.idem
	l.mu.Lock()
	defer l.mu.Unlock()
	k := idemKey(tenant, key)
	got, ok := l.m[k]
	if !ok || got.Holder != holder || got.Done {
		return store.ErrConflict
	}
	l.m[k] = cloneIdem(r)
	return nil
}

// ReleaseKey implements idempotency.Store.
func (s *Store) ReleaseKey(_ context.Context, tenant, key, holder string) error {
	l := &s.idem
	l.mu.Lock()
	defer l.mu.Unlock()
	k := idemKey(tenant, key)
	if got, ok := l.m[k]; ok && got.Holder == holder && !got.Done {
		delete(l.m, k)
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
