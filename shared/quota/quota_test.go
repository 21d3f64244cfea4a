package quota_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func call(tier string) *pipeline.Call {
	return &pipeline.Call{Tenant: registry.Tenant{ID: "acme", Tier: tier}, Method: "tools/call", Tool: "echo"}
}

func TestQuota(t *testing.T) {
	now := time.Date(2026, 11, 30, 23, 59, 59, 0, time.FixedZone("UTC-1", -3600)) // already December in UTC
	clock := func() time.Time { return now }
	ctx := context.Background()
	tiers := quota.Tiers{registry.TierFree: 2}

	t.Run("enforced", func(t *testing.T) {
		q := quota.New(memstore.New(), quota.Options{Enabled: true, Enforce: true, Tiers: tiers}, clock, quiet)
		for range 2 {
			if err := q.Check(ctx, call("free")); err != nil {
				t.Fatal(err)
			}
		}
		var r *refusal.Refusal
		if err := q.Check(ctx, call("free")); !errors.As(err, &r) || r.Code != -32060 {
			t.Fatalf("3rd call: %v, want -32060", err)
		}
		b, _ := json.Marshal(r.Object(refusal.LayerGateway).Data)
		var data map[string]any
		_ = json.Unmarshal(r.Object(refusal.LayerGateway).Data, &data)
		delete(data, "aegis")
		got, _ := json.Marshal(data)
		if want := `{"limit":2,"period":"202612","tier":"free","used":2}`; string(got) != want {
			t.Fatalf("data = %s (full %s), want exactly %s", got, b, want)
		}
	})
	t.Run("not enforced: overage recorded", func(t *testing.T) {
		m := memstore.New()
		q := quota.New(m, quota.Options{Enabled: true, Tiers: tiers}, clock, quiet)
		for range 5 {
			if err := q.Check(ctx, call("free")); err != nil {
				t.Fatalf("BILLING_ENFORCE=0 refused: %v", err)
			}
		}
		n, _, _ := m.Incr(ctx, quota.Key("acme", "202612"), 0, now)
		if n != 6 {
			t.Fatalf("usage = %d, want 5 recorded (+1 by this read)", n-1)
		}
	})
	t.Run("billing off", func(t *testing.T) {
		q := quota.New(failing{}, quota.Options{Enforce: true, Tiers: tiers}, clock, quiet)
		if err := q.Check(ctx, call("free")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("meter unreachable", func(t *testing.T) {
		q := quota.New(failing{}, quota.Options{Enabled: true, Enforce: true, Tiers: tiers}, clock, quiet)
		// Not a refusal: the check could not decide, and its stage fails
		// open (counted as under quota).
		var r *refusal.Refusal
		if err := q.Check(ctx, call("free")); err == nil || errors.As(err, &r) {
			t.Fatalf("meter unreachable: %v, want an error that is not a refusal", err)
		}
	})
	t.Run("tiers never loaded or unknown tier", func(t *testing.T) {
		m := memstore.New()
		for _, o := range []quota.Options{{Enabled: true, Enforce: true}, {Enabled: true, Enforce: true, Tiers: tiers}} {
			q := quota.New(m, o, clock, quiet)
			for range 5 {
				if err := q.Check(ctx, call("platinum")); err != nil {
					t.Fatalf("%+v: %v", o, err)
				}
			}
		}
	})
}

func TestTiersFromEnv(t *testing.T) {
	env := map[string]string{"QUOTA_FREE": "10", "QUOTA_ENTERPRISE": "0"}
	got, err := quota.TiersFromEnv(func(k string) string { return env[k] })
	if err != nil || got["free"] != 10 || got["growth"] != quota.DefaultGrowth || got["enterprise"] != 0 {
		t.Fatalf("TiersFromEnv = %v, %v", got, err)
	}
	env["QUOTA_GROWTH"] = "-1"
	if _, err := quota.TiersFromEnv(func(k string) string { return env[k] }); err == nil {
		t.Fatal("QUOTA_GROWTH=-1 accepted")
	}
}

type failing struct{}

func (failing) Incr(context.Context, string, int64, time.Time) (int64, bool, error) {
	return 0, false, store.ErrUnavailable
}

func (failing) Decr(context.Context, string) error { return store.ErrUnavailable }

func (failing) Value(context.Context, string) (int64, error) { return 0, store.ErrUnavailable }

// TestPeekCountsNothing: Peek refuses at the enforced limit with the data
// Check gives, reads nothing when enforcement is off, and counts nothing.
func TestPeekCountsNothing(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	st := memstore.New()
	tiers := quota.Tiers{registry.TierFree: 2}
	q := quota.New(st, quota.Options{Enabled: true, Enforce: true, Tiers: tiers}, func() time.Time { return now }, quiet)
	key := quota.Key("acme", "202612")
	for range 3 {
		if err := q.Peek(ctx, call("free"))(); err != nil {
			t.Fatalf("peek under the limit: %v", err)
		}
	}
	for range 2 {
		if err := q.Check(ctx, call("free")); err != nil {
			t.Fatal(err)
		}
	}
	var want, got *refusal.Refusal
	if err := q.Check(ctx, call("free")); !errors.As(err, &want) {
		t.Fatalf("3rd call: %v", err)
	}
	if err := q.Peek(ctx, call("free"))(); !errors.As(err, &got) || string(got.Object(refusal.LayerGateway).Data) != string(want.Object(refusal.LayerGateway).Data) {
		t.Fatalf("peek at the limit: %v; want %v", err, want)
	}
	if n, err := st.Value(ctx, key); err != nil || n != 2 {
		t.Fatalf("meter = %d, %v; want 2 (the two calls counted)", n, err)
	}
	// Not enforced: nothing to refuse, nothing read (a failing meter is
	// never asked).
	off := quota.New(failing{}, quota.Options{Enabled: true, Tiers: tiers}, nil, quiet)
	if err := off.Peek(ctx, call("free"))(); err != nil {
		t.Fatalf("enforcement off: %v", err)
	}
	on := quota.New(failing{}, quota.Options{Enabled: true, Enforce: true, Tiers: tiers}, nil, quiet)
	if err := on.Peek(ctx, call("free"))(); err == nil || errors.As(err, &got) {
		t.Fatalf("meter unreachable: %v; want an error that is not a refusal", err)
	}
}
