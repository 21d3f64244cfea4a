package memstore

import (
	"context"
	"encoding/base64"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
)

// MaxAuditCheckpoints caps the checkpoints the embedded store keeps per
// tenant; the oldest go first (KeptSince moves past them).
const MaxAuditCheckpoints = 4096

// PutCheckpoint implements audit.CheckpointStore.
func (s *Store) PutCheckpoint(_ context.Context, tenant string, c audit.Checkpoint) error {
	switch {
	case tenant == "" || c.Writer == "" || c.Number == 0 || c.Time.IsZero():
		return errors.New("memstore: checkpoint without tenant, writer, number or time")
	case len(c.Note) > audit.MaxNoteBytes:
		return errors.New("memstore: checkpoint note too long")
	}
	c.Time = c.Time.UTC()
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byTenant == nil {
		a.byTenant = map[string]*tenantAudit{}
	}
	t := a.byTenant[tenant]
	if t == nil {
		t = &tenantAudit{}
		a.byTenant[tenant] = t
	}
	for _, o := range t.cps {
		if o.Writer == c.Writer && o.Number == c.Number {
			if o.Note == c.Note {
				return nil
			}
			return audit.ErrCheckpointConflict
		}
	}
	i := sort.Search(len(t.cps), func(i int) bool { return t.cps[i].Time.After(c.Time) })
	t.cps = append(t.cps, audit.Checkpoint{})
	copy(t.cps[i+1:], t.cps[i:])
	t.cps[i] = c
	now, ret := a.clock()
	drop := 0
	for drop < len(t.cps) && (!t.cps[drop].Time.Add(ret).After(now) || len(t.cps)-drop > MaxAuditCheckpoints) {
		if at := t.cps[drop].Time; at.Add(ret).After(now) && at.After(t.dropped) {
			t.dropped = at
		}
		drop++
	}
	if drop > 0 {
		t.cps = append(t.cps[:0:0], t.cps[drop:]...)
	}
	return nil
}

// QueryCheckpoints implements audit.CheckpointStore: oldest first, expired
// ones excluded; the cursor is the index after the last returned one
// within the range, which a write may shift (a page may then repeat or
// skip one: PutCheckpoint keeps them sorted, and a reader dedupes).
func (s *Store) QueryCheckpoints(_ context.Context, q audit.Query) ([]audit.Checkpoint, string, error) {
	limit := audit.PageSize(q.Limit)
	skip := 0
	if q.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		if err != nil {
			return nil, "", audit.ErrBadCursor
		}
		if skip, err = strconv.Atoi(string(b)); err != nil || skip < 0 {
			return nil, "", audit.ErrBadCursor
		}
	}
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	now, ret := a.clock()
	var l []audit.Checkpoint
	if t := a.byTenant[q.Tenant]; t != nil {
		l = t.cps
	}
	i := sort.Search(len(l), func(i int) bool { return !l[i].Time.Before(q.From) }) + skip
	var out []audit.Checkpoint
	for ; i < len(l) && l[i].Time.Before(q.To); i++ {
		if !l[i].Time.Add(ret).After(now) {
			skip++
			continue
		}
		if len(out) == limit {
			return out, base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(skip))), nil
		}
		out = append(out, l[i])
		skip++
	}
	return out, "", nil
}

// KeptSince implements audit.CheckpointStore: the retention horizon, or
// just after the newest record or checkpoint a bound dropped.
func (s *Store) KeptSince(_ context.Context, tenant string) (time.Time, error) {
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	now, ret := a.clock()
	since := now.Add(-ret)
	if t := a.byTenant[tenant]; t != nil && !t.dropped.Before(since) {
		since = t.dropped.Add(time.Nanosecond)
	}
	return since, nil
}

var _ audit.CheckpointStore = (*Store)(nil)
