package ratelimit_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/ratelimit"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func call(session, tool string) *pipeline.Call {
	return &pipeline.Call{Tenant: registry.Tenant{ID: "acme"}, SessionID: session, Method: "tools/call", Tool: tool}
}

func TestLimits(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 15, 0, time.UTC) // 45 s left in the window
	clock := func() time.Time { return now }
	ctx := context.Background()

	t.Run("per session", func(t *testing.T) {
		k := ratelimit.New(memstore.New(), 3, 0, clock, quiet)
		for i := range 3 {
			if err := k.Check(ctx, call("s1", "tool"+string(rune('a'+i)))); err != nil {
				t.Fatalf("call %d: %v", i+1, err)
			}
		}
		err := k.Check(ctx, call("s1", "other"))
		var r *refusal.Refusal
		if !errors.As(err, &r) || r.Code != -32004 {
			t.Fatalf("4th call: %v, want -32004", err)
		}
		want := map[string]any{"scope": "session", "limit": 3, "retry_after_ms": int64(45000)}
		if !reflect.DeepEqual(r.Fields, want) {
			t.Fatalf("data = %#v, want %#v", r.Fields, want)
		}
		if err := k.Check(ctx, call("s2", "tool")); err != nil {
			t.Fatalf("another session: %v", err)
		}
	})
	t.Run("per tool", func(t *testing.T) {
		k := ratelimit.New(memstore.New(), 0, 2, clock, quiet)
		for range 2 {
			if err := k.Check(ctx, call("s1", "echo")); err != nil {
				t.Fatal(err)
			}
		}
		var r *refusal.Refusal
		if err := k.Check(ctx, call("s1", "echo")); !errors.As(err, &r) || r.Fields["scope"] != "tool" || r.Fields["limit"] != 2 {
			t.Fatalf("3rd echo: %v %v", err, r)
		}
		if err := k.Check(ctx, call("s1", "add")); err != nil {
			t.Fatalf("another tool: %v", err)
		}
	})
	t.Run("new window", func(t *testing.T) {
		st, at := memstore.New(), now
		k := ratelimit.New(st, 1, 1, func() time.Time { return at }, quiet)
		if err := k.Check(ctx, call("s1", "echo")); err != nil {
			t.Fatal(err)
		}
		if err := k.Check(ctx, call("s1", "echo")); err == nil {
			t.Fatal("2nd call in the window admitted")
		}
		at = at.Add(45 * time.Second) // the next minute
		if err := k.Check(ctx, call("s1", "echo")); err != nil {
			t.Fatalf("next window: %v", err)
		}
	})
	t.Run("off", func(t *testing.T) {
		k := ratelimit.New(failing{}, 0, 0, clock, quiet)
		if err := k.Check(ctx, call("s1", "echo")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("store unreachable is not a refusal", func(t *testing.T) {
		// The check could not decide; its stage fails open (the pipeline
		// lets the call through, shared/pipeline's TestFailureModes).
		k := ratelimit.New(failing{}, 1, 1, clock, quiet)
		var r *refusal.Refusal
		for range 3 {
			if err := k.Check(ctx, call("s1", "echo")); err == nil || errors.As(err, &r) {
				t.Fatalf("store unreachable: %v, want an error that is not a refusal", err)
			}
		}
	})
}

type failing struct{}

func (failing) Incr(context.Context, string, int64, time.Time) (int64, bool, error) {
	return 0, false, store.ErrUnavailable
}

func (failing) Decr(context.Context, string) error { return store.ErrUnavailable }
