// Package auditchaintest is the tamper suite of the audit chain: one set
// of scenarios (each tampering with a signed trail as someone who can
// write the table would, and asserting what `aegis audit verify` names)
// run on every place a trail is read from: the embedded store, DynamoDB
// and an export. Each store's tests give an Env that writes its trail and
// edits it behind the store's back.
package auditchaintest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/auditchain"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// Store is a store of a trail: records and checkpoints.
type Store interface {
	audit.Writer
	auditchain.Source
}

// Env is one place a trail lives, with the edits an attacker with write
// access to it can make.
type Env struct {
	Store Store
	// Replace puts new in place of old (the same record in the store:
	// same writer and seq, or same correlation id when unchained).
	Replace func(t *testing.T, old, new audit.Record)
	// Delete removes r.
	Delete func(t *testing.T, r audit.Record)
	// DeleteCheckpoint and ReplaceCheckpoint edit checkpoints.
	DeleteCheckpoint  func(t *testing.T, c audit.Checkpoint)
	ReplaceCheckpoint func(t *testing.T, old, new audit.Checkpoint)
	// Load reads the tenant's trail as verify does; nil: Collect over
	// every time.
	Load func(t *testing.T) auditchain.Data
}

// Tenant is the tenant of every scenario's trail.
const Tenant = "acme"

// T0 is the time of the first record of a trail (records are a second
// apart): recent, so that no retention drops it.
var T0 = time.Now().UTC().Truncate(time.Second).Add(-time.Hour)

// Record is the i-th record of a test trail, unchained.
func Record(i int) audit.Record {
	return audit.Record{
		Time: T0.Add(time.Duration(i) * time.Second), Tenant: Tenant, Caller: "agent", Session: "s1",
		CorrelationID: fmt.Sprintf("c-%02d", i), Layer: "gateway", Method: "tools/list", Server: "docs",
		Outcome: audit.OutcomeAllowed, LatencyMs: 1.25, PolicyHash: audit.PolicyHashNone,
		Degraded: []string{"ratelimit", "quota"}, // not sorted: DynamoDB keeps a set
		Findings: []audit.Finding{{At: audit.AtResult, Kind: "email", Rule: "email", Action: audit.ActionRedacted}},
	}
}

