package matrix_test

// The gateway boundaries: each starts what it runs once (one gateway or
// process per profile), seeds the world, and then sends the rows' requests
// and reads back their audit records.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/aegis-gw/aegis/internal/aegisbin"
	"github.com/aegis-gw/aegis/internal/matrix"
	"github.com/aegis-gw/aegis/internal/syncbuf"
	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/lambdatest"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/wiring"
)

// request is one HTTP request of a row.
type request struct {
	path   string
	header http.Header
	body   string
}

// answer is what a boundary answered.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// target is one running deployment of a gateway boundary (one profile).
type target interface {
	send(ctx context.Context, r request) (answer, error)
	// records are tenant's audit records.
	records(ctx context.Context, tenant string) ([]audit.Record, error)
}

// httpTarget sends requests to a gateway over HTTP.
type httpTarget struct {
	base    string
	client  *http.Client
	reader  audit.Reader // in-process and DynamoDB boundaries
	adminFn func(ctx context.Context, tenant string) ([]audit.Record, error)
}

func (h *httpTarget) send(ctx context.Context, r request) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+r.path, strings.NewReader(r.body))
	if err != nil {
		return answer{}, err
	}
	req.Header = r.header.Clone()
	if host := req.Header.Get("Host"); host != "" { // net/http sends req.Host, never a Host header
		req.Host = host
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func (h *httpTarget) records(ctx context.Context, tenant string) ([]audit.Record, error) {
	if h.adminFn != nil {
		return h.adminFn(ctx, tenant)
	}
	return queryAll(ctx, h.reader, tenant)
}

// queryAll reads every record of tenant from the last hour.
func queryAll(ctx context.Context, r audit.Reader, tenant string) ([]audit.Record, error) {
	now := time.Now()
	q := audit.Query{Tenant: tenant, From: now.Add(-time.Hour), To: now.Add(time.Hour), Limit: audit.MaxPageSize}
	var out []audit.Record
	for {
		recs, next, err := r.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
		if next == "" {
			return out, nil
		}
		q.Cursor = next
	}
}

// faulty is the embedded store with failures for the tenants of rows that
// declare a fault: "counters" fails their rate windows (the counters, and
// the windows a session keeps in its record, which are counted with its
// touch: session.Admitter) and quota meter, "stops" their kill switch's
// reads.
type faulty struct {
	*memstore.Store
	faults map[string]string // tenant id -> fault
}

var errFault = fmt.Errorf("matrix: injected store failure")

func (f *faulty) Incr(ctx context.Context, key string, limit int64, expires time.Time) (int64, bool, error) {
	if f.countersFail(key) {
		return 0, false, errFault
	}
	return f.Store.Incr(ctx, key, limit, expires)
}

func (f *faulty) Value(ctx context.Context, key string) (int64, error) {
	if f.countersFail(key) {
		return 0, errFault
	}
	return f.Store.Value(ctx, key)
}

func (f *faulty) Admit(ctx context.Context, tenant, id, caller string, now time.Time, l session.Limits, w session.Window) (session.Record, session.Admission, error) {
	if f.faults[tenant] == "counters" {
		return session.Record{}, session.Admission{}, errFault
	}
	return f.Store.Admit(ctx, tenant, id, caller, now, l, w)
}

// countersFail reports whether key is a counter of a tenant whose row
// declares the "counters" fault.
func (f *faulty) countersFail(key string) bool {
	for tenant, fault := range f.faults {
		if fault == "counters" && strings.Contains(key, "#"+tenant+"#") {
			return true
		}
	}
	return false
}

func (f *faulty) Stops(ctx context.Context, tenant string) ([]killswitch.Stop, error) {
	if f.faults[tenant] == "stops" {
		return nil, errFault
	}
	return f.Store.Stops(ctx, tenant)
}

// settingsOf is profile's settings, as the processes read them.
func settingsOf(t *testing.T, profile string) (config.Settings, quota.Tiers) {
	env := profileEnv(profile)
	getenv := func(k string) string { return env[k] }
	s, err := config.FromEnv(getenv)
	must(t, err)
	s.LocalMode = true
	tiers, err := quota.TiersFromEnv(getenv)
	must(t, err)
	return s, tiers
}

// startGateway is the in-process boundary: shared/gateway over the
// embedded store (with the rows' faults), one gateway per profile on one
// store.
func startGateway(t *testing.T, f *matrix.File, up string, w *idp) map[string]target {
	st := &faulty{Store: memstore.New(), faults: map[string]string{}}
	for _, r := range f.Rows {
		if r.Fault != "" {
			st.faults[r.Tenant()] = r.Fault
		}
	}
	seed(t, st, tenants(f), up, w)
	out := map[string]target{}
	for _, p := range profiles {
		s, tiers := settingsOf(t, p)
		gw, err := gateway.New(st, &gateway.Options{Settings: s, Tiers: tiers, HTTP: w.client(t), Logger: slog.New(slog.DiscardHandler)})
		must(t, err)
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		out[p] = &httpTarget{base: srv.URL, client: &http.Client{Timeout: 30 * time.Second}, reader: st}
	}
	return out
}

// motoTurn is held by a DynamoDB boundary (serve-dynamodb, lambda) from
// before its first table is created until its processes have stopped:
// the two take turns on moto_server rather than share it. dynamotest
// passes one request at a time to the one moto_server of the test
// binary, and the processes under test keep the product's store
// deadlines (1 s to an answer's headers, 2 s an operation): a request of
// one boundary queued behind the other's registry writes (each a
// TransactWriteItems that moto_server pays for in proportion to the
// table) passed them on a loaded machine (docs/design/conformance.md,
// "Moto").
var motoTurn sync.Mutex

// emulatedStoreTimeout is the serve-dynamodb processes' --store-timeout:
// each DynamoDB operation's deadline, and half of it each attempt's wait
// for an answer, in place of the product's 2 s and 1 s. moto_server is
// not DynamoDB: its TransactWriteItems copies the whole table, and on a
// loaded two-core machine one of the registry's writes at start, with no
// request queued before it, took 2.6 s (docs/design/conformance.md,
// "Moto"). The matrix checks decisions, not the store's deadlines
// (shared/dynamo's tests do); the request's own deadline is unchanged.
const emulatedStoreTimeout = 10 * time.Second

// takeMotoTurn holds motoTurn until t ends, after the cleanups t
// registers later (they stop the processes) have run.
func takeMotoTurn(t *testing.T) {
	motoTurn.Lock()
	t.Cleanup(motoTurn.Unlock)
}

const adminKey = "matrix-admin-key-0123456789abcdef"

// startServe is the serve boundaries: `aegis serve --config FILE` on the
// embedded store, or with --store dynamodb on moto_server (a fresh pair of
// tables per process), one process per profile. Stops are set through
// the admin API, and the audit is read through it.
func startServe(t *testing.T, f *matrix.File, up string, w *idp, dynamodb bool) map[string]target {
	dir := t.TempDir()
	bin := aegisbin.Path(t)
	if dynamodb {
		takeMotoTurn(t)
	}
	all := tenants(f)
	out := map[string]target{}
	for _, p := range profiles {
		served := ofProfile(all, p)
		cfg := filepath.Join(dir, "aegis-"+p+".yaml")
		must(t, os.WriteFile(cfg, configFile(t, served, up, w), 0o600))
		env := []string{"AEGIS_ADMIN_KEY=" + adminKey, "AEGIS_PARAMS_KEY_FILE=" + filepath.Join(dir, "params-"+p+".key"), "HOME=" + dir, "SSL_CERT_FILE=" + w.cert}
		for k, v := range profileEnv(p) {
			env = append(env, k+"="+v)
		}
		args := []string{"--config", cfg}
		if dynamodb {
			db := dynamotest.Start(t)
			env = append(env, dynamoEnv(db)...)
			args = append(args, "--store", "dynamodb", "--store-timeout", emulatedStoreTimeout.String())
		}
		base, err := runServe(t, bin, env, args)
		must(t, err)
		h := &httpTarget{base: base, client: &http.Client{Timeout: 30 * time.Second}}
		h.adminFn = func(ctx context.Context, tenant string) ([]audit.Record, error) {
			var page admin.AuditPage
			err := adminCall(ctx, base, http.MethodGet, "/admin/v1/tenants/"+tenant+"/audit?limit=1000", &page)
			return page.Records, err
		}
		for _, ts := range served {
			for _, tool := range ts.setup.Stops {
				must(t, adminCall(context.Background(), base, http.MethodPost, "/admin/v1/tenants/"+ts.id+"/servers/"+ts.server+"/tools/"+tool+"/stop", nil))
			}
		}
		out[p] = h
	}
	return out
}

func adminCall(ctx context.Context, base, method, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(`{"reason":"matrix"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if into != nil {
		return json.Unmarshal(b, into)
	}
	return nil
}

// dynamoEnv points a process at db's tables.
func dynamoEnv(db dynamotest.Env) []string {
	return []string{
		"AWS_ENDPOINT_URL_DYNAMODB=" + db.Endpoint,
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=" + os.DevNull, "AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AEGIS_STATE_TABLE=" + db.Tables.State, "AEGIS_AUDIT_TABLE=" + db.Tables.Audit,
	}
}

// runServe starts `aegis serve ARGS` on a free loopback port, waits for
// its banner, and stops it by its pid when the test ends.
func runServe(t *testing.T, bin string, env, args []string) (string, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", addr}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	exited := make(chan struct{})
	ready := make(chan bool, 1)
	var banner bytes.Buffer // stdout up to the banner
	var waitErr error
	go func() {
		sc := bufio.NewScanner(stdout)
		said := false
		for sc.Scan() {
			if !said {
				banner.WriteString(sc.Text() + "\n")
			}
			if !said && strings.HasPrefix(sc.Text(), "admin API") {
				said = true
				ready <- true
			}
		}
		if !said {
			ready <- false
		}
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("aegis serve %s (pid %d) stderr:\n%s", strings.Join(args, " "), cmd.Process.Pid, stderr.String())
		}
	})
	select {
	case ok := <-ready:
		if !ok {
			<-exited
			return "", fmt.Errorf("aegis serve %s exited (%v) before its banner; stdout %q, stderr:\n%s", strings.Join(args, " "), waitErr, banner.String(), stderr.String())
		}
	case <-time.After(60 * time.Second):
		return "", fmt.Errorf("no banner from aegis serve %s in 60 s:\n%s", strings.Join(args, " "), stderr.String())
	}
	return "http://" + addr, nil
}

// lambdaTarget sends requests as API Gateway events to the bootstrap
// under aws-lambda-rie.
type lambdaTarget struct {
	fn        *lambdatest.Function
	templates map[string][]byte // routeKey -> recorded event
	st        *dynamo.Store
	mu        sync.Mutex // the emulator runs one invocation at a time
	seq       int
}

// eventTemplates are the recorded events the Lambda boundary builds its
// requests on, one per route.
var eventTemplates = map[string]string{
	"POST /v1/invoke":    "invoke-allowed.json",
	"POST /mcp":          "tools-list.json",
	"POST /mcp/{server}": "tools-call-allowed.json",
}

// startLambda is the Lambda boundary: the gateway bootstrap under
// aws-lambda-rie on moto_server (one table pair, one function per
// profile), seeded through the DynamoDB store.
func startLambda(t *testing.T, f *matrix.File, up string, w *idp) map[string]target {
	bin := lambdatest.Build(t, "./functions/gateway")
	templates := map[string][]byte{}
	for route, name := range eventTemplates {
		b, err := os.ReadFile(filepath.Join("..", "..", "events", "gateway", name))
		must(t, err)
		var ev events.APIGatewayV2HTTPRequest
		must(t, json.Unmarshal(b, &ev))
		if ev.RouteKey != route {
			t.Fatalf("events/gateway/%s has route %q, want %q", name, ev.RouteKey, route)
		}
		templates[route] = b
	}
	takeMotoTurn(t)
	all := tenants(f)
	out := map[string]target{}
	for _, p := range profiles {
		db := dynamotest.Start(t)
		st := db.Store(t, dynamo.Options{})
		seed(t, st, ofProfile(all, p), up, w)
		env := map[string]string{
			"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_ENDPOINT_URL_DYNAMODB": db.Endpoint,
			"AWS_EC2_METADATA_DISABLED": "true", "AEGIS_STATE_TABLE": db.Tables.State, "AEGIS_AUDIT_TABLE": db.Tables.Audit,
			"FUNCTION_TIMEOUT_SECS": "10", wiring.EnvAllowLoopback: "1", "AEGIS_TRACE": "off", "AEGIS_LOG_LEVEL": "warn",
			"SSL_CERT_FILE": w.cert,
		}
		for k, v := range profileEnv(p) {
			env[k] = v
		}
		fn := lambdatest.Start(t, bin, &lambdatest.Options{FunctionName: "aegis-GatewayFunction", Timeout: 10 * time.Second, Env: env})
		out[p] = &lambdaTarget{fn: fn, templates: templates, st: st}
	}
	return out
}

func (l *lambdaTarget) send(ctx context.Context, r request) (answer, error) {
	route, params := routeOf(r.path)
	// A tenant's path (/t/{tenant}/...) is built on the recorded event of
	// the same route without the tenant.
	tpl, ok := l.templates[strings.Replace(route, "/t/{tenant}", "", 1)]
	if !ok {
		return answer{}, fmt.Errorf("no recorded event for %s", route)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(tpl, &ev); err != nil {
		return answer{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	// The recorded envelope (request context, host, forwarding and trace
	// headers) with the row's path, headers and body.
	hdr := map[string]string{}
	for k, v := range ev.Headers {
		switch k {
		case "host", "user-agent", "x-amzn-trace-id", "x-forwarded-for", "x-forwarded-port", "x-forwarded-proto":
			hdr[k] = v
		}
	}
	for k, vs := range r.header {
		hdr[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	hdr["content-length"] = fmt.Sprint(len(r.body))
	ev.Headers, ev.RawPath, ev.RouteKey, ev.PathParameters = hdr, r.path, route, params
	ev.RequestContext.HTTP.Path, ev.RequestContext.RouteKey = r.path, route
	ev.RequestContext.RequestID = fmt.Sprintf("matrix-%06d", l.seq)
	ev.RequestContext.TimeEpoch = time.Now().UnixMilli()
	ev.Body, ev.IsBase64Encoded = r.body, false
	payload, err := json.Marshal(ev)
	if err != nil {
		return answer{}, err
	}
	out, err := l.fn.InvokeRaw(ctx, payload)
	if err != nil {
		return answer{}, err
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return answer{}, fmt.Errorf("the function's answer is not an API Gateway response: %v: %.300s", err, out)
	}
	a := answer{status: resp.StatusCode, header: http.Header{}, body: []byte(resp.Body)}
	if resp.IsBase64Encoded {
		if a.body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			return answer{}, err
		}
	}
	for k, v := range resp.Headers {
		a.header.Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			a.header.Add(k, v)
		}
	}
	return a, nil
}

// routeOf is API Gateway's route key and path parameters for path.
func routeOf(path string) (string, map[string]string) {
	params := map[string]string{}
	prefix := ""
	if rest, ok := strings.CutPrefix(path, "/t/"); ok {
		tenant, tail, _ := strings.Cut(rest, "/")
		params["tenant"], prefix, path = tenant, "/t/{tenant}", "/"+tail
	}
	if srv, ok := strings.CutPrefix(path, "/mcp/"); ok {
		params["server"] = srv
		path = "/mcp/{server}"
	}
	if len(params) == 0 {
		params = nil
	}
	return "POST " + prefix + path, params
}

func (l *lambdaTarget) records(ctx context.Context, tenant string) ([]audit.Record, error) {
	return queryAll(ctx, l.st, tenant)
}
