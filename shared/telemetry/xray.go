package telemetry

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-gw/aegis/shared/display"
)

// This file turns OpenTelemetry spans into X-Ray segment documents and sends
// them to the X-Ray daemon over UDP (the Lambda runtime runs one when the
// function has Tracing: Active). docs/design/telemetry.md explains the
// mapping.

// DaemonHeader precedes every segment document sent to the X-Ray daemon.
const DaemonHeader = `{"format": "json", "version": 1}` + "\n"

// maxDocument is the largest segment document the daemon takes in one
// datagram; bigger documents are dropped (and counted).
const maxDocument = 64 << 10

// IDGenerator makes trace ids X-Ray accepts: the first four bytes are the
// epoch seconds of the trace's start, the other twelve random. A context
// carrying a root trace id (WithRootTraceID: an X-Ray header with Root and
// no Parent) continues that trace instead of starting one.
type IDGenerator struct {
	Now func() time.Time // nil: time.Now
}

var _ sdktrace.IDGenerator = IDGenerator{}

// NewIDs implements sdktrace.IDGenerator.
func (g IDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if tid, ok := ctx.Value(rootKey{}).(trace.TraceID); ok && tid.IsValid() {
		return tid, g.NewSpanID(ctx, tid)
	}
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	var tid trace.TraceID
	binary.BigEndian.PutUint32(tid[:4], uint32(now().Unix()))
	binary.BigEndian.PutUint32(tid[4:8], rand.Uint32())
	binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	return tid, g.NewSpanID(ctx, tid)
}

// NewSpanID implements sdktrace.IDGenerator.
func (IDGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

type rootKey struct{}

// XRayTraceID formats an OpenTelemetry trace id the way X-Ray writes it:
// "1-" + 8 hex digits (epoch seconds) + "-" + 24 hex digits.
func XRayTraceID(t trace.TraceID) string {
	h := hex.EncodeToString(t[:])
	return "1-" + h[:8] + "-" + h[8:]
}

// ParseTraceHeader reads an X-Ray trace header ("Root=1-...;Parent=...;
// Sampled=1", as in X-Amzn-Trace-Id and _X_AMZN_TRACE_ID). sc is valid only
// when both Root and Parent are present; root is the trace id whenever Root
// is well formed. Sampled=0 clears the sampled flag; Sampled=1 or an
// absent or "?" decision sets it (aegis records what it is handed).
func ParseTraceHeader(h string) (sc trace.SpanContext, root trace.TraceID, ok bool) {
	var (
		parent  trace.SpanID
		sampled = true
		hasRoot bool
	)
	for part := range strings.SplitSeq(h, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Root":
			// 1-XXXXXXXX-YYYYYYYYYYYYYYYYYYYYYYYY
			if len(v) != 35 || v[:2] != "1-" || v[10] != '-' {
				return trace.SpanContext{}, trace.TraceID{}, false
			}
			b, err := hex.DecodeString(v[2:10] + v[11:])
			if err != nil {
				return trace.SpanContext{}, trace.TraceID{}, false
			}
			copy(root[:], b)
			hasRoot = root.IsValid()
		case "Parent":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != 8 {
				return trace.SpanContext{}, trace.TraceID{}, false
			}
			copy(parent[:], b)
		case "Sampled":
			sampled = v != "0"
		}
	}
	if !hasRoot {
		return trace.SpanContext{}, trace.TraceID{}, false
	}
	var flags trace.TraceFlags
	if sampled {
		flags = trace.FlagsSampled
	}
	if parent.IsValid() {
		sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: root, SpanID: parent, TraceFlags: flags, Remote: true})
	}
	return sc, root, true
}

// Segment is the part of an X-Ray segment document aegis writes. A span
// with a parent becomes a subsegment (Type "subsegment", ParentID set),
// sent on its own; a span without one becomes a segment.
type Segment struct {
	Name        string              `json:"name"`
	ID          string              `json:"id"`
	TraceID     string              `json:"trace_id"`
	ParentID    string              `json:"parent_id,omitempty"`
	Type        string              `json:"type,omitempty"`
	StartTime   float64             `json:"start_time"`
	EndTime     float64             `json:"end_time"`
	Namespace   string              `json:"namespace,omitempty"`
	Origin      string              `json:"origin,omitempty"`
	Error       bool                `json:"error,omitempty"`
	Fault       bool                `json:"fault,omitempty"`
	Throttle    bool                `json:"throttle,omitempty"`
	Cause       *Cause              `json:"cause,omitempty"`
	HTTP        *SegmentHTTP        `json:"http,omitempty"`
	AWS         map[string]string   `json:"aws,omitempty"`
	Annotations map[string]any      `json:"annotations,omitempty"`
	Metadata    map[string]Metadata `json:"metadata,omitempty"`
}

// Metadata is one namespace of a segment's metadata.
type Metadata map[string]any

// Cause explains an error or fault.
type Cause struct {
	Exceptions []Exception `json:"exceptions"`
}

// Exception is one entry of a Cause.
type Exception struct {
	ID      string `json:"id"`
	Message string `json:"message"`
}

