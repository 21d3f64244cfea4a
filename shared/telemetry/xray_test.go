package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

var xrayID = regexp.MustCompile(`^1-[0-9a-f]{8}-[0-9a-f]{24}$`)

func TestTraceIDStartsWithEpochSeconds(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	g := IDGenerator{Now: func() time.Time { return at }}
	seen := map[trace.TraceID]bool{}
	for range 100 {
		tid, sid := g.NewIDs(context.Background())
		if !tid.IsValid() || !sid.IsValid() || seen[tid] {
			t.Fatalf("bad or repeated ids %s %s", tid, sid)
		}
		seen[tid] = true
		x := XRayTraceID(tid)
		if !xrayID.MatchString(x) {
			t.Fatalf("X-Ray trace id %q malformed", x)
		}
		if want := fmt.Sprintf("1-%08x-", at.Unix()); !strings.HasPrefix(x, want) {
			t.Fatalf("trace id %q does not start with the epoch seconds %q", x, want)
		}
	}
	// A root trace id from an X-Ray header without Parent is continued.
	_, root, ok := ParseTraceHeader("Root=1-5759e988-bd862e3fe1be46a994272793")
	if !ok {
		t.Fatal("root-only header refused")
	}
	tid, _ := g.NewIDs(context.WithValue(context.Background(), rootKey{}, root))
	if XRayTraceID(tid) != "1-5759e988-bd862e3fe1be46a994272793" {
		t.Fatalf("root not continued: %s", XRayTraceID(tid))
	}
}

