package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/display"
)

// hostile is a tool name an agent chose to drive an operator's terminal:
// a title-setting OSC, a carriage return and an erase-line CSI, a tab, a
// DEL, a C1 CSI, a bidi override and a zero-width space.
const hostile = "x\x1b]0;pwned\x07\r\x1b[2Kallowed\tok\x7f\u009b2K\u202etxt\u200b"

// noRaw fails when out holds a Hidden character other than the line feed
// ending each line.
func noRaw(t *testing.T, what string, out []byte) {
	t.Helper()
	for _, r := range string(out) {
		if r != '\n' && display.Hidden(r) {
			t.Fatalf("%s holds %U raw:\n%q", what, r, out)
		}
	}
}

// TestLogLinesHoldNoRawControls: a line logged with an agent-supplied tool
// name, as an attribute, inside a logged struct and in the message, is one
// line of printable text that decodes to the very name.
func TestLogLinesHoldNoRawControls(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, slog.LevelInfo)
	rec := audit.Record{Tool: hostile, Method: "tools/call"}
	log.InfoContext(WithCorrelationID(context.Background(), "c0ffee"), "call "+hostile, "tool", hostile, "record", rec)
	out := buf.Bytes()
	if bytes.Count(out, []byte("\n")) != 1 || !bytes.HasSuffix(out, []byte("\n")) {
		t.Fatalf("not one line:\n%q", out)
	}
	noRaw(t, "log line", out)
	var m struct {
		Msg    string       `json:"msg"`
		Tool   string       `json:"tool"`
		Record audit.Record `json:"record"`
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("not JSON: %v\n%q", err, out)
	}
	if m.Msg != "call "+hostile || m.Tool != hostile || m.Record.Tool != hostile {
		t.Fatalf("decoded line lost the name: %+v", m)
	}
}

func TestEMFLineHoldsNoRawControls(t *testing.T) {
	var buf bytes.Buffer
	NewEMF(&buf).RecordCall(audit.Record{Time: time.Unix(0, 0), Tenant: "acme", Tool: hostile, Server: "s\u202e", Outcome: audit.OutcomeRefused, Code: -32601, Word: "unknown_tool"})
	noRaw(t, "EMF line", buf.Bytes())
	var l emfLine
	if err := json.Unmarshal(buf.Bytes(), &l); err != nil || l.Tool != hostile || l.Server != "s\u202e" {
		t.Fatalf("EMF line %q: %+v %v", buf.Bytes(), l, err)
	}
}

func TestSegmentHoldsNoRawControls(t *testing.T) {
	var buf bytes.Buffer
	tr := NewTracer(NewProvider(NewWriterExporter(&buf, "aegis")), false, nil)
	_, span := tr.StartUpstream(context.Background(), "payments", hostile)
	span.End()
	if !strings.Contains(buf.String(), `"name"`) {
		t.Fatalf("no segment written: %q", buf.String())
	}
	noRaw(t, "segment", buf.Bytes())
	if !json.Valid(bytes.TrimSpace(buf.Bytes())) {
		t.Fatalf("segment is not JSON: %q", buf.Bytes())
	}
}
