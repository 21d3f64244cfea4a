package dynamo_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/ratelimit"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestUnreachable(t *testing.T) {
	env := dynamotest.Start(t)
	p := dynamotest.NewFaultProxy(t, env.Endpoint)
	env.Endpoint = p.URL
	st := env.Store(t, dynamo.Options{})
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ctx := context.Background()

	if err := st.PutStop(ctx, killswitch.Stop{Tenant: "acme", Server: "payments", Tool: "transfer", At: now}); err != nil {
		t.Fatal(err)
	}
	must(t, st.Create(ctx, session.Record{ID: "s1", Tenant: "acme", Caller: "a", Created: now, LastSeen: now}))
	rl := ratelimit.New(st, ratelimit.Options{PerSession: 1, PerTool: 1}, clock, quiet)
	qu := quota.New(st, quota.Options{Enabled: true, Enforce: true, Tiers: quota.Tiers{"free": 1}}, clock, quiet)
	ks := killswitch.New(st, 2*time.Second, clock, quiet)
	srv := &registry.Server{Tenant: "acme", Name: "payments"}
	call := func(tool string) *pipeline.Call {
		return &pipeline.Call{Tenant: registry.Tenant{ID: "acme", Tier: "free"}, SessionID: "s1", Method: "tools/call",
			Tool: tool, UpstreamTool: tool, Server: srv}
	}
	// Up: the limits bite and the stop is loaded.
	for name, k := range map[string]pipeline.Check{"ratelimit": rl, "quota": qu} {
		if err := k.Check(ctx, call("echo")); err != nil {
			t.Fatalf("%s, first call: %v", name, err)
		}
		if err := k.Check(ctx, call("echo")); err == nil {
			t.Fatalf("%s, second call admitted with the store up", name)
		}
	}
	var r *refusal.Refusal
	if err := ks.Check(ctx, call("transfer")); !errors.As(err, &r) || r.Code != -32062 {
		t.Fatalf("kill switch up: %v", err)
	}

	p.Down.Store(true)
	mu.Lock()
	now = now.Add(time.Hour) // far past the refresh period
	mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	// The limiter and the meter report that they could not decide (an
	// unavailable store, not a refusal); their stages fail open, so the
	// pipeline lets the call through and records them as degraded.
	var stages []pipeline.Stage
	for _, s := range append(pipeline.Order[:], pipeline.ResultOrder[:]...) {
		st := pipeline.Stage{Slot: s, Scope: pipeline.Every}
		switch s {
		case pipeline.RateLimit:
			st.Check, st.Mode = rl, pipeline.FailOpen
		case pipeline.Quota:
			st.Check, st.Mode = qu, pipeline.FailOpen
		}
		stages = append(stages, st)
	}
	pipe, err := pipeline.New(stages, &pipeline.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for name, k := range map[string]pipeline.Check{"ratelimit": rl, "quota": qu} {
		if err := k.Check(cctx, call("echo")); !errors.Is(err, store.ErrUnavailable) || errors.As(err, &r) {
			t.Fatalf("%s with DynamoDB unreachable: %v, want store.ErrUnavailable (could not decide)", name, err)
		}
	}
	c := call("echo")
	if err := pipe.Run(cctx, c); err != nil {
		t.Fatalf("pipeline with DynamoDB unreachable: %v, want the call let through", err)
	}
	if got := c.DegradedNames(); len(got) != 2 || got[0] != "ratelimit" || got[1] != "quota" {
		t.Fatalf("degraded = %v, want [ratelimit quota]", got)
	}
	if err := ks.Check(cctx, call("transfer")); !errors.As(err, &r) || r.Code != -32062 {
		t.Fatalf("kill switch with DynamoDB unreachable: %v, want last known -32062", err)
	}
	if err := ks.Check(cctx, call("echo")); err != nil {
		t.Fatalf("kill switch with DynamoDB unreachable, echo: %v", err)
	}
	if _, err := st.Touch(cctx, "acme", "s1", now, session.Limits{}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Touch with DynamoDB unreachable: %v, want ErrUnavailable, never ErrNotFound", err)
	}
	if _, err := st.Key(cctx, "k"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Key with DynamoDB unreachable: %v, want ErrUnavailable, never ErrNotFound", err)
	}
}

func TestThrottlingRetried(t *testing.T) {
	env := dynamotest.Start(t)
	p := dynamotest.NewFaultProxy(t, env.Endpoint)
	env.Endpoint = p.URL
	st := env.Store(t, dynamo.Options{})
	ctx := context.Background()
	exp := time.Now().Add(time.Minute)

	// Throttled three times, then answered: the SDK's backoff retries it.
	p.Throttle.Store(3)
	n, ok, err := st.Incr(ctx, "k", 10, exp)
	if err != nil || !ok || n != 1 {
		t.Fatalf("Incr after 3 throttles = %d, %v, %v; want 1, true", n, ok, err)
	}
	if got := p.Attempts.Load(); got != 4 {
		t.Fatalf("attempts = %d, want 4 (3 throttled + 1)", got)
	}

	// Throttled without end: bounded by the request's deadline (or the retry
	// budget, whichever comes first), and reported as unavailable.
	p.Throttle.Store(-1)
	p.Attempts.Store(0)
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second) // generous: a loaded machine must still fit two attempts
	defer cancel()
	_, _, err = st.Incr(dctx, "k", 10, exp)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Incr throttled forever: %v, want ErrUnavailable", err)
	}
	if a := p.Attempts.Load(); a < 2 || a > dynamo.MaxAttempts {
		t.Fatalf("attempts = %d, want retries within 2..%d", a, dynamo.MaxAttempts)
	}
	t.Logf("throttled forever: %d attempts; %v", p.Attempts.Load(), err)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
