// Package idempotency is the gateway's ledger of Idempotency-Key calls, per
// tenant. The first call with a key claims it (a pending record with a
// lease); when the upstream answers, the answer is recorded; a retry with
// the same key and the same params gets the recorded answer without a
// second upstream call. The same key with different params is -32602; a
// retry while the first call is in flight is -32063.
//
// The ledger sits in the gateway's forward step, after the whole pipeline
// (a retry is checked like any call: a stopped tool stays stopped) and
// before the upstream call, which it replaces when it can answer. The
// recorded answer then goes through result scanning like a fresh one.
//
// An upstream failure (-32000) or timeout (-32064) records nothing and
// frees the key: the retry goes upstream again carrying the same key, in
// the Idempotency-Key header and params._meta, so an upstream that honours
// keys can recognise it.
//
// An answer over MaxAnswerBytes is not kept: the ledger records that the
// call completed, without its answer, and a retry with the key is refused
// with -32602 (NotKeptMessage) instead of running the call again.
package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/store"
)

// MetaKey is the params._meta member that carries the key upstream.
const MetaKey = "idempotencyKey"

// MaxKeyLen bounds a client's key.
const MaxKeyLen = 255

// MaxAnswerBytes caps the answer (result or JSON-RPC error object) the
// ledger keeps for a retry: 256 KiB, the size of a large tool result
// (a page of text, a small image) and well inside a DynamoDB item (400
// KB). A larger answer is still returned to the call that got it; the
// ledger keeps only that the call completed (a done Record without Result
// or Error), and a retry with the same key and params gets -32602 with
// NotKeptMessage: the call is not run twice, and the client knows to use a
// new key to run it again.
const MaxAnswerBytes = 256 << 10

// NotKeptMessage is the -32602 message of a retry whose answer was not
// kept.
const NotKeptMessage = "Invalid params: the call with this Idempotency-Key completed, but its answer was larger than the ledger keeps (262144 bytes) and cannot be replayed; use a new key to run the call again"

// Record is one ledger entry. A Done record with neither Result nor Error
// is a call whose answer was over MaxAnswerBytes (an upstream answer always
// has one of them).
type Record struct {
	ParamsHash string
	Holder     string    // the call that claimed the key
	Done       bool      // the call completed (its answer recorded, unless over MaxAnswerBytes)
	Result     []byte    // the upstream's result, when Done and not an error
	Error      []byte    // the upstream's JSON-RPC error object, when Done
	Expires    time.Time // pending: the claim's lease; done: end of retention
}

// Store keeps ledger records, keyed by tenant and key. Implementations
// check expiry inside the operation (an expired record is absent).
type Store interface {
	// ClaimKey creates r under (tenant, key) unless a live record is there;
	// it returns the live record and false in that case.
	ClaimKey(ctx context.Context, tenant, key string, r Record, now time.Time) (Record, bool, error)
	// CompleteKey turns holder's pending claim into a done record r.
	// store.ErrConflict when the claim is no longer holder's.
	CompleteKey(ctx context.Context, tenant, key, holder string, r Record) error
	// ReleaseKey deletes holder's pending claim (nothing is recorded).
	ReleaseKey(ctx context.Context, tenant, key, holder string) error
}

// Options configure a Ledger.
type Options struct {
	Store     Store
	Retention time.Duration    // how long an answer is replayed; 0: 24h
	LeaseTTL  time.Duration    // how long a pending claim holds; 0: 60s
	Now       func() time.Time // nil: time.Now
}

// Ledger is the gateway's view of the store.
type Ledger struct{ o Options }

// New returns a ledger; o is copied and defaults filled.
func New(o Options) *Ledger {
	if o.Retention <= 0 {
		o.Retention = 24 * time.Hour
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Ledger{o: o}
}

// Hash is the ledger's fingerprint of a tools/call: server, tool and the
// canonical arguments (key order and spacing do not matter; _meta does not
// count).
func Hash(server, tool string, params json.RawMessage) string {
	args, err := audit.Canonical(jsonrpc.Member(params, "arguments"))
	if err != nil {
		args = jsonrpc.Member(params, "arguments")
	}
	h := sha256.New()
	h.Write([]byte(server))
	h.Write([]byte{0})
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(args)
	return hex.EncodeToString(h.Sum(nil))
}

// NewHolder returns a fresh random holder id for Begin.
func NewHolder() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Claim is a call's claim on a key: either a recorded answer to replay
// (Replay), or a claim to settle with Complete or Release.
type Claim struct {
	l              *Ledger
	tenant, key    string
	holder, hash   string
	Replay         bool
	Result, ErrObj []byte // the recorded answer, when Replay
}

// Begin claims key for a call with params hash. It returns a refusal when
// the key was used with other params (-32602) or is in flight (-32063).
// When the store is unavailable the call goes on without the ledger (nil
// claim, nil refusal, and err set for the log).
func (l *Ledger) Begin(ctx context.Context, tenant, key, hash, holder string) (*Claim, *refusal.Refusal, error) {
	if len(key) > MaxKeyLen {
		return nil, refusal.New(refusal.InvalidParams, "Invalid params: Idempotency-Key is longer than 255 characters"), nil
	}
	now := l.o.Now()
	rec := Record{ParamsHash: hash, Holder: holder, Expires: now.Add(l.o.LeaseTTL)}
	got, created, err := l.o.Store.ClaimKey(ctx, tenant, key, rec, now)
	if err != nil {
		return nil, nil, err
	}
	c := &Claim{l: l, tenant: tenant, key: key, holder: holder, hash: hash}
	if created {
		return c, nil, nil
	}
	switch {
	case got.ParamsHash != hash:
		return nil, refusal.New(refusal.InvalidParams, "Invalid params: Idempotency-Key was already used with different params"), nil
	case !got.Done:
		return nil, refusal.New(refusal.UpstreamUnavailable, "Upstream unavailable: a call with this Idempotency-Key is still in flight; retry later with the same key"), nil
	case got.Result == nil && got.Error == nil:
		return nil, refusal.New(refusal.InvalidParams, NotKeptMessage).With("answer_cap_bytes", MaxAnswerBytes), nil
	}
	c.Replay, c.Result, c.ErrObj = true, got.Result, got.Error
	return c, nil, nil
}

// Complete records the upstream's answer (result or JSON-RPC error
// object); over MaxAnswerBytes, only that the call completed.
func (c *Claim) Complete(ctx context.Context, result, errObj []byte) error {
	if len(result)+len(errObj) > MaxAnswerBytes {
		result, errObj = nil, nil
	}
	r := Record{ParamsHash: c.hash, Holder: c.holder, Done: true, Result: result, Error: errObj, Expires: c.l.o.Now().Add(c.l.o.Retention)}
	err := c.l.o.Store.CompleteKey(ctx, c.tenant, c.key, c.holder, r)
	if errors.Is(err, store.ErrConflict) {
		return nil // our lease ran out and another call took the key: it records its own answer
	}
	return err
}

// Release frees the key without recording anything.
func (c *Claim) Release(ctx context.Context) error {
	return c.l.o.Store.ReleaseKey(ctx, c.tenant, c.key, c.holder)
}