// Key returns a fresh signer and its verifier.
func Key(t testing.TB) (*auditchain.Ed25519Signer, *auditchain.Verifier) {
	_, k, _ := ed25519.GenerateKey(rand.Reader)
	s, err := auditchain.NewEd25519Signer(auditchain.LocalKeyName, k)
	if err != nil {
		t.Fatal(err)
	}
	vk, _ := s.Verifier(context.Background())
	v, err := auditchain.ParseVerifier(vk)
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

// NewWriter is a chaining writer over st that checkpoints only when told
// (Flush).
func NewWriter(t testing.TB, st Store, s auditchain.Signer) *auditchain.Writer {
	w, err := auditchain.New(st, auditchain.Options{Kind: "test", Signer: s, Checkpoints: st, Records: 1 << 20, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Abandon)
	return w
}

// Trail writes records 1..14 through one writer, checkpointing after 4,
// 8 and 12: three signed spans and an unsigned tail of two (a writer
// that died before its next checkpoint).
func Trail(t testing.TB, st Store, s auditchain.Signer) {
	w := NewWriter(t, st, s)
	for i := 1; i <= 14; i++ {
		if err := w.Write(context.Background(), Record(i)); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.Abandon()
}

func load(t *testing.T, e Env) auditchain.Data {
	if e.Load != nil {
		return e.Load(t)
	}
	d, err := auditchain.Collect(context.Background(), e.Store, Tenant, T0.Add(-24*time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// bySeq finds the record at seq (of the only writer) in d.
func bySeq(t *testing.T, d auditchain.Data, seq uint64) audit.Record {
	for _, r := range d.Records {
		if r.Seq == seq {
			return r
		}
	}
	t.Fatalf("no record at seq %d", seq)
	return audit.Record{}
}

func checkpoint(t *testing.T, d auditchain.Data, n uint64) audit.Checkpoint {
	for _, c := range d.Checkpoints {
		if c.Number == n {
			return c
		}
	}
	t.Fatalf("no checkpoint %d", n)
	return audit.Checkpoint{}
}

// rehash sets r's hash to what its fields hash to at its seq.
func rehash(t *testing.T, r audit.Record) audit.Record {
	h, err := auditchain.RecordHash(r, r.Seq)
	if err != nil {
		t.Fatal(err)
	}
	r.Hash = h
	return r
}

type want struct {
	kind auditchain.FaultKind
	seq  uint64 // 0: any
	cp   uint64 // 0: any
}

// Run runs every scenario on fresh Envs from ne.
func Run(t *testing.T, ne func(t *testing.T) Env) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, e Env, d auditchain.Data, other auditchain.Signer)
		want   []want // exactly these kinds, each at least once, at these places
		tail   int    // records verify reports unsigned
	}{
		{name: "untouched", tail: 2},
		{name: "changed", tail: 2, want: []want{{auditchain.Changed, 3, 0}},
			tamper: func(t *testing.T, e Env, d auditchain.Data, _ auditchain.Signer) {
				r := bySeq(t, d, 3)
				n := r
				n.Outcome, n.Code, n.Word, n.Slot = audit.OutcomeRefused, int(refusal.CodePolicyDenied), string(refusal.PolicyDenied), "policy"
				e.Replace(t, r, n)
			}},
		{name: "changed and rehashed", tail: 2, want: []want{{auditchain.Changed, 3, 0}},
			tamper: func(t *testing.T, e Env, d auditchain.Data, _ auditchain.Signer) {
				r := bySeq(t, d, 3)
				n := r
				n.Detail = "nothing happened here"
				e.Replace(t, r, rehash(t, n))
			}},
		{name: "chain rewritten", want: []want{{auditchain.Rewritten, 0, 1}, {auditchain.Changed, 0, 0}},
			tamper: func(t *testing.T, e Env, d auditchain.Data, _ auditchain.Signer) {
				prev := bySeq(t, d, 1).Hash
				for s := uint64(2); s <= 14; s++ {
					r := bySeq(t, d, s)
					n := r
					if s == 2 {
						n.Caller = "someone-else"
					}
					n.Prev = prev
					n = rehash(t, n)
					prev = n.Hash
					e.Replace(t, r, n)
				}
			}, tail: 2},
		{name: "removed", tail: 2, want: []want{{auditchain.Removed, 6, 2}},
			tamper: func(t *testing.T, e Env, d auditchain.Data, _ auditchain.Signer) { e.Delete(t, bySeq(t, d, 6)) }},
		{name: "inserted at a taken seq", tail: 2, want: []want{{auditchain.Inserted, 6, 0}},
			tamper: func(t *testing.T, e Env, d auditchain.Data, _ auditchain.Signer) {
				n := bySeq(t, d, 6)
				n.CorrelationID, n.Caller = "c-forged", "intruder"
				if err := e.Store.Write(context.Background(), rehash(t, n)); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "inserted unchained", tail: 2, want: []want{{auditchain.Inserted, 0, 0}},
			tamper: func(t *testing.T, e Env, d auditchain.Data, _ auditchain.Signer) {
				n := Record(7)
				n.CorrelationID = "c-forged"
				if err := e.Store.Write(context.Background(), n); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "reordered", tail: 2, want: []want{{auditchain.Reordered, 6, 0}, {auditchain.Reordered, 7, 0}},
			tamper: func(t *testing.T, e Env, d auditchain.Data, _ auditchain.Signer) {
				a, b := bySeq(t, d, 6), bySeq(t, d, 7)
				na, nb := a, b
				na.Seq, nb.Seq = 7, 6
				e.Replace(t, a, na)
				e.Replace(t, b, nb)
			}},
		{name: "checkpoint removed", tail: 2, want: []want{{auditchain.CheckpointRemoved, 0, 2}},
			tamper: func(t *testing.T, e Env, d auditchain.Data, _ auditchain.Signer) {
				e.DeleteCheckpoint(t, checkpoint(t, d, 2))
			}},
		{name: "checkpoint forged", tail: 2, want: []want{{auditchain.CheckpointForged, 0, 2}},
			tamper: func(t *testing.T, e Env, d auditchain.Data, other auditchain.Signer) {
				c := checkpoint(t, d, 2)
				n := c
				n.Note = resign(t, c.Note, other)
				e.ReplaceCheckpoint(t, c, n)
			}},
		// The records the edited checkpoint signed are now the unsigned tail.
		{name: "checkpoint edited", tail: 6, want: []want{{auditchain.CheckpointForged, 0, 3}},
			tamper: func(t *testing.T, e Env, d auditchain.Data, other auditchain.Signer) {
				c := checkpoint(t, d, 3)
				n := c
				n.Note = string(bytes.Replace([]byte(c.Note), []byte("\nsize 12\n"), []byte("\nsize 11\n"), 1))
				if n.Note == c.Note {
					t.Fatal("checkpoint 3 has no size line to edit")
				}
				e.ReplaceCheckpoint(t, c, n)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := ne(t)
			s, v := Key(t)
			other, _ := Key(t)
			Trail(t, e.Store, s)
			if tc.tamper != nil {
				tc.tamper(t, e, load(t, e), other)
			}
			rep := auditchain.Verify(load(t, e), []*auditchain.Verifier{v})
			check(t, rep, tc.want, tc.tail)
		})
	}
	t.Run("two writers interleaved", func(t *testing.T) {
		e := ne(t)
		s, v := Key(t)
		w1, w2 := NewWriter(t, e.Store, s), NewWriter(t, e.Store, s)
		for i := 1; i <= 20; i++ {
			w := w1
			if i%2 == 0 {
				w = w2
			}
			if err := w.Write(context.Background(), Record(i)); err != nil {
				t.Fatal(err)
			}
			if i%7 == 0 {
				_ = w1.Flush()
			}
		}
		if err := errors.Join(w1.Flush(), w2.Flush()); err != nil {
			t.Fatal(err)
		}
		rep := auditchain.Verify(load(t, e), []*auditchain.Verifier{v})
		check(t, rep, nil, 0)
		if len(rep.Writers) != 2 || rep.Writers[0].Records != 10 || rep.Writers[1].Records != 10 {
			t.Fatalf("writers = %+v; want two of 10 records", rep.Writers)
		}
	})
	t.Run("a write that failed", func(t *testing.T) {
		e := ne(t)
		s, v := Key(t)
		w := NewWriter(t, failing{e.Store, "c-05"}, s)
		var failed int
		for i := 1; i <= 8; i++ {
			if w.Write(context.Background(), Record(i)) != nil {
				failed++
			}
		}
		if err := w.Flush(); err != nil || failed != 1 {
			t.Fatalf("flush: %v, %d writes failed; want nil and 1", err, failed)
		}
		rep := auditchain.Verify(load(t, e), []*auditchain.Verifier{v})
		check(t, rep, nil, 0)
		if !slices.ContainsFunc(rep.Unknown, func(u auditchain.Unknown) bool {
			return u.Records == 1 && bytes.Contains([]byte(u.Detail), []byte("write failed"))
		}) {
			t.Fatalf("unknown = %+v; want the lost record named", rep.Unknown)
		}
	})
}

// failing fails the write of the record with one correlation id.
type failing struct {
	Store
	corr string
}

func (f failing) Write(ctx context.Context, r audit.Record) error {
	if r.CorrelationID == f.corr {
		return errors.New("store unreachable")
	}
	return f.Store.Write(ctx, r)
}

// resign signs note's text again with s (a key verify was not given).
func resign(t *testing.T, note string, s auditchain.Signer) string {
	i := bytes.LastIndex([]byte(note), []byte("\n\n"))
	text := note[:i+1]
	sig, err := s.Sign(context.Background(), []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	vk, _ := s.Verifier(context.Background())
	v, _ := auditchain.ParseVerifier(vk)
	return auditchain.SignedNote(text, v, sig)
}

func check(t *testing.T, rep auditchain.Report, wants []want, tail int) {
	t.Helper()
	for _, w := range wants {
		if !slices.ContainsFunc(rep.Faults, func(f auditchain.Fault) bool {
			return f.Kind == w.kind && (w.seq == 0 || f.Seq == w.seq) && (w.cp == 0 || f.Checkpoint == w.cp)
		}) {
			t.Errorf("no %s fault at seq %d checkpoint %d", w.kind, w.seq, w.cp)
		}
	}
	for _, f := range rep.Faults {
		if !slices.ContainsFunc(wants, func(w want) bool { return w.kind == f.Kind }) {
			t.Errorf("unexpected fault: %s", f)
		}
	}
	unsigned := 0
	for _, w := range rep.Writers {
		unsigned += w.Unsigned
	}
	if unsigned != tail {
		t.Errorf("unsigned records = %d; want %d (%+v)", unsigned, tail, rep.Writers)
	}
	if t.Failed() {
		for _, f := range rep.Faults {
			t.Logf("fault: %s", f)
		}
		for _, u := range rep.Unknown {
			t.Logf("unknown: %+v", u)
		}
	}
}