// SegmentHTTP is the http object of a (sub)segment.
type SegmentHTTP struct {
	Request  *HTTPRequest  `json:"request,omitempty"`
	Response *HTTPResponse `json:"response,omitempty"`
}

// HTTPRequest describes the request of a (sub)segment.
type HTTPRequest struct {
	Method string `json:"method,omitempty"`
	URL    string `json:"url,omitempty"`
}

// HTTPResponse describes the response of a (sub)segment.
type HTTPResponse struct {
	Status int `json:"status,omitempty"`
}

// Attribute keys with a meaning in the segment document (OpenTelemetry
// semantic convention names); every other attribute becomes an
// annotation.
const (
	AttrHTTPMethod  = attribute.Key("http.request.method")
	AttrHTTPStatus  = attribute.Key("http.response.status_code")
	AttrURL         = attribute.Key("url.full")
	AttrRPCSystem   = attribute.Key("rpc.system")
	AttrAWSService  = attribute.Key("rpc.service")
	AttrAWSOp       = attribute.Key("rpc.method")
	AttrAWSRegion   = attribute.Key("cloud.region")
	AttrAWSReqID    = attribute.Key("aws.request_id")
	AttrTable       = attribute.Key("aws.dynamodb.table_names")
	AttrAWSThrottle = attribute.Key("aws.throttled")
)

// Convert turns a finished span into a segment document. inLambda makes a
// span whose parent is remote (the function's facade segment, from
// _X_AMZN_TRACE_ID) a subsegment: a Lambda function may only add
// subsegments to the segment Lambda itself records.
func Convert(s sdktrace.ReadOnlySpan, service string, inLambda bool) Segment {
	sc := s.SpanContext()
	seg := Segment{
		Name:      segmentName(s.Name()),
		ID:        sc.SpanID().String(),
		TraceID:   XRayTraceID(sc.TraceID()),
		StartTime: epoch(s.StartTime()),
		EndTime:   epoch(s.EndTime()),
	}
	if p := s.Parent(); p.IsValid() {
		seg.ParentID = p.SpanID().String()
		if !p.IsRemote() || inLambda {
			seg.Type = "subsegment"
		}
	}
	if seg.Type == "" {
		seg.Name = segmentName(service)
		seg.Annotations = map[string]any{"operation": s.Name()}
	}
	switch s.SpanKind() {
	case trace.SpanKindClient:
		seg.Namespace = "remote"
	}
	for _, kv := range s.Attributes() {
		switch kv.Key {
		case AttrHTTPMethod:
			seg.http().Request = orReq(seg.HTTP.Request)
			seg.HTTP.Request.Method = kv.Value.String()
		case AttrURL:
			seg.http().Request = orReq(seg.HTTP.Request)
			seg.HTTP.Request.URL = kv.Value.String()
		case AttrHTTPStatus:
			seg.http().Response = &HTTPResponse{Status: int(kv.Value.AsInt64())}
		case AttrRPCSystem:
			if kv.Value.AsString() == "aws-api" {
				seg.Namespace = "aws"
			}
		case AttrAWSService:
		case AttrAWSOp:
			seg.aws()["operation"] = kv.Value.AsString()
		case AttrAWSRegion:
			seg.aws()["region"] = kv.Value.AsString()
		case AttrAWSReqID:
			seg.aws()["request_id"] = kv.Value.AsString()
		case AttrTable:
			if v := kv.Value.AsStringSlice(); len(v) == 1 {
				seg.aws()["table_name"] = v[0]
			} else if len(v) > 1 {
				seg.aws()["table_name"] = strings.Join(v, ",")
			}
		case AttrAWSThrottle:
			seg.Throttle = kv.Value.AsBool()
		default:
			seg.annotate(kv)
		}
	}
	if st := s.Status(); st.Code == codes.Error {
		status := 0
		if seg.HTTP != nil && seg.HTTP.Response != nil {
			status = seg.HTTP.Response.Status
		}
		if status >= 400 && status < 500 {
			seg.Error = true
		} else {
			seg.Fault = true
		}
		if st.Description != "" {
			seg.Cause = &Cause{Exceptions: []Exception{{ID: seg.ID, Message: st.Description}}}
		}
	}
	return seg
}

func orReq(r *HTTPRequest) *HTTPRequest {
	if r == nil {
		return &HTTPRequest{}
	}
	return r
}

func (s *Segment) http() *SegmentHTTP {
	if s.HTTP == nil {
		s.HTTP = &SegmentHTTP{}
	}
	return s.HTTP
}

func (s *Segment) aws() map[string]string {
	if s.AWS == nil {
		s.AWS = map[string]string{}
	}
	return s.AWS
}

