// Package telemetry is aegis's tracing, metrics and logging plumbing:
// OpenTelemetry spans exported to AWS X-Ray (xray.go: a span exporter that
// writes X-Ray segment documents to the daemon over UDP, no collector),
// CloudWatch embedded-metric-format lines (emf.go), and a slog handler that
// puts the request's correlation id on every line (log.go).
//
// Everything is off unless configured: a nil *Tracer and a nil *EMF are
// what the gateway takes for "off", and FromEnv turns them on from the
// environment (AWS_XRAY_DAEMON_ADDRESS in Lambda, AEGIS_TRACE_STDOUT=1 for
// local debugging). docs/design/telemetry.md records the choices.
package telemetry

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// ScopeName is the instrumentation scope of aegis's spans.
const ScopeName = "github.com/aegis-gw/aegis"

// Span names and attribute keys aegis writes (X-Ray annotations, with "."
// turned into "_").
const (
	SpanUpstream = "upstream.call"

	AttrCorrelationID = attribute.Key("aegis.correlation_id")
	AttrTenant        = attribute.Key("aegis.tenant")
	AttrMethod        = attribute.Key("aegis.method")
	AttrServer        = attribute.Key("aegis.server")
	AttrTool          = attribute.Key("aegis.tool")
	AttrOutcome       = attribute.Key("aegis.outcome")
	AttrCode          = attribute.Key("aegis.code")
	AttrWord          = attribute.Key("aegis.word")
)

// NewProvider returns a tracer provider that exports every ended span
// synchronously to exp (a simple span processor: in Lambda the process may
// be frozen as soon as the invocation returns, so nothing may wait in a
// batch), with X-Ray-compatible ids and parent-based sampling (a remote
// parent's Sampled flag decides; a root span is sampled).
func NewProvider(exp sdktrace.SpanExporter) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(exp)),
		sdktrace.WithIDGenerator(IDGenerator{}),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
	)
}

// Tracer makes aegis's spans. A nil *Tracer is "tracing off"; callers test
// for nil before calling (AddAWSMiddleware is the one nil-safe method).
// It implements pipeline.Hook: one span per check, named "check.<slot>".
type Tracer struct {
	t        trace.Tracer
	inLambda bool
	checks   map[pipeline.Slot]string // slot → span name
	getenv   func(string) string
}

// NewTracer returns a Tracer over tp. inLambda makes the Lambda
// invocation's trace header (from the invocation context or
// _X_AMZN_TRACE_ID) the parent of request spans.
func NewTracer(tp trace.TracerProvider, inLambda bool, getenv func(string) string) *Tracer {
	t := &Tracer{t: tp.Tracer(ScopeName), inLambda: inLambda, checks: map[pipeline.Slot]string{}, getenv: getenv}
	for _, s := range append(pipeline.Order[:], pipeline.ResultOrder[:]...) {
		t.checks[s] = "check." + s.String()
	}
	return t
}

var _ pipeline.Hook = (*Tracer)(nil)

// lambdaTraceKey is the context key under which aws-lambda-go puts the
// invocation's X-Ray trace header.
const lambdaTraceKey = "x-amzn-trace-id"

// StartRequest starts the server span of request r, named name (the
// route), under ctx (r's context or one derived from it). Its parent is the Lambda invocation's trace header in Lambda,
// else the request's X-Amzn-Trace-Id header, else none (a new trace).
func (t *Tracer) StartRequest(ctx context.Context, r *http.Request, name, correlationID string) (context.Context, trace.Span) {
	var h string
	if t.inLambda {
		h, _ = ctx.Value(lambdaTraceKey).(string)
		if h == "" && t.getenv != nil {
			h = t.getenv("_X_AMZN_TRACE_ID")
		}
	}
	if h == "" {
		h = r.Header.Get("X-Amzn-Trace-Id")
	}
	if h != "" {
		if sc, root, ok := ParseTraceHeader(h); sc.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		} else if ok {
			ctx = context.WithValue(ctx, rootKey{}, root)
		}
	}
	return t.t.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(AttrHTTPMethod.String(r.Method), AttrCorrelationID.String(correlationID)))
}

// Before implements pipeline.Hook: it starts the check's span.
func (t *Tracer) Before(ctx context.Context, slot pipeline.Slot, _ *pipeline.Call) context.Context {
	name, ok := t.checks[slot]
	if !ok {
		name = "check." + slot.String()
	}
	ctx, _ = t.t.Start(ctx, name)
	return ctx
}

