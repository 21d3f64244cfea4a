package pipeline

import (
	"context"
	"testing"
)

type nop string

func (n nop) Slot() string                     { return string(n) }
func (nop) Check(context.Context, *Call) error { return nil }

func benchPipeline(b *testing.B) *Pipeline {
	var checks []Check
	for _, s := range Order {
		checks = append(checks, nop(s))
	}
	p, err := New(checks...)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkRun is the pipeline's own cost: nine checks that do nothing.
func BenchmarkRun(b *testing.B) {
	p := benchPipeline(b)
	ctx, c := context.Background(), &Call{}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Run(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}