func TestParseTraceHeader(t *testing.T) {
	for _, tc := range []struct {
		name, h            string
		valid, ok, sampled bool
	}{
		{"lambda", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:0", true, true, true},
		{"not sampled", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0", true, true, false},
		{"root only", "Root=1-5759e988-bd862e3fe1be46a994272793", false, true, true},
		{"bad root", "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", false, false, false},
		{"bad parent", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=zz", false, false, false},
		{"empty", "", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, _, ok := ParseTraceHeader(tc.h)
			if sc.IsValid() != tc.valid || ok != tc.ok || (tc.valid && sc.IsSampled() != tc.sampled) {
				t.Fatalf("valid %v ok %v sampled %v", sc.IsValid(), ok, sc.IsSampled())
			}
			if tc.valid && (sc.TraceID().String() != "5759e988bd862e3fe1be46a994272793" || sc.SpanID().String() != "53995c3f42cd8ad8" || !sc.IsRemote()) {
				t.Fatalf("span context %v", sc)
			}
		})
	}
}

// fixedIDs hands out predictable ids so segment JSON can be golden.
type fixedIDs struct{ n byte }

func (f *fixedIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	return trace.TraceID{0x69, 0x2c, 0x31, 0x40, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, f.NewSpanID(ctx, trace.TraceID{})
}

func (f *fixedIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	f.n++
	return trace.SpanID{0, 0, 0, 0, 0, 0, 0, f.n}
}

// record runs fn under a provider with fixed ids and returns its spans in
// the order they ended.
func record(t *testing.T, fn func(tr trace.Tracer)) []sdktrace.ReadOnlySpan {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(&fixedIDs{}))
	fn(tp.Tracer("test"))
	return exp.GetSpans().Snapshots()
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// sampleTrace is a request with a refused check, a DynamoDB call and an
// upstream call that timed out, under a Lambda facade segment.
func sampleTrace(tr trace.Tracer) {
	sc, _, _ := ParseTraceHeader("Root=1-692c3140-0102030405060708090a0b0c;Parent=00000000000000ff;Sampled=1")
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), sc)
	at := func(ms int) trace.SpanStartEventOption {
		return trace.WithTimestamp(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	end := func(ms int) trace.SpanEndOption {
		return trace.WithTimestamp(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	ctx, req := tr.Start(ctx, "POST /v1/invoke", trace.WithSpanKind(trace.SpanKindServer), at(0),
		trace.WithAttributes(AttrHTTPMethod.String("POST"), AttrCorrelationID.String("c0ffee")))
	cctx, chk := tr.Start(ctx, "check.ratelimit", at(1))
	_, db := tr.Start(cctx, "DynamoDB.UpdateItem", trace.WithSpanKind(trace.SpanKindClient), at(2),
		trace.WithAttributes(AttrRPCSystem.String("aws-api"), AttrAWSService.String("DynamoDB"), AttrAWSOp.String("UpdateItem"),
			AttrAWSRegion.String("us-east-1"), AttrTable.StringSlice([]string{"aegis-state"}), AttrAWSReqID.String("REQ1"), AttrHTTPStatus.Int(200)))
	db.End(end(5))
	chk.SetAttributes(AttrCode.Int(-32004), AttrWord.String("RATE_LIMITED"))
	chk.End(end(6))
	_, up := tr.Start(ctx, SpanUpstream, trace.WithSpanKind(trace.SpanKindClient), at(7),
		trace.WithAttributes(AttrServer.String("tools"), AttrTool.String("work")))
	up.SetAttributes(AttrOutcome.String("timeout"))
	up.SetStatus(codes.Error, "upstream timeout")
	up.End(end(1007))
	req.SetAttributes(AttrTenant.String("acme"), AttrOutcome.String("indeterminate"), AttrCode.Int(-32064))
	req.End(end(1008))
}

func segments(t *testing.T, spans []sdktrace.ReadOnlySpan, inLambda bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, s := range spans {
		b, err := json.MarshalIndent(Convert(s, "aegis-gateway", inLambda), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// TestSegmentGolden: spans become subsegments of the Lambda facade segment
// (the request span's parent) and of each other, with X-Ray's http, aws,
// annotations, fault fields.
func TestSegmentGolden(t *testing.T) {
	spans := record(t, sampleTrace)
	if len(spans) != 4 {
		t.Fatalf("%d spans", len(spans))
	}
	golden(t, "lambda.segments.json", segments(t, spans, true))
}

// TestSegmentNesting checks the parent links: DynamoDB under the check,
// check and upstream under the request, the request under the facade; and
// outside Lambda the request span is a segment of its own.
func TestSegmentNesting(t *testing.T) {
	spans := record(t, sampleTrace)
	byName := map[string]Segment{}
	for _, s := range spans {
		byName[s.Name()] = Convert(s, "aegis-gateway", true)
	}
	req, chk, db, up := byName["POST /v1/invoke"], byName["check.ratelimit"], byName["DynamoDB.UpdateItem"], byName[SpanUpstream]
	for _, c := range []struct {
		seg    Segment
		parent string
	}{{req, "00000000000000ff"}, {chk, req.ID}, {db, chk.ID}, {up, req.ID}} {
		if c.seg.Type != "subsegment" || c.seg.ParentID != c.parent || c.seg.TraceID != "1-692c3140-0102030405060708090a0b0c" {
			t.Errorf("%s: type %q parent %q (want %q) trace %s", c.seg.Name, c.seg.Type, c.seg.ParentID, c.parent, c.seg.TraceID)
		}
	}
	if db.Namespace != "aws" || db.AWS["table_name"] != "aegis-state" || db.AWS["operation"] != "UpdateItem" {
		t.Errorf("dynamodb subsegment %+v", db)
	}
	if up.Namespace != "remote" || !up.Fault || up.Error {
		t.Errorf("upstream subsegment %+v", up)
	}
	// Not in Lambda: a remote parent makes a segment with parent_id.
	var root Segment
	for _, s := range spans {
		if s.Name() == "POST /v1/invoke" {
			root = Convert(s, "aegis-gateway", false)
		}
	}
	if root.Type != "" || root.Name != "aegis-gateway" || root.ParentID != "00000000000000ff" || root.Annotations["operation"] != "POST /v1/invoke" {
		t.Errorf("root segment outside Lambda %+v", root)
	}
}

// TestUDPExport sends spans to a loopback UDP listener and reads back one
// datagram per span: the daemon header, a newline, the segment JSON.
func TestUDPExport(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	exp, err := NewUDPExporter("tcp:127.0.0.1:1 udp:"+pc.LocalAddr().String(), "aegis-gateway", true)
	if err != nil {
		t.Fatal(err)
	}
	tp := NewProvider(exp)
	tr := NewTracer(tp, true, nil)
	ctx, span := tr.t.Start(context.Background(), "POST /mcp")
	_, child := tr.StartUpstream(ctx, "tools", "work")
	tr.EndUpstream(child, nil, nil)
	span.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]Segment{}
	buf := make([]byte, 65536)
	for range 2 {
		_ = pc.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		doc, ok := bytes.CutPrefix(buf[:n], []byte(DaemonHeader))
		if !ok {
			t.Fatalf("datagram without daemon header: %q", buf[:n])
		}
		var s Segment
		if err := json.Unmarshal(doc, &s); err != nil {
			t.Fatalf("segment JSON: %v in %q", err, doc)
		}
		got[s.Name] = s
	}
	root, up := got["aegis-gateway"], got[SpanUpstream]
	if !xrayID.MatchString(root.TraceID) || root.TraceID != up.TraceID || up.ParentID != root.ID || up.Type != "subsegment" {
		t.Fatalf("segments %+v", got)
	}
	if up.HTTP == nil || up.HTTP.Response.Status != 200 || up.Annotations["aegis_outcome"] != "answered" {
		t.Fatalf("upstream subsegment %+v", up)
	}
	if exp.Dropped() != 0 {
		t.Fatalf("dropped %d", exp.Dropped())
	}
}

func TestDaemonUDPAddr(t *testing.T) {
	for in, want := range map[string]string{
		"169.254.79.129:2000":                   "169.254.79.129:2000",
		"tcp:127.0.0.1:2000 udp:127.0.0.2:2001": "127.0.0.2:2001",
		"udp:127.0.0.1:2000 tcp:127.0.0.1:2000": "127.0.0.1:2000",
		"tcp:127.0.0.1:2000":                    "",
		"nonsense":                              "",
	} {
		if got := DaemonUDPAddr(in); got != want {
			t.Errorf("DaemonUDPAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
