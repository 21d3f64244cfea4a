package auditchain

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
)

// LocalTenant is the tenant name a Local chain's checkpoints carry: a
// local file has no tenant.
const LocalTenant = "local"

// Local is one chain kept by a process outside any store: `aegis wrap`'s
// audit file, whose lines it links in the order it writes them and whose
// checkpoints it signs for the caller to write beside them. The caller
// numbers lines from 1 and gives them in order. Safe for concurrent use.
type Local struct {
	mu     sync.Mutex
	id     string
	signer Signer
	seq    uint64
	head   [32]byte
	cp     body
	from   time.Time // the earliest time since the last checkpoint
	first  time.Time // when the first line since it was linked
}

// LocalState is a Local's place, to go back to when a batch of lines
// was linked and then not written.
type LocalState struct {
	seq         uint64
	head        [32]byte
	from, first time.Time
}

// NewLocal starts a chain for a writer of kind, signed by s.
func NewLocal(kind string, s Signer) *Local {
	var r [6]byte
	_, _ = rand.Read(r[:])
	l := &Local{id: kind + "-" + hex.EncodeToString(r[:]), signer: s}
	l.cp = body{Head: Genesis, PrevHead: Genesis, PrevText: Genesis}
	return l
}

// Writer is the chain's writer id.
func (l *Local) Writer() string { return l.id }

// Save returns the chain's place.
func (l *Local) Save() LocalState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LocalState{l.seq, l.head, l.from, l.first}
}

// Restore goes back to a place Save returned (the lines linked since
// were not written).
func (l *Local) Restore(s LocalState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq, l.head, l.from, l.first = s.seq, s.head, s.from, s.first
}

// Link chains the line numbered seq (the next one) whose content digest
// is d and whose time is at, and returns its prev and hash.
func (l *Local) Link(seq uint64, d [32]byte, at time.Time) (prev, hash string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq != l.seq+1 {
		return "", "", fmt.Errorf("auditchain: line %d linked after %d", seq, l.seq)
	}
	h := Link(l.id, seq, l.head, d)
	prev, hash = hex.EncodeToString(l.head[:]), hex.EncodeToString(h[:])
	l.seq, l.head = seq, h
	if l.first.IsZero() {
		l.first, l.from = time.Now(), at
	} else if at.Before(l.from) {
		l.from = at
	}
	return prev, hash, nil
}

// Due reports whether a checkpoint is due: DefaultRecords lines since the
// last one, or DefaultInterval since the first of them.
func (l *Local) Due() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq > l.cp.Size && (l.seq-l.cp.Size >= DefaultRecords || time.Since(l.first) >= DefaultInterval)
}

// Checkpoint signs the lines since the last checkpoint; ok is false when
// there are none. The caller writes it; if it cannot, the lines stay
// covered by the next one (which names this one as its previous: write
// every checkpoint Checkpoint returns, or verify names it removed).
func (l *Local) Checkpoint(ctx context.Context, now time.Time) (c audit.Checkpoint, ok bool, err error) {
	l.mu.Lock()
	if l.seq == l.cp.Size {
		l.mu.Unlock()
		return c, false, nil
	}
	next := body{Tenant: LocalTenant, Writer: l.id, Number: l.cp.Number + 1, Size: l.seq,
		Head: hex.EncodeToString(l.head[:]), From: l.from, Time: now,
		PrevNumber: l.cp.Number, PrevSize: l.cp.Size, PrevHead: l.cp.Head, PrevText: Genesis}
	if l.cp.Number > 0 {
		next.PrevText = textHash(l.cp.text())
	}
	l.mu.Unlock()
	note, err := signNote(ctx, next.text(), l.signer)
	if err != nil {
		return c, false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cp.Number+1 != next.Number {
		return c, false, fmt.Errorf("auditchain: checkpoint %d made twice at once", next.Number)
	}
	l.cp, l.first, l.from = next, time.Time{}, time.Time{}
	if l.seq > next.Size { // lines linked while it was signed
		l.first, l.from = time.Now(), now
	}
	return audit.Checkpoint{Writer: l.id, Number: next.Number, Time: now, Note: note}, true, nil
}
