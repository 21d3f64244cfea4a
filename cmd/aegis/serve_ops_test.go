package main

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
)

// get sends GET base+path with an optional bearer key.
func get(t *testing.T, base, path, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// accessLines are the access-log lines in a process's stderr.
func accessLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(stderr, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
			out = append(out, m)
		}
	}
	return out
}

// TestServeOperations is issue 17's "running and watching" on a real
// `aegis serve --demo`: health and readiness, /metrics behind the admin
// key, one access-log line per request that never holds a key, and a kill
// switch in force at once on the embedded store, in both directions.
func TestServeOperations(t *testing.T) {
	adminKey := admin.NewKey()
	demoKey := "aegis_demo0000000000_" + strings.Repeat("s3cr3t", 5)
	t.Setenv(envAdminKey, adminKey)
	p := startServe(t, []string{envAdminKey + "=" + adminKey, "AEGIS_DEMO_KEY=" + demoKey}, "--demo")
	if !p.running() {
		t.Fatalf("aegis serve exited: %v\n%s", p.err, p.stderr.String())
	}
	if st, body := get(t, p.base, "/healthz", ""); st != 200 || !strings.Contains(body, `"alive"`) {
		t.Fatalf("/healthz: %d %s", st, body)
	}
	if st, body := get(t, p.base, "/readyz", ""); st != 200 || body != `{"status":"ready","checks":{"policies":"ok","registry":"ok","store":"ok"}}`+"\n" {
		t.Fatalf("/readyz: %d %s", st, body)
	}
	// /metrics names tenants: only the admin key opens it.
	for _, k := range []string{"", demoKey, "wrong-key-wrong-key-wrong-key"} {
		if st, _ := get(t, p.base, "/metrics", k); st != http.StatusUnauthorized {
			t.Fatalf("/metrics with key %q: %d, want 401", k, st)
		}
	}
	client := &http.Client{Timeout: time.Minute}
	echo := func(msg string) rpcAnswer {
		t.Helper()
		_, a, err := invoke(client, p.base, demoKey, "echo", map[string]string{"message": msg})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := echo("hi"); a.text() != "hi" {
		t.Fatalf("echo: %s", a.raw)
	}
	// Stop and resume, each call right after: no refresh period here.
	cli := cliOK(t, "--url="+p.base)
	for i := range 5 {
		out := cli("tools", "stop", "--tenant", "demo", "--server", "mock-primary", "--reason", "test")
		if !strings.Contains(out, "stopped server mock-primary for tenant demo: in force now") {
			t.Fatalf("stop answer: %q", out)
		}
		if a := echo("stopped"); a.Error == nil || a.Error.Code != -32062 || !strings.HasPrefix(a.Error.Message, "Server mock-primary is stopped by an operator (every tool on it); ") {
			t.Fatalf("round %d: call right after the stop: %s", i, a.raw)
		}
		cli("tools", "resume", "--tenant", "demo", "--server", "mock-primary")
		if a := echo("back"); a.text() != "back" {
			t.Fatalf("round %d: call right after the resume: %s", i, a.raw)
		}
	}
	st, m := get(t, p.base, "/metrics", adminKey)
	for _, want := range []string{
		`aegis_calls_total{code="",method="tools/call",outcome="allowed",tenant="demo",word=""} 6`,
		`aegis_calls_total{code="-32062",method="tools/call",outcome="refused",tenant="demo",word="TOOL_STOPPED"} 5`,
		`aegis_call_duration_seconds_count{method="tools/call",outcome="allowed"} 6`,
		`aegis_upstream_duration_seconds_count{outcome="answered",server="mock-primary",tenant="demo"} 6`,
		`aegis_upstream_in_flight{server="mock-primary",tenant="demo"} 0`,
		`aegis_circuit_state{server="mock-primary",state="closed",tenant="demo"} 1`,
		`aegis_circuit_state{server="mock-primary",state="open",tenant="demo"} 0`,
		`aegis_http_requests_in_flight 1`, // this scrape
	} {
		if st != 200 || !strings.Contains(m, want+"\n") {
			t.Fatalf("/metrics (%d) lacks %s:\n%s", st, want, m)
		}
	}
	// A request that carries the keys where they do not belong: a query.
	get(t, p.base, "/v1/invoke?api_key="+demoKey+"&admin="+adminKey, demoKey)

	p.signal(t, 15)
	p.wait(t, time.Minute)
	logs := p.stderr.String()
	for _, secret := range []string{demoKey, "s3cr3t", adminKey} {
		if strings.Contains(logs, secret) {
			t.Fatalf("a key (%q) is in the log:\n%s", secret, logs)
		}
	}
	lines := accessLines(t, logs)
	// healthz, readyz, 3 × metrics refused, 1 + 5 × (stop, call, resume, call), metrics, the GET.
	if len(lines) != 2+3+1+20+1+1 {
		t.Fatalf("%d access-log lines:\n%s", len(lines), logs)
	}
	refused := 0
	for _, l := range lines {
		if l["path"] == "/v1/invoke" && l["status"] == 200.0 && l["code"] == -32062.0 {
			refused++
			for k, v := range map[string]any{"method": "POST", "tenant": "demo", "rpc_method": "tools/call", "server": "mock-primary", "tool": "echo", "word": "TOOL_STOPPED"} {
				if l[k] != v {
					t.Fatalf("%s = %v, want %v: %v", k, l[k], v, l)
				}
			}
			if id, _ := l["correlation_id"].(string); len(id) != 32 {
				t.Fatalf("no correlation id: %v", l)
			}
			if _, ok := l["latency_ms"].(float64); !ok {
				t.Fatalf("no latency: %v", l)
			}
		}
	}
	if refused != 5 {
		t.Fatalf("%d refused calls in the access log, want 5", refused)
	}
	if last := lines[len(lines)-1]; last["path"] != "/v1/invoke" || last["status"] != 405.0 {
		t.Fatalf("the GET with keys in its query: %v", last)
	}
}

// The start-up: a bad telemetry value stops aegis serve, naming
// the variable (it used to start silently).
func TestServeBadTelemetryStopsStartup(t *testing.T) {
	for _, tc := range []struct{ env []string }{
		{[]string{"AEGIS_LOG_LEVEL=bogus", "AEGIS_TRACE_STDOUT=1", "AEGIS_METRICS=emf"}},
		{[]string{"AEGIS_METRICS=statsd"}},
		{[]string{"AEGIS_TRACE_STDOUT=yes"}},
	} {
		p := startServe(t, tc.env, "--demo")
		if code := p.wait(t, time.Minute); code != 1 {
			t.Fatalf("%v: exit %d, want 1", tc.env, code)
		}
		name := strings.SplitN(tc.env[0], "=", 2)[0]
		if !strings.Contains(p.stderr.String(), "aegis serve: "+name+"=") {
			t.Fatalf("%v: stderr does not name %s:\n%s", tc.env, name, p.stderr.String())
		}
	}
}

// AEGIS_LOG_LEVEL is honoured: at warn the access log (INFO) is quiet;
// AEGIS_METRICS=off serves no /metrics.
func TestServeLogLevelAndMetricsOff(t *testing.T) {
	adminKey := admin.NewKey()
	p := startServe(t, []string{"AEGIS_LOG_LEVEL=warn", "AEGIS_METRICS=off", envAdminKey + "=" + adminKey}, "--demo")
	if st, _ := get(t, p.base, "/metrics", adminKey); st != http.StatusNotFound {
		t.Fatalf("/metrics with AEGIS_METRICS=off: %d, want 404", st)
	}
	get(t, p.base, "/healthz", "")
	p.signal(t, 15)
	p.wait(t, time.Minute)
	if n := len(accessLines(t, p.stderr.String())); n != 0 {
		t.Fatalf("%d access lines at warn:\n%s", n, p.stderr.String())
	}
}

// A missing DynamoDB table stops start-up with the command that creates
// it, not a bare ResourceNotFoundException.
func TestServeMissingTable(t *testing.T) {
	e := dynamotest.Start(t)
	env := append(dynamoEnv(e), "AEGIS_STATE_TABLE=no-such-table-"+strings.ToLower(t.Name()))
	p := startServe(t, env, "--demo", "--store", "dynamodb")
	if code := p.wait(t, time.Minute); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	want := `DynamoDB table "no-such-table-testservemissingtable" (AEGIS_STATE_TABLE) does not exist at ` + e.Endpoint
	if s := p.stderr.String(); !strings.Contains(s, want) || !strings.Contains(s, "; run: aegis admin create-tables") {
		t.Fatalf("stderr:\n%s\nwant %q and the create-tables hint", s, want)
	}
}

// On DynamoDB a stop is in force on every instance after the refresh
// period, and the CLI says so.
func TestServeStopInForceOnDynamo(t *testing.T) {
	e := dynamotest.Start(t)
	_ = e.Store(t, dynamo.Options{})
	adminKey := admin.NewKey()
	t.Setenv(envAdminKey, adminKey)
	p := startServe(t, append(dynamoEnv(e), envAdminKey+"="+adminKey, "KILL_SWITCH_REFRESH_SECS=3"), "--demo", "--store", "dynamodb")
	if !p.running() {
		t.Fatalf("exited: %s", p.stderr.String())
	}
	out := cliOK(t, "--url="+p.base)("tools", "stop", "--tenant", "demo", "--tool", "echo")
	if !strings.Contains(out, "stopped tool echo on mock-primary for tenant demo: in force on every instance by ") ||
		!strings.Contains(out, "(instances re-read stops every 3s, KILL_SWITCH_REFRESH_SECS; until then one may still run it)") {
		t.Fatalf("stop answer: %q", out)
	}
	// The DynamoDB operations are timed, and the circuit states read from
	// the tables.
	st, m := get(t, p.base, "/metrics", adminKey)
	if st != 200 || !regexp.MustCompile(`(?m)^aegis_store_duration_seconds_count\{operation="PutItem",result="ok"\} [1-9]`).MatchString(m) ||
		!strings.Contains(m, `aegis_circuit_state{server="mock-primary",state="closed",tenant="demo"} 1`) {
		t.Fatalf("/metrics on DynamoDB (%d):\n%s", st, m)
	}
}

// AEGIS_TRACE_STDOUT=1 is honoured by aegis serve: each request's X-Ray
// segment is a JSON line on stderr; AEGIS_METRICS=emf writes the EMF line
// of each call there too.
func TestServeTraceAndEMFOnStderr(t *testing.T) {
	demoKey := "aegis_tracetest01_" + strings.Repeat("x", 24)
	p := startServe(t, []string{"AEGIS_TRACE_STDOUT=1", "AEGIS_METRICS=emf", "AEGIS_DEMO_KEY=" + demoKey}, "--demo")
	if _, a, err := invoke(&http.Client{Timeout: time.Minute}, p.base, demoKey, "echo", map[string]string{"message": "x"}); err != nil || a.text() != "x" {
		t.Fatalf("echo: %v %s", err, a.raw)
	}
	p.signal(t, 15)
	p.wait(t, time.Minute)
	logs := p.stderr.String()
	if !strings.Contains(logs, `"name":"aegis"`) || !strings.Contains(logs, `"trace_id":"1-`) {
		t.Fatalf("no X-Ray segment on stderr:\n%s", logs)
	}
	if !strings.Contains(logs, `"CloudWatchMetrics"`) || !strings.Contains(logs, `"Tenant":"demo"`) {
		t.Fatalf("no EMF line on stderr:\n%s", logs)
	}
}
