package dynamo_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
)

// Two instances (own clients, own caches) over one table: a stop and a
// resume written through a third client are in force on both within one
// refresh period of the (injected) clock.
func TestKillSwitchBoundTwoInstances(t *testing.T) {
	env := dynamotest.Start(t)
	ctx := context.Background()
	const refresh = 2 * time.Second
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	admin := env.Store(t, dynamo.Options{})
	inst := []*killswitch.Check{
		killswitch.New(env.Store(t, dynamo.Options{}), refresh, clock, quiet),
		killswitch.New(env.Store(t, dynamo.Options{}), refresh, clock, quiet),
	}
	srv := &registry.Server{Tenant: "acme", Name: "payments"}
	c := &pipeline.Call{Tenant: registry.Tenant{ID: "acme"}, Method: "tools/call", Tool: "transfer", UpstreamTool: "transfer", Server: srv}
	for _, k := range inst {
		if err := k.Check(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	must(t, admin.PutStop(ctx, killswitch.Stop{Tenant: "acme", Server: "payments", Tool: "transfer", At: now}))
	advance(refresh)
	var r *refusal.Refusal
	for i, k := range inst {
		if err := k.Check(ctx, c); !errors.As(err, &r) || r.Code != -32062 {
			t.Fatalf("instance %d one period after the stop: %v, want -32062", i, err)
		}
		if k.Visible(ctx, c, srv, "transfer") {
			t.Fatalf("instance %d lists a stopped tool", i)
		}
	}
	must(t, admin.DeleteStop(ctx, "acme", "payments", "transfer"))
	advance(refresh)
	for i, k := range inst {
		if err := k.Check(ctx, c); err != nil {
			t.Fatalf("instance %d one period after the resume: %v", i, err)
		}
	}
}