// After implements pipeline.Hook: it records a refusal's code and word on
// the check's span (a refusal is a decision, not an error of the span; an
// internal failure is) and ends it.
func (t *Tracer) After(ctx context.Context, _ pipeline.Slot, _ *pipeline.Call, err error) {
	span := trace.SpanFromContext(ctx)
	if err != nil {
		var ref *refusal.Refusal
		if errors.As(err, &ref) {
			span.SetAttributes(AttrCode.Int(int(ref.Code)), AttrWord.String(string(ref.Word)))
			if ref.Word == refusal.InternalError {
				span.SetStatus(codes.Error, string(ref.Word))
			}
		} else {
			span.SetStatus(codes.Error, "internal error")
		}
	}
	span.End()
}

// StartUpstream starts the client span of one upstream call.
func (t *Tracer) StartUpstream(ctx context.Context, server, tool string) (context.Context, trace.Span) {
	return t.t.Start(ctx, SpanUpstream, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrServer.String(server), AttrTool.String(tool)))
}

// EndUpstream records how the upstream call went and ends its span:
// outcome "answered" (a result), "upstream_error" (the upstream's own
// JSON-RPC error), "timeout", or "failed"; the HTTP status when one came.
// Error texts are not recorded, only their kind: details may quote the
// upstream's body.
func (t *Tracer) EndUpstream(span trace.Span, resp *jsonrpc.Response, err error) {
	var he *upstream.HTTPError
	outcome := UpstreamOutcome(resp, err)
	span.SetAttributes(AttrOutcome.String(outcome))
	switch {
	case err == nil:
		span.SetAttributes(AttrHTTPStatus.Int(http.StatusOK))
	case outcome == OutcomeTimeout:
		span.SetStatus(codes.Error, "upstream timeout")
	case errors.As(err, &he):
		span.SetAttributes(AttrHTTPStatus.Int(he.Status))
		span.SetStatus(codes.Error, "upstream HTTP error")
	default:
		span.SetStatus(codes.Error, failureKind(err))
	}
	span.End()
}

// How an upstream exchange ended (UpstreamOutcome).
const (
	OutcomeAnswered      = "answered"       // a result
	OutcomeUpstreamError = "upstream_error" // the upstream's own JSON-RPC error
	OutcomeTimeout       = "timeout"        // sent and not answered in time
	OutcomeFailed        = "failed"         // not reached, non-2xx, unreadable
)

// UpstreamOutcome names how an upstream exchange ended: one of the four
// Outcome constants. Spans and metrics use the same words.
func UpstreamOutcome(resp *jsonrpc.Response, err error) string {
	var te *upstream.TimeoutError
	switch {
	case err == nil && resp != nil && resp.Error != nil:
		return OutcomeUpstreamError
	case err == nil:
		return OutcomeAnswered
	case errors.As(err, &te):
		return OutcomeTimeout
	}
	return OutcomeFailed
}

// failureKind names an upstream failure without its detail.
func failureKind(err error) string {
	var (
		ce *upstream.ConnError
		pe *upstream.ProtocolError
		cr *upstream.CredentialError
		sl *upstream.SessionLost
	)
	switch {
	case errors.As(err, &ce):
		return "upstream connection failed"
	case errors.As(err, &pe):
		return "upstream protocol error"
	case errors.As(err, &cr):
		return "credential unavailable"
	case errors.As(err, &sl):
		return "upstream session lost"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	}
	return "upstream failed"
}

// AnnotateCall puts the audit record's identifying fields on the request's
// span (the span in ctx): tenant, method, server, tool, outcome and, for an
// error answer, its code and word. The caller's name, session id and
// arguments stay out of traces.
func (t *Tracer) AnnotateCall(ctx context.Context, rec audit.Record) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	kv := []attribute.KeyValue{AttrTenant.String(rec.Tenant), AttrMethod.String(rec.Method), AttrOutcome.String(string(rec.Outcome))}
	if rec.Server != "" {
		kv = append(kv, AttrServer.String(rec.Server))
	}
	if rec.Tool != "" {
		kv = append(kv, AttrTool.String(rec.Tool))
	}
	if rec.Code != 0 {
		kv = append(kv, AttrCode.Int(rec.Code))
	}
	if rec.Word != "" {
		kv = append(kv, AttrWord.String(rec.Word))
	}
	span.SetAttributes(kv...)
}

// RouteName is the server span's name for a request path: the route, not
// the path (a server name in /mcp/{server} is the tenant's data).
func RouteName(method, path string) string {
	switch {
	case path == "/v1/invoke":
		return method + " /v1/invoke"
	case path == "/mcp" || path == "/mcp/":
		return method + " /mcp"
	case strings.HasPrefix(path, "/mcp/"):
		return method + " /mcp/{server}"
	}
	return method
}
