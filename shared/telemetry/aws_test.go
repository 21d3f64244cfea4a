package telemetry_test

import (
	"context"
	"slices"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/telemetry"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// TestDynamoDBSpans: the middleware on a real client (moto_server) makes
// one span per operation, named DynamoDB.<Operation>, child of the span in
// the context, with the table name, and X-Ray converts it to an "aws"
// subsegment.
func TestDynamoDBSpans(t *testing.T) {
	env := dynamotest.Start(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(telemetry.IDGenerator{}))
	tr := telemetry.NewTracer(tp, false, nil)
	st := env.Store(t, dynamo.Options{}, dynamo.WithMiddleware(tr.AddAWSMiddleware))

	ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
	if err := st.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierFree}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Tenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	parent.End()

	var names []string
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() == "parent" {
			continue
		}
		names = append(names, s.Name())
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s: parent %s kind %v", s.Name(), s.Parent().SpanID(), s.SpanKind())
		}
		seg := telemetry.Convert(s, "aegis", false)
		if seg.Namespace != "aws" || seg.AWS["table_name"] != env.Tables.State || seg.AWS["region"] != "us-east-1" || seg.HTTP == nil || seg.HTTP.Response.Status != 200 {
			t.Errorf("%s: segment %+v", s.Name(), seg)
		}
	}
	if len(names) < 2 || !slices.Contains(names, "DynamoDB.PutItem") && !slices.Contains(names, "DynamoDB.TransactWriteItems") && !slices.Contains(names, "DynamoDB.UpdateItem") {
		t.Fatalf("spans %v", names)
	}
	if !slices.ContainsFunc(names, func(n string) bool { return n == "DynamoDB.GetItem" || n == "DynamoDB.Query" }) {
		t.Fatalf("no read span in %v", names)
	}
	t.Logf("spans: %v", names)

	// Tracing off: a nil tracer adds nothing and the client works.
	var off *telemetry.Tracer
	st2 := env.Store(t, dynamo.Options{}, dynamo.WithMiddleware(off.AddAWSMiddleware))
	if _, err := st2.Tenant(context.Background(), "acme"); err != nil {
		t.Fatal(err)
	}
}
