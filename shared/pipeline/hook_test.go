package pipeline

import (
	"context"
	"slices"
	"testing"

	"github.com/aegis-gw/aegis/shared/refusal"
)

type ctxKey struct{}

// recHook records Before/After and hands each check a context value.
type recHook struct{ log *[]string }

func (h recHook) Before(ctx context.Context, slot Slot, _ *Call) context.Context {
	*h.log = append(*h.log, "before:"+slot.String())
	return context.WithValue(ctx, ctxKey{}, slot)
}

func (h recHook) After(ctx context.Context, slot Slot, _ *Call, err error) {
	s := "after:" + slot.String()
	if ctx.Value(ctxKey{}) != slot {
		s += ":wrong-context"
	}
	if err != nil {
		s += ":" + err.Error()
	}
	*h.log = append(*h.log, s)
}

// seeCtx is a check that logs whether it ran with the hook's context.
type seeCtx struct {
	slot Slot
	log  *[]string
	err  error
}

func (f seeCtx) Check(ctx context.Context, _ *Call) error {
	s := f.slot.String()
	if ctx.Value(ctxKey{}) == f.slot {
		s += ":hooked"
	}
	*f.log = append(*f.log, s)
	return f.err
}

// TestHookKeepsOrder: a hook sees every check that runs, in order, passes
// its context to the check, and does not change where the run stops.
func TestHookKeepsOrder(t *testing.T) {
	var log []string
	stop := refusal.New(refusal.InvalidParams, "no")
	checks := map[Slot]Check{Session: seeCtx{Session, &log, nil}, RateLimit: seeCtx{RateLimit, &log, stop}, Route: seeCtx{Route, &log, nil}}
	p, err := New(table(checks, nil), &Options{Hook: recHook{&log}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background(), &Call{}); err != stop {
		t.Fatalf("err %v", err)
	}
	want := []string{"before:session", "session:hooked", "after:session", "before:ratelimit", "ratelimit:hooked", "after:ratelimit:" + stop.Error()}
	if !slices.Equal(log, want) {
		t.Fatalf("ran %v\nwant %v", log, want)
	}
	log = nil
	if err := p.RunUntil(context.Background(), &Call{}, RateLimit); err != nil {
		t.Fatal(err)
	}
	if want := []string{"before:session", "session:hooked", "after:session"}; !slices.Equal(log, want) {
		t.Fatalf("RunUntil ran %v", log)
	}
	p, _ = New(table(checks, nil), nil)
	log = nil
	_ = p.Run(context.Background(), &Call{})
	if want := []string{"session", "ratelimit"}; !slices.Equal(log, want) {
		t.Fatalf("without hook ran %v", log)
	}
}

// nopHook does nothing: the cost of the seam itself.
type nopHook struct{}

func (nopHook) Before(ctx context.Context, _ Slot, _ *Call) context.Context { return ctx }
func (nopHook) After(context.Context, Slot, *Call, error)                   {}

func BenchmarkRunNopHook(b *testing.B) {
	p := benchPipeline(b, nopHook{})
	ctx, c := context.Background(), &Call{}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Run(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}
