package telemetry

import (
	"encoding/json"
	"io"
	"strconv"
	"sync"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/display"
)

// Namespace is the CloudWatch namespace of aegis's metrics.
const Namespace = "Aegis"

// EMF writes one CloudWatch embedded-metric-format line per audited
// tools/call to W (stdout in Lambda, where the Lambda log pipeline turns
// the lines into metrics with no API call). A nil *EMF is "metrics off".
//
// Every line declares Calls (Count) and LatencyMs (Milliseconds) with the
// dimension sets [Outcome] and [Tenant]; a call the gateway answered with
// an error of its own (a refusal: the audit record has a word, which an
// upstream's own JSON-RPC error has not) adds Refusals (Count) with the
// dimension sets [Code] and [Tenant, Code], Code being the JSON-RPC code as
// a string ("-32063"). template.yaml's alarms read Aegis/Refusals by Code.
// Outcome is the audit outcome: allowed, refused, error, indeterminate (a
// -32064 is indeterminate and still a refusal).
type EMF struct {
	mu sync.Mutex
	w  io.Writer
}

// NewEMF returns an EMF writer to w. Writes are serialized.
func NewEMF(w io.Writer) *EMF { return &EMF{w: w} }

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMeta struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

// emfLine is one line. Field order is the JSON order (golden tested).
type emfLine struct {
	AWS           emfMeta `json:"_aws"`
	Tenant        string  `json:"Tenant"`
	Outcome       string  `json:"Outcome"`
	Code          string  `json:"Code,omitempty"`
	Word          string  `json:"Word,omitempty"`
	Server        string  `json:"Server,omitempty"`
	Tool          string  `json:"Tool,omitempty"`
	CorrelationID string  `json:"correlation_id"`
	Calls         int     `json:"Calls"`
	LatencyMs     float64 `json:"LatencyMs"`
	Refusals      int     `json:"Refusals,omitempty"`
}

var (
	callMetrics = emfDirective{
		Namespace:  Namespace,
		Dimensions: [][]string{{"Outcome"}, {"Tenant"}},
		Metrics:    []emfMetric{{"Calls", "Count"}, {"LatencyMs", "Milliseconds"}},
	}
	refusalMetrics = emfDirective{
		Namespace:  Namespace,
		Dimensions: [][]string{{"Code"}, {"Tenant", "Code"}},
		Metrics:    []emfMetric{{"Refusals", "Count"}},
	}
)

// Line is the EMF line for rec, without the newline. The agent-supplied
// names in it (Server, Tool) are written with display.JSON, so the line
// holds only printable text.
func Line(rec audit.Record) []byte {
	l := emfLine{
		AWS:           emfMeta{Timestamp: rec.Time.UnixMilli(), CloudWatchMetrics: []emfDirective{callMetrics}},
		Tenant:        rec.Tenant,
		Outcome:       string(rec.Outcome),
		Server:        rec.Server,
		Tool:          rec.Tool,
		CorrelationID: rec.CorrelationID,
		Calls:         1,
		LatencyMs:     rec.LatencyMs,
	}
	if rec.Code != 0 {
		l.Code = strconv.Itoa(rec.Code)
	}
	if rec.Word != "" {
		l.Word = rec.Word
		l.Refusals = 1
		l.AWS.CloudWatchMetrics = append(l.AWS.CloudWatchMetrics, refusalMetrics)
	}
	b, _ := json.Marshal(l)
	return display.JSON(b)
}

// RecordCall writes rec's line. It implements the gateway's Metrics. On a
// nil *EMF it does nothing, so a nil *EMF stored in the interface is off.
func (e *EMF) RecordCall(rec audit.Record) {
	if e == nil {
		return
	}
	b := append(Line(rec), '\n')
	e.mu.Lock()
	_, _ = e.w.Write(b)
	e.mu.Unlock()
}

// UpstreamCall implements the gateway's Metrics: EMF lines are per call
// (RecordCall), so an upstream exchange adds nothing.
func (e *EMF) UpstreamCall(string, string) func(string) { return func(string) {} }
