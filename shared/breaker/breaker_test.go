package breaker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/testclock"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/breaker"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/upstream"
)

var srv = &registry.Server{Tenant: "acme", Name: "tools"}

func call() *pipeline.Call {
	return &pipeline.Call{Tenant: registry.Tenant{ID: "acme"}, Server: srv}
}

func code(err error) refusal.Code {
	var r *refusal.Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	return 0
}

func TestStateMachine(t *testing.T) {
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	k := breaker.New(breaker.Options{Store: memstore.New(), Threshold: 3, Cooldown: 10 * time.Second, Now: clk.Now})
	ctx := context.Background()
	fail := &upstream.HTTPError{Status: 500}
	// Two failures, a success, two failures: not consecutive, still closed.
	for _, err := range []error{fail, fail, nil, fail, fail} {
		k.Observe(srv, err)
	}
	if err := k.Check(ctx, call()); err != nil {
		t.Fatalf("closed circuit refused: %v", err)
	}
	// Errors that are not the upstream's do not count either.
	k.Observe(srv, &upstream.CredentialError{Ref: "env:X"})
	k.Observe(srv, fail) // third consecutive: open
	if c := code(k.Check(ctx, call())); c != refusal.CodeUpstreamUnavailable {
		t.Fatalf("after 3 consecutive failures: %v; want -32063", c)
	}
	clk.Advance(9 * time.Second)
	if c := code(k.Check(ctx, call())); c != refusal.CodeUpstreamUnavailable {
		t.Fatalf("during the cooldown: %v; want -32063", c)
	}
	// The injected clock is the only time source: the cooldown ends
	// exactly 10s after the opening failure.
	clk.Advance(time.Second)
	// Cooldown over: exactly one of many concurrent calls is the probe.
	var admitted atomic.Int64
	var wg sync.WaitGroup
	calls := make([]*pipeline.Call, 20)
	for i := range calls {
		calls[i] = call()
		wg.Add(1)
		go func(c *pipeline.Call) {
			defer wg.Done()
			if k.Check(ctx, c) == nil {
				admitted.Add(1)
			}
		}(calls[i])
	}
	wg.Wait()
	if admitted.Load() != 1 {
		t.Fatalf("%d probes admitted; want 1", admitted.Load())
	}
	// The probe ends without reaching the upstream (e.g. answered from the
	// idempotency ledger): the probe is given back.
	for _, c := range calls {
		c.Finish(audit.OutcomeAllowed)
	}
	probe := call()
	if err := k.Check(ctx, probe); err != nil {
		t.Fatalf("probe not given back: %v", err)
	}
	k.Observe(srv, nil) // success closes
	probe.Finish(audit.OutcomeAllowed)
	for range 3 {
		if err := k.Check(ctx, call()); err != nil {
			t.Fatalf("after a successful probe: %v", err)
		}
	}
}

func TestLeasesExpire(t *testing.T) {
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	k := breaker.New(breaker.Options{Store: memstore.New(), MaxConcurrent: 1, LeaseTTL: time.Minute, Now: clk.Now})
	ctx := context.Background()
	if err := k.Check(ctx, call()); err != nil { // never finished: its process "died"
		t.Fatal(err)
	}
	if c := code(k.Check(ctx, call())); c != refusal.CodeUpstreamUnavailable {
		t.Fatalf("second call with limit 1: %v; want -32063", c)
	}
	clk.Advance(time.Minute)
	c := call()
	if err := k.Check(ctx, c); err != nil {
		t.Fatalf("after the dead holder's lease expired: %v", err)
	}
	c.Finish(audit.OutcomeAllowed)
	if err := k.Check(ctx, call()); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// countingStore counts the circuit reads that reach the shared store.
type countingStore struct {
	breaker.Store
	reads atomic.Int64
}

func (s *countingStore) Circuit(ctx context.Context, key string) (breaker.Circuit, error) {
	s.reads.Add(1)
	return s.Store.Circuit(ctx, key)
}

// TestCircuitReadOncePerReread: a process that read a circuit closed and
// clean decides the next calls within Reread without reading it; a failure
// it sees itself makes it read at once; a circuit another process opened is
// seen once Reread has passed.
func TestCircuitReadOncePerReread(t *testing.T) {
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	shared := &countingStore{Store: memstore.New()}
	o := breaker.Options{Store: shared, Threshold: 2, Cooldown: 10 * time.Second, Now: clk.Now}
	a, b := breaker.New(o), breaker.New(o)
	ctx := context.Background()
	check := func(k *breaker.Check) refusal.Code {
		c := call()
		defer c.Finish(audit.OutcomeAllowed)
		return code(k.Check(ctx, c))
	}
	for i := range 5 {
		if got := check(a); got != 0 {
			t.Fatalf("call %d: %v", i, got)
		}
	}
	if n := shared.reads.Load(); n != 1 {
		t.Fatalf("5 calls within Reread read the circuit %d times; want 1", n)
	}
	clk.Advance(999 * time.Millisecond)
	check(a)
	if n := shared.reads.Load(); n != 1 {
		t.Fatalf("a call 999ms after the read read again (%d reads)", n)
	}
	clk.Advance(time.Millisecond)
	check(a)
	if n := shared.reads.Load(); n != 2 {
		t.Fatalf("a call Reread after the read: %d reads; want 2", n)
	}
	// b opens the circuit (two failures it saw); a still holds a fresh
	// clean read, so its next call goes through, and once Reread has
	// passed it reads the open circuit and refuses.
	b.Observe(srv, &upstream.HTTPError{Status: 502})
	b.Observe(srv, &upstream.HTTPError{Status: 502})
	if got := check(b); got != refusal.CodeUpstreamUnavailable {
		t.Fatalf("b after two failures: %v; want -32063", got)
	}
	if got := check(a); got != 0 {
		t.Fatalf("a within Reread of its clean read: %v; want allowed (the documented lag)", got)
	}
	clk.Advance(time.Second)
	if got := check(a); got != refusal.CodeUpstreamUnavailable {
		t.Fatalf("a after Reread: %v; want -32063", got)
	}
	// After the cooldown and a successful probe through b, a failure a sees
	// itself makes its very next call read the circuit.
	clk.Advance(10 * time.Second)
	if got := check(b); got != 0 {
		t.Fatalf("probe: %v", got)
	}
	b.Observe(srv, nil)
	if got := check(a); got != 0 {
		t.Fatalf("a after the probe closed the circuit: %v", got)
	}
	a.Observe(srv, &upstream.HTTPError{Status: 502}) // records it: a read and a write
	before := shared.reads.Load()
	check(a)
	if n := shared.reads.Load() - before; n != 1 {
		t.Fatalf("a's call after its own failure read the circuit %d times; want 1", n)
	}
	// Reread < 0: every call reads.
	o.Reread = -1
	c := breaker.New(o)
	b.Observe(srv, nil) // a success resets a's failure: the circuit is clean again
	before = shared.reads.Load()
	for range 3 {
		check(c)
	}
	if n := shared.reads.Load() - before; n != 3 {
		t.Fatalf("Reread < 0: %d reads for 3 calls; want 3", n)
	}
}
