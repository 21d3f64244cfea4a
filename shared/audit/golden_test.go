package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the writer")

// goldenKey is the params key of the golden records (testSecret).
var goldenKey = func() audit.ParamsKey {
	k, err := audit.NewParamsKey(testSecret)
	if err != nil {
		panic(err)
	}
	return k
}()

// records is one record of each outcome.
func records() map[string]audit.Record {
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	base := audit.Record{
		Time: at, Tenant: "acme", Caller: "acme-agent", Session: "0123456789abcdef0123456789abcdef",
		CorrelationID: "4bf92f3577b34da6a3ce929d0e0e4736", Layer: "gateway", Method: "tools/call",
		Server: "mock-primary", Tool: "echo", ParamsHash: goldenKey.Hash([]byte(`{"message":"hi"}`)),
		PolicyHash: audit.PolicyHashNone,
	}
	allowed := base
	allowed.Outcome, allowed.LatencyMs = audit.OutcomeAllowed, 3.25
	refused := base
	refused.Outcome, refused.Code, refused.Word, refused.LatencyMs = audit.OutcomeRefused, -32004, "RATE_LIMITED", 0.4
	refused.Slot = "ratelimit"
	failed := base
	failed.Outcome, failed.Code, failed.Word, failed.LatencyMs = audit.OutcomeError, -32000, "UPSTREAM_ERROR", 12.5
	failed.Slot = audit.SlotUpstream
	indet := base
	indet.Outcome, indet.Code, indet.Word, indet.LatencyMs = audit.OutcomeIndeterminate, -32064, "UPSTREAM_TIMEOUT", 10000
	indet.Slot = audit.SlotUpstream
	return map[string]audit.Record{"allowed": allowed, "refused": refused, "error": failed, "indeterminate": indet}
}

func TestGolden(t *testing.T) {
	for name, r := range records() {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := audit.NewJSONWriter(&buf).Write(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("%s differs from what the writer writes:\n got %s\nwant %s", path, buf.Bytes(), want)
			}
			var back audit.Record
			if err := json.Unmarshal(want, &back); err != nil {
				t.Fatal(err)
			}
			if err := back.Validate(); err != nil {
				t.Errorf("%s: %v", path, err)
			}
		})
	}
}

// TestEveryGoldenIsRead: each testdata/*.golden is one of records(), so
// none drifts unchecked.
func TestEveryGoldenIsRead(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	recs := records()
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".golden")
		if _, ok := recs[name]; !ok {
			t.Errorf("%s is read by no test", f)
		}
	}
	if len(files) != len(recs) {
		t.Errorf("%d golden files for %d records", len(files), len(recs))
	}
	for _, o := range audit.Outcomes {
		if recs[string(o)].Outcome != o {
			t.Errorf("no golden record of outcome %s", o)
		}
	}
}
