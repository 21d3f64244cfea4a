package pipeline

import (
	"context"
	"slices"
	"testing"
)

type ctxKey struct{}

// recHook records Before/After and hands each check a context value.
type recHook struct{ log *[]string }

func (h recHook) Before(ctx context.Context, slot string, _ *Call) context.Context {
	*h.log = append(*h.log, "before:"+slot)
	return context.WithValue(ctx, ctxKey{}, slot)
}

func (h recHook) After(ctx context.Context, slot string, _ *Call, err error) {
	s := "after:" + slot
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
	slot string
	log  *[]string
	err  error
}

func (f seeCtx) Slot() string { return f.slot }
func (f seeCtx) Check(ctx context.Context, _ *Call) error {
	s := f.slot
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
	p, err := New(seeCtx{"session", &log, nil}, seeCtx{"ratelimit", &log, context.Canceled}, seeCtx{"route", &log, nil})
	if err != nil {
		t.Fatal(err)
	}
	p.SetHook(recHook{&log})
	if err := p.Run(context.Background(), &Call{}); err != context.Canceled {
		t.Fatalf("err %v", err)
	}
	want := []string{"before:session", "session:hooked", "after:session", "before:ratelimit", "ratelimit:hooked", "after:ratelimit:context canceled"}
	if !slices.Equal(log, want) {
		t.Fatalf("ran %v\nwant %v", log, want)
	}
	log = nil
	if err := p.RunUntil(context.Background(), &Call{}, "ratelimit"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"before:session", "session:hooked", "after:session"}; !slices.Equal(log, want) {
		t.Fatalf("RunUntil ran %v", log)
	}
	p.SetHook(nil)
	log = nil
	_ = p.Run(context.Background(), &Call{})
	if want := []string{"session", "ratelimit"}; !slices.Equal(log, want) {
		t.Fatalf("without hook ran %v", log)
	}
}

// nopHook does nothing: the cost of the seam itself.
type nopHook struct{}

func (nopHook) Before(ctx context.Context, _ string, _ *Call) context.Context { return ctx }
func (nopHook) After(context.Context, string, *Call, error)                   {}

func BenchmarkRunNopHook(b *testing.B) {
	p := benchPipeline(b)
	p.SetHook(nopHook{})
	ctx, c := context.Background(), &Call{}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Run(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}
