package telemetry

import (
	"context"
	"io"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-gw/aegis/shared/pipeline"
)

type nopCheck struct{}

func (nopCheck) Check(context.Context, *pipeline.Call) error { return nil }

func tracedPipeline(b *testing.B) (*pipeline.Pipeline, *Tracer) {
	var stages []pipeline.Stage
	for _, s := range pipeline.Order {
		stages = append(stages, pipeline.Stage{Slot: s, Scope: pipeline.Every, Check: nopCheck{}})
	}
	for _, s := range pipeline.ResultOrder {
		stages = append(stages, pipeline.Stage{Slot: s, Scope: pipeline.Every})
	}
	tr := NewTracer(NewProvider(NewWriterExporter(io.Discard, "bench")), false, nil)
	p, err := pipeline.New(stages, &pipeline.Options{Hook: tr})
	if err != nil {
		b.Fatal(err)
	}
	return p, tr
}

// BenchmarkRunTraced is ten no-op checks with tracing on: span creation,
// X-Ray conversion and JSON encoding of each check's span (written to
// io.Discard instead of a UDP socket).
func BenchmarkRunTraced(b *testing.B) {
	p, _ := tracedPipeline(b)
	ctx, c := context.Background(), &pipeline.Call{}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Run(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunTracedNotSampled is the same under a parent that is not
// sampled (X-Ray header Sampled=0): spans are made but not recorded.
func BenchmarkRunTracedNotSampled(b *testing.B) {
	p, _ := tracedPipeline(b)
	sc, _, _ := ParseTraceHeader("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0")
	ctx, c := trace.ContextWithRemoteSpanContext(context.Background(), sc), &pipeline.Call{}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Run(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFromEnv is telemetry's share of a Lambda cold start: settings,
// logger, EMF writer, UDP socket to the daemon, tracer provider.
func BenchmarkFromEnv(b *testing.B) {
	env := map[string]string{EnvFunction: "aegis-gateway", EnvDaemon: "127.0.0.1:2000"}
	getenv := func(k string) string { return env[k] }
	b.ReportAllocs()
	for b.Loop() {
		_, stop, err := fromEnv(getenv, io.Discard, io.Discard, false)
		if err != nil {
			b.Fatal(err)
		}
		_ = stop(context.Background())
	}
}
