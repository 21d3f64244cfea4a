package dynamo_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/dynamo"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the writer")

// wire renders an item as DynamoDB JSON ({"S": ...}, {"N": ...}).
func wire(it dynamo.Item) map[string]map[string]string {
	out := map[string]map[string]string{}
	for k, v := range it {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			out[k] = map[string]string{"S": v.Value}
		case *types.AttributeValueMemberN:
			out[k] = map[string]string{"N": v.Value}
		}
	}
	return out
}

// goldenParamsKey is the params key of the golden items: the same fixed
// secret as shared/audit's golden records.
func goldenParamsKey(t *testing.T) audit.ParamsKey {
	k, err := audit.NewParamsKey(bytes.Repeat([]byte{0x5a}, audit.ParamsKeySize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestAuditItemGolden pins the stored form of one record of each outcome,
// as dynamo.Store.Write builds it (suffix fixed; it is random in Write).
func TestAuditItemGolden(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	base := audit.Record{
		Time: at, Tenant: "acme", Caller: "acme-agent", Session: "0123456789abcdef0123456789abcdef",
		CorrelationID: "4bf92f3577b34da6a3ce929d0e0e4736", Layer: "gateway", Method: "tools/call",
		Server: "mock-primary", Tool: "echo", ParamsHash: goldenParamsKey(t).Hash([]byte(`{"message":"hi"}`)),
		PolicyHash: audit.PolicyHashNone,
	}
	cases := map[string]func(*audit.Record){
		"allowed": func(r *audit.Record) { r.Outcome, r.LatencyMs = audit.OutcomeAllowed, 3.25 },
		"refused": func(r *audit.Record) {
			r.Outcome, r.Code, r.Word, r.LatencyMs = audit.OutcomeRefused, -32004, "RATE_LIMITED", 0.4
		},
		"error": func(r *audit.Record) {
			r.Outcome, r.Code, r.Word, r.LatencyMs = audit.OutcomeError, -32000, "UPSTREAM_ERROR", 12.5
		},
		"indeterminate": func(r *audit.Record) {
			r.Outcome, r.Code, r.Word, r.LatencyMs = audit.OutcomeIndeterminate, -32064, "UPSTREAM_TIMEOUT", 10000
		},
	}
	for name, set := range cases {
		t.Run(name, func(t *testing.T) {
			r := base
			set(&r)
			got, err := json.MarshalIndent(wire(dynamo.AuditItem(r, 90*24*time.Hour, "00c0ffee")), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", "audit_"+name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s differs from what the writer stores:\n got %s\nwant %s", path, got, want)
			}
		})
	}
}
