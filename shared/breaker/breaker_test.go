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
