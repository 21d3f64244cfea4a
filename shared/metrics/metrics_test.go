package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/aegis-gw/aegis/shared/audit"
)

func scrape(t *testing.T, m *Registry) string {
	t.Helper()
	rr := httptest.NewRecorder()
	m.Handler().ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rr.Code != 200 {
		t.Fatalf("scrape: %d", rr.Code)
	}
	return rr.Body.String()
}

func wantLines(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(text, l+"\n") {
			t.Errorf("lacks %s", l)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

func TestCallsAndUpstreams(t *testing.T) {
	var fail error
	m := New(func(context.Context) ([]Circuit, error) {
		return []Circuit{{"acme", "billing", "open"}, {"acme", "search", "closed"}}, fail
	})
	m.RecordCall(audit.Record{Tenant: "acme", Method: "tools/call", Outcome: audit.OutcomeAllowed, LatencyMs: 12})
	m.RecordCall(audit.Record{Tenant: "acme", Method: "tools/call", Outcome: audit.OutcomeRefused, Code: -32062, Word: "TOOL_STOPPED", LatencyMs: 0.4})
	m.RecordCall(audit.Record{Tenant: "acme", Method: "a/made/up/method", Outcome: audit.OutcomeRefused, Code: -32601, Word: "METHOD_NOT_FOUND"})
	done := m.UpstreamCall("acme", "billing")
	running := m.UpstreamCall("acme", "billing")
	done("timeout")
	h := m.InFlight(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wantLines(t, scrape(t, m), "aegis_http_requests_in_flight 1")
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	wantLines(t, scrape(t, m),
		`aegis_calls_total{code="",method="tools/call",outcome="allowed",tenant="acme",word=""} 1`,
		`aegis_calls_total{code="-32062",method="tools/call",outcome="refused",tenant="acme",word="TOOL_STOPPED"} 1`,
		`aegis_calls_total{code="-32601",method="other",outcome="refused",tenant="acme",word="METHOD_NOT_FOUND"} 1`,
		`aegis_call_duration_seconds_bucket{method="tools/call",outcome="allowed",le="0.01"} 0`,
		`aegis_call_duration_seconds_bucket{method="tools/call",outcome="allowed",le="0.025"} 1`,
		`aegis_upstream_duration_seconds_count{outcome="timeout",server="billing",tenant="acme"} 1`,
		`aegis_upstream_in_flight{server="billing",tenant="acme"} 1`,
		`aegis_circuit_state{server="billing",state="open",tenant="acme"} 1`,
		`aegis_circuit_state{server="billing",state="closed",tenant="acme"} 0`,
		`aegis_circuit_state{server="search",state="closed",tenant="acme"} 1`,
		`aegis_http_requests_in_flight 0`,
		`aegis_circuit_read_errors_total 0`,
	)
	running("answered")
	fail = errors.New("store down")
	wantLines(t, scrape(t, m), `aegis_upstream_in_flight{server="billing",tenant="acme"} 0`, `aegis_circuit_read_errors_total 1`)
}

// Concurrent calls and scrapes (run with -race).
func TestConcurrent(t *testing.T) {
	m := New(func(context.Context) ([]Circuit, error) { return nil, nil })
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				done := m.UpstreamCall("acme", "s")
				m.RecordCall(audit.Record{Tenant: "acme", Method: "tools/call", Outcome: audit.OutcomeAllowed})
				done("answered")
			}
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = scrape(t, m) }()
	wg.Wait()
	wantLines(t, scrape(t, m), `aegis_calls_total{code="",method="tools/call",outcome="allowed",tenant="acme",word=""} 400`,
		`aegis_upstream_in_flight{server="s",tenant="acme"} 0`)
}

// The Lambda functions do not link Prometheus: their metrics are EMF lines
// and their binaries stay small (docs/perf/lambda.md).
func TestLambdaFunctionsDoNotLinkPrometheus(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "lambda.norpc",
		"github.com/aegis-gw/aegis/functions/gateway", "github.com/aegis-gw/aegis/functions/admin").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "prometheus") || l == "github.com/aegis-gw/aegis/shared/metrics" {
			t.Fatalf("a Lambda function links %s", l)
		}
	}
}
