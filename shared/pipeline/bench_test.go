package pipeline

import (
	"context"
	"testing"
)

type nop struct{}

func (nop) Check(context.Context, *Call) error { return nil }

func benchPipeline(b *testing.B, h Hook) *Pipeline {
	checks := map[Slot]Check{}
	for _, s := range Order {
		checks[s] = nop{}
	}
	p, err := New(table(checks, nil), &Options{Hook: h})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkRun is the pipeline's own cost: ten checks that do nothing.
func BenchmarkRun(b *testing.B) {
	p := benchPipeline(b, nil)
	ctx, c := context.Background(), &Call{}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Run(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}
