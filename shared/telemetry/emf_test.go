package telemetry

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
)

// TestEMFGolden: one line per outcome, produced by the real writer.
func TestEMFGolden(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	base := audit.Record{Time: at, Tenant: "acme", Caller: "agent", Session: "s1", CorrelationID: "c0ffee",
		Layer: "gateway", Method: "tools/call", Server: "tools", Tool: "work", LatencyMs: 12.5}
	allowed := base
	allowed.Outcome = "allowed"
	refused := base
	refused.Outcome, refused.Code, refused.Word, refused.LatencyMs = "refused", -32063, "UPSTREAM_UNAVAILABLE", 0.25
	timeout := base
	timeout.Outcome, timeout.Code, timeout.Word, timeout.LatencyMs = "indeterminate", -32064, "UPSTREAM_TIMEOUT", 10000
	passthrough := base // the upstream's own JSON-RPC error: not a refusal
	passthrough.Outcome, passthrough.Code = "error", -32001
	var buf bytes.Buffer
	e := NewEMF(&buf)
	for _, r := range []audit.Record{allowed, refused, timeout, passthrough} {
		e.RecordCall(r)
	}
	golden(t, "emf.golden", buf.Bytes())

	// The template's alarms read Aegis/Refusals with exactly the dimension
	// set [Code]: check the refused line declares it.
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 4 {
		t.Fatalf("%d lines", len(lines))
	}
	var l struct {
		AWS struct {
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Code     string
		Refusals int
	}
	if err := json.Unmarshal(lines[1], &l); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range l.AWS.CloudWatchMetrics {
		for _, ds := range d.Dimensions {
			if d.Namespace == "Aegis" && len(ds) == 1 && ds[0] == "Code" && len(d.Metrics) == 1 && d.Metrics[0].Name == "Refusals" {
				found = true
			}
		}
	}
	if !found || l.Code != "-32063" || l.Refusals != 1 {
		t.Fatalf("refused line lacks Aegis/Refusals by [Code]: %s", lines[1])
	}
	for _, i := range []int{0, 3} {
		if bytes.Contains(lines[i], []byte(`"Refusals"`)) {
			t.Errorf("line %d counts a refusal: %s", i, lines[i])
		}
	}
}

// TestNilEMFIsOff: a nil *EMF (metrics off) in the gateway's Metrics
// interface writes nothing and does not panic.
func TestNilEMFIsOff(t *testing.T) {
	var e *EMF
	var m interface{ RecordCall(audit.Record) } = e
	m.RecordCall(audit.Record{Tenant: "acme"})
}
