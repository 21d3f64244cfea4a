package ratelimit_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strconv"
	"sync"
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
		k := ratelimit.New(memstore.New(), ratelimit.Options{PerSession: 3, PerTool: 0}, clock, quiet)
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
		k := ratelimit.New(memstore.New(), ratelimit.Options{PerSession: 0, PerTool: 2}, clock, quiet)
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
		k := ratelimit.New(st, ratelimit.Options{PerSession: 1, PerTool: 1}, func() time.Time { return at }, quiet)
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
		k := ratelimit.New(failing{}, ratelimit.Options{PerSession: 0, PerTool: 0}, clock, quiet)
		if err := k.Check(ctx, call("s1", "echo")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("store unreachable is not a refusal", func(t *testing.T) {
		// The check could not decide; its stage fails open (the pipeline
		// lets the call through, shared/pipeline's TestFailureModes).
		k := ratelimit.New(failing{}, ratelimit.Options{PerSession: 1, PerTool: 1}, clock, quiet)
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

func (failing) Value(context.Context, string) (int64, error) { return 0, store.ErrUnavailable }

// TestPerKeyAcrossSessions: the key's window spans all its sessions, so
// minting sessions buys no calls. L calls are admitted in the minute, the
// rest refused with scope key, however many sessions they came in.
func TestPerKeyAcrossSessions(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 15, 0, time.UTC)
	clock := func() time.Time { return now }
	ctx := context.Background()
	const limit, calls = 7, 60
	st := memstore.New()
	k := ratelimit.New(st, ratelimit.Options{PerSession: 100, PerTool: 100, PerKey: limit}, clock, quiet)
	var (
		mu       sync.Mutex
		admitted int
		wg       sync.WaitGroup
	)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := call("s"+strconv.Itoa(i/3), "echo") // a new session every 3 calls
			c.KeyID = "k1"
			c.NewSession = i%3 == 0
			err := k.Check(ctx, c)
			mu.Lock()
			defer mu.Unlock()
			var r *refusal.Refusal
			switch {
			case err == nil:
				admitted++
			case errors.As(err, &r) && r.Code == -32004 && r.Fields["scope"] == "key" && r.Fields["limit"] == limit:
			default:
				t.Errorf("call %d: %v, want nil or -32004 scope key", i, err)
			}
		}()
	}
	wg.Wait()
	if admitted != limit {
		t.Fatalf("admitted %d calls across sessions, want exactly %d", admitted, limit)
	}
	other := call("s-other", "echo")
	other.KeyID = "k2"
	if err := k.Check(ctx, other); err != nil {
		t.Fatalf("another key: %v", err)
	}

	// A call refused by any stage gives its unit in the key's window back.
	st2 := memstore.New()
	k2 := ratelimit.New(st2, ratelimit.Options{PerKey: 1}, clock, quiet)
	c := call("s1", "echo")
	c.KeyID = "k1"
	decide, undo := k2.Prefetch(ctx, c)
	if err := decide(); err != nil {
		t.Fatal(err)
	}
	undo() // a later stage refused
	if err := k2.Check(ctx, c); err != nil {
		t.Fatalf("after undo: %v, want the unit given back", err)
	}
	if err := k2.Check(ctx, c); err == nil {
		t.Fatal("2nd counted call admitted over a per-key limit of 1")
	}
}

// TestStatelessCallsCountPerKey: 2026-07-28 calls have no session; each
// API key's stateless calls get the session's limit in a window of their
// own, never one shared by every key of the tenant.
func TestStatelessCallsCountPerKey(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 15, 0, time.UTC)
	k := ratelimit.New(memstore.New(), ratelimit.Options{PerSession: 2}, func() time.Time { return now }, quiet)
	ctx := context.Background()
	stateless := func(key string) *pipeline.Call {
		c := call("", "echo")
		c.KeyID, c.Stateless = key, true
		return c
	}
	for i := range 2 {
		if err := k.Check(ctx, stateless("k1")); err != nil {
			t.Fatalf("k1 call %d: %v", i+1, err)
		}
	}
	if err := k.Check(ctx, stateless("k1")); err == nil {
		t.Fatal("k1's third stateless call was allowed; the limit is 2")
	}
	if err := k.Check(ctx, stateless("k2")); err != nil {
		t.Fatalf("another key's stateless call: %v (it shared k1's window)", err)
	}
}

// TestPeekCountsNothing: Peek refuses exactly where Check would, with the
// same data, and counts nothing: peeking any number of times leaves the
// windows as they were.
func TestPeekCountsNothing(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 15, 0, time.UTC)
	ctx := context.Background()
	st := memstore.New()
	k := ratelimit.New(st, ratelimit.Options{PerSession: 5, PerTool: 2, PerKey: 10}, func() time.Time { return now }, quiet)
	withKey := func() *pipeline.Call { c := call("s1", "echo"); c.KeyID = "k1"; return c }
	for range 5 {
		if err := k.Peek(ctx, withKey())(); err != nil {
			t.Fatalf("peek with room: %v", err)
		}
	}
	for range 2 {
		if err := k.Check(ctx, withKey()); err != nil {
			t.Fatal(err)
		}
	}
	want := k.Check(ctx, withKey()) // the tool window is full: refused, nothing counted
	var r *refusal.Refusal
	if !errors.As(want, &r) || r.Fields["scope"] != ratelimit.ScopeTool {
		t.Fatalf("third call: %v; want the tool window's -32004", want)
	}
	for range 3 {
		got := k.Peek(ctx, withKey())()
		var p *refusal.Refusal
		if !errors.As(got, &p) || !reflect.DeepEqual(p.Fields, r.Fields) {
			t.Fatalf("peek at the limit: %v; want %v", got, want)
		}
	}
	sKey, tKey := ratelimit.Keys("acme", "s1", "", "echo", now)
	// The third Check counted in the session's and the key's windows (the
	// pipeline's undo gives those back); no peek counted anything.
	for key, n := range map[string]int64{sKey: 3, tKey: 2, ratelimit.KeyWindow("acme", "k1", now): 3} {
		if got, err := st.Value(ctx, key); err != nil || got != n {
			t.Errorf("%s = %d, %v; want %d (what the three Checks counted)", key, got, err, n)
		}
	}
	if err := ratelimit.New(failing{}, ratelimit.Options{PerKey: 1}, nil, quiet).Peek(ctx, withKey())(); err == nil || errors.As(err, &r) {
		t.Errorf("store unreachable: %v; want an error that is not a refusal", err)
	}
}
