package killswitch_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// flaky wraps a store and can be made unreachable.
type flaky struct {
	killswitch.Reader
	mu   sync.Mutex
	down bool
}

func (f *flaky) Stops(ctx context.Context, tenant string) ([]killswitch.Stop, error) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return nil, store.ErrUnavailable
	}
	return f.Reader.Stops(ctx, tenant)
}

func (f *flaky) set(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }

var srv = &registry.Server{Tenant: "acme", Name: "payments"}

func call(tool string) *pipeline.Call {
	return &pipeline.Call{Tenant: registry.Tenant{ID: "acme"}, Method: "tools/call", Tool: tool, Server: srv, UpstreamTool: tool}
}

func TestBoundAndFaults(t *testing.T) {
	ctx := context.Background()
	const refresh = 2 * time.Second
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	m := memstore.New()
	f := &flaky{Reader: m}
	k := killswitch.New(f, refresh, clock, quiet)
	if err := k.Check(ctx, call("transfer")); err != nil {
		t.Fatal(err)
	}
	if err := m.PutStop(ctx, killswitch.Stop{Tenant: "acme", Server: "payments", Tool: "transfer", At: now}); err != nil {
		t.Fatal(err)
	}
	// Within the bound the cached state may still show the tool; at the bound it must not.
	advance(refresh)
	var r *refusal.Refusal
	if err := k.Check(ctx, call("transfer")); !errors.As(err, &r) || r.Code != -32062 {
		t.Fatalf("after one refresh period: %v, want -32062", err)
	}
	if k.Visible(ctx, call("x"), srv, "transfer") {
		t.Fatal("stopped tool visible in tools/list")
	}
	if !k.Visible(ctx, call("x"), srv, "echo") || k.Check(ctx, call("echo")) != nil {
		t.Fatal("a tool that is not stopped is refused or hidden")
	}

	// Unreachable: the last known state stays in force, past any number of periods.
	f.set(true)
	advance(10 * refresh)
	if err := k.Check(ctx, call("transfer")); !errors.As(err, &r) || r.Code != -32062 {
		t.Fatalf("store down: %v, want last known -32062", err)
	}
	if err := k.Check(ctx, call("echo")); err != nil {
		t.Fatalf("store down, echo: %v", err)
	}
	// Never loaded and unreachable: the check cannot decide (not a
	// refusal); its stage fails closed (shared/gateway's stage table).
	other := killswitch.New(f, refresh, clock, quiet)
	if err := other.Check(ctx, call("echo")); err == nil || errors.As(err, &r) {
		t.Fatalf("never loaded, store down: %v, want an error that is not a refusal", err)
	}
	if other.Visible(ctx, call("x"), srv, "echo") {
		t.Fatal("never loaded, store down: tool visible")
	}

	// Back up: a whole-server stop, then resume, each in force within one period.
	f.set(false)
	advance(refresh)
	if err := m.PutStop(ctx, killswitch.Stop{Tenant: "acme", Server: "payments", At: now}); err != nil {
		t.Fatal(err)
	}
	advance(refresh)
	if err := k.Check(ctx, call("echo")); !errors.As(err, &r) || r.Code != -32062 {
		t.Fatalf("server stopped: %v, want -32062", err)
	}
	_ = m.DeleteStop(ctx, "acme", "payments", "")
	_ = m.DeleteStop(ctx, "acme", "payments", "transfer")
	advance(refresh)
	if err := k.Check(ctx, call("transfer")); err != nil {
		t.Fatalf("resumed: %v", err)
	}
}