// annotate adds kv as an annotation (X-Ray indexes these for filter
// expressions; keys may hold only letters, digits and underscores) or, for
// slices, as metadata.
func (s *Segment) annotate(kv attribute.KeyValue) {
	var v any
	switch kv.Value.Type() {
	case attribute.BOOL:
		v = kv.Value.AsBool()
	case attribute.INT64:
		v = kv.Value.AsInt64()
	case attribute.FLOAT64:
		f := kv.Value.AsFloat64()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return
		}
		v = f
	case attribute.STRING:
		v = kv.Value.AsString()
	default:
		if s.Metadata == nil {
			s.Metadata = map[string]Metadata{"default": {}}
		}
		s.Metadata["default"][string(kv.Key)] = kv.Value.AsInterface()
		return
	}
	if s.Annotations == nil {
		s.Annotations = map[string]any{}
	}
	if len(s.Annotations) < 50 {
		s.Annotations[annotationKey(string(kv.Key))] = v
	}
}

func annotationKey(k string) string {
	b := []byte(k)
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			b[i] = '_'
		}
	}
	return string(b)
}

// segmentName keeps the characters X-Ray allows in a name (letters, digits,
// whitespace and _.:/%&#=+\-@), replacing others, and caps it at 200.
func segmentName(n string) string {
	out := []rune(n)
	for i, r := range out {
		if !(r == ' ' || r == '_' || r == '.' || r == ':' || r == '/' || r == '%' || r == '&' || r == '#' ||
			r == '=' || r == '+' || r == '\\' || r == '-' || r == '@' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || r > 127) {
			out[i] = '_'
		}
	}
	if len(out) > 200 {
		out = out[:200]
	}
	return string(out)
}

// epoch is t as fractional epoch seconds (microsecond precision).
func epoch(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

// Exporter is an sdktrace.SpanExporter that writes each span as one X-Ray
// segment document to W: with the daemon header for the X-Ray daemon
// (NewUDPExporter), or one JSON line per segment for debugging
// (NewWriterExporter). Export failures are counted, never returned: a lost
// span must not become an error in the request that made it. Documents
// hold only printable text (display.JSON), whatever a tool's name holds.
type Exporter struct {
	Service  string // segment name of root spans
	InLambda bool   // spans with a remote parent become subsegments
	header   bool
	mu       sync.Mutex
	w        io.Writer
	closer   io.Closer
	dropped  atomic.Int64
	stopped  atomic.Bool
}

var _ sdktrace.SpanExporter = (*Exporter)(nil)

// NewUDPExporter dials the X-Ray daemon at addr (AWS_XRAY_DAEMON_ADDRESS:
// "host:port", or "tcp:host:port udp:host:port" of which the UDP address is
// used). UDP needs no connection: each span is one datagram, sent when the
// span ends, so nothing is left to flush when a Lambda invocation returns.
func NewUDPExporter(addr, service string, inLambda bool) (*Exporter, error) {
	udp := DaemonUDPAddr(addr)
	if udp == "" {
		return nil, errors.New("telemetry: no UDP address in AWS_XRAY_DAEMON_ADDRESS " + strconv.Quote(addr))
	}
	conn, err := net.Dial("udp", udp)
	if err != nil {
		return nil, err
	}
	return &Exporter{Service: service, InLambda: inLambda, header: true, w: conn, closer: conn}, nil
}

// NewWriterExporter writes one segment JSON per line to w (no daemon
// header): AEGIS_TRACE_STDOUT=1 under `aegis serve`.
func NewWriterExporter(w io.Writer, service string) *Exporter {
	return &Exporter{Service: service, w: w}
}

// DaemonUDPAddr picks the UDP address out of AWS_XRAY_DAEMON_ADDRESS.
func DaemonUDPAddr(v string) string {
	v = strings.TrimSpace(v)
	if !strings.Contains(v, ":") {
		return ""
	}
	for f := range strings.FieldsSeq(v) {
		if a, ok := strings.CutPrefix(f, "udp:"); ok {
			return a
		}
	}
	if strings.Contains(v, " ") || strings.HasPrefix(v, "tcp:") {
		return ""
	}
	return v
}

// Dropped is how many spans could not be written.
func (e *Exporter) Dropped() int64 { return e.dropped.Load() }

// ExportSpans implements sdktrace.SpanExporter.
func (e *Exporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.stopped.Load() {
		return nil
	}
	for _, s := range spans {
		b, err := json.Marshal(Convert(s, e.Service, e.InLambda))
		b = display.JSON(b) // an agent's tool name, printable text (see NewLogger)
		if err != nil || len(b)+len(DaemonHeader) > maxDocument {
			e.dropped.Add(1)
			continue
		}
		var doc []byte
		if e.header {
			doc = make([]byte, 0, len(DaemonHeader)+len(b))
			doc = append(append(doc, DaemonHeader...), b...)
		} else {
			doc = append(b, '\n')
		}
		e.mu.Lock()
		_, err = e.w.Write(doc)
		e.mu.Unlock()
		if err != nil {
			e.dropped.Add(1)
		}
	}
	return nil
}

// Shutdown implements sdktrace.SpanExporter; it closes the UDP socket.
func (e *Exporter) Shutdown(context.Context) error {
	if e.stopped.Swap(true) || e.closer == nil {
		return nil
	}
	return e.closer.Close()
}
