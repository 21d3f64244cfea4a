package gateway_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/credentials"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/telemetry"
)

// syncBuf is a bytes.Buffer safe for concurrent writers.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const upstreamSecret = "up-secret-7f3a9c2e51d04b8e"

// telEnv is a gateway with tracing (in-memory exporter), EMF metrics and
// the telemetry logger, over the embedded store, in front of a raw
// upstream that echoes the brokered credential it receives (in a result,
// and in the body of an HTTP 500 for tool "other").
type telEnv struct {
	gw    *gateway.Gateway
	store *memstore.Store
	key   string
	spans *tracetest.InMemoryExporter
	logs  *syncBuf
	emf   *syncBuf

	session string
}

func newTelEnv(t *testing.T, logs *syncBuf, perTool int) *telEnv {
	t.Helper()
	ctx := context.Background()
	up := startRaw(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		cred := r.Header.Get("X-Upstream-Key")
		if strings.Contains(string(body), `"name":"other"`) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "internal error, key was "+cred)
			return
		}
		okCall("echo "+cred)(w, r, body)
	})
	e := &telEnv{store: memstore.New(), spans: tracetest.NewInMemoryExporter(), logs: logs, emf: &syncBuf{}}
	must(t, e.store.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierEnterprise}))
	must(t, e.store.PutServer(ctx, registry.Server{Tenant: "acme", Name: "tools", URL: up.URL,
		Credential: &registry.Credential{Header: "X-Upstream-Key", Ref: "env:UP_KEY"}}))
	var k registry.Key
	e.key, k = auth.NewKey("acme", "agent", time.Now())
	must(t, e.store.PutKey(ctx, k))
	s := config.Defaults()
	s.LocalMode = true
	s.UpstreamTimeout = 5 * time.Second
	s.RateLimitPerTool = perTool
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(e.spans), sdktrace.WithIDGenerator(telemetry.IDGenerator{}))
	var err error
	e.gw, err = gateway.New(e.store, &gateway.Options{
		Settings:    s,
		Logger:      telemetry.NewLogger(logs, slog.LevelDebug),
		Credentials: credentials.New(credentials.Options{Local: true, Getenv: func(k string) string { return map[string]string{"UP_KEY": upstreamSecret}[k] }}),
		Tracer:      telemetry.NewTracer(tp, false, nil),
		Metrics:     telemetry.NewEMF(e.emf),
	})
	must(t, err)
	return e
}

// call sends a tools/call for tool with key, returning the answer and its
// correlation id. Calls with e.key share one session (the rate limit is
// per session and tool).
func (e *telEnv) call(t *testing.T, key, tool string) (string, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"q":"hello"}}}`
	req, _ := http.NewRequest(http.MethodPost, "/v1/invoke", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	if key == e.key && e.session != "" {
		req.Header.Set("X-Session-ID", e.session)
	}
	rec := &recorder{h: http.Header{}}
	e.gw.ServeHTTP(rec, req)
	if key == e.key && e.session == "" {
		e.session = rec.h.Get("X-Session-ID")
	}
	return rec.body.String(), rec.h.Get("X-Correlation-ID")
}

// TestSpansForAllowedAndRefusedCalls: an allowed call makes the request
// span, one span per check and the upstream span; a refused one (a tool
// the tenant does not have) stops at check.route, which carries the code.
func TestSpansForAllowedAndRefusedCalls(t *testing.T) {
	e := newTelEnv(t, &syncBuf{}, 0)
	ans, corr := e.call(t, e.key, "work")
	if !strings.Contains(ans, `"result"`) {
		t.Fatalf("allowed call answered %s", ans)
	}
	allowed := e.spans.GetSpans().Snapshots()
	e.spans.Reset()
	ans, corr2 := e.call(t, e.key, "nope")
	if !strings.Contains(ans, `-32601`) {
		t.Fatalf("refused call answered %s", ans)
	}
	refused := e.spans.GetSpans().Snapshots()

	check := func(name string, spans []sdktrace.ReadOnlySpan, corr string, want []string) map[string]sdktrace.ReadOnlySpan {
		t.Helper()
		by := map[string]sdktrace.ReadOnlySpan{}
		var names []string
		for _, s := range spans {
			names = append(names, s.Name())
			by[s.Name()] = s
		}
		slices.Sort(names)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Fatalf("%s call: spans %v, want %v", name, names, want)
		}
		root := by["POST /v1/invoke"]
		for _, s := range spans {
			if s.Name() != root.Name() && s.Parent().SpanID() != root.SpanContext().SpanID() {
				t.Errorf("%s call: span %s is not a child of the request span", name, s.Name())
			}
		}
		if v := attr(root, telemetry.AttrCorrelationID); v != corr || corr == "" {
			t.Errorf("%s call: request span correlation id %q, header %q", name, v, corr)
		}
		return by
	}
	by := check("allowed", allowed, corr, []string{"POST /v1/invoke", "check.session", "check.params", "check.ratelimit", "check.route", "check.killswitch", "check.policy", "check.content", "check.approval", "check.breaker", "upstream.call", "check.results"})
	if up := by["upstream.call"]; attr(up, telemetry.AttrServer) != "tools" || attr(up, telemetry.AttrTool) != "work" ||
		attr(up, telemetry.AttrOutcome) != "answered" || attr(up, telemetry.AttrHTTPStatus) != "200" {
		t.Errorf("upstream span attributes %v", up.Attributes())
	}
	if attr(by["POST /v1/invoke"], telemetry.AttrOutcome) != "allowed" || attr(by["POST /v1/invoke"], telemetry.AttrTenant) != "acme" {
		t.Errorf("request span attributes %v", by["POST /v1/invoke"].Attributes())
	}
	by = check("refused", refused, corr2, []string{"POST /v1/invoke", "check.session", "check.params", "check.ratelimit", "check.route"})
	if r := by["check.route"]; attr(r, telemetry.AttrCode) != "-32601" || attr(r, telemetry.AttrWord) != "METHOD_NOT_FOUND" && attr(r, telemetry.AttrWord) == "" {
		t.Errorf("route span attributes %v", r.Attributes())
	}
	// One EMF line per call; the refused one counts a refusal by code.
	lines := strings.Split(strings.TrimSpace(e.emf.String()), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], `"Refusals"`) || !strings.Contains(lines[1], `"Code":"-32601"`) || !strings.Contains(lines[1], `"Refusals":1`) {
		t.Fatalf("EMF lines:\n%s", e.emf.String())
	}
}

// attr is the value of attribute k of s as text, "" when absent.
func attr(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.String()
		}
	}
	return ""
}

// TestNoSecretInLogs runs allowed and refused calls with every secret in
// play: the caller's API key (Authorization), a wrong key, the brokered
// upstream credential (which the upstream echoes in a result and in an
// HTTP 500 body), the admin key and a tenant key the admin API minted.
// None may appear in any log line, in any encoding the scrubber knows; and
// every line the gateway logs for a request carries its correlation id.
func TestNoSecretInLogs(t *testing.T) {
	gwLogs, adminLogs := &syncBuf{}, &syncBuf{}
	e := newTelEnv(t, gwLogs, 3)
	adminKey := admin.NewKey()
	adm, err := admin.New(e.store, &admin.Options{AdminKey: adminKey,
		LocalMode: true, Logger: telemetry.NewLogger(adminLogs, slog.LevelDebug)})
	must(t, err)
	adminDo := func(method, path, key, body string) (int, string) {
		req, _ := http.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		rec := &recorder{h: http.Header{}}
		adm.ServeHTTP(rec, req)
		return rec.status, rec.body.String()
	}
	if st, _ := adminDo(http.MethodGet, "/admin/v1/tenants", adminKey+"x", ""); st != http.StatusUnauthorized {
		t.Fatalf("wrong admin key: status %d", st)
	}
	st, body := adminDo(http.MethodPost, "/admin/v1/tenants/acme/keys", adminKey, `{"caller":"minted"}`)
	if st/100 != 2 {
		t.Fatalf("create key: %d %s", st, body)
	}
	var minted struct {
		Key string `json:"key"`
	}
	_ = json.Unmarshal([]byte(body), &minted)
	if !strings.HasPrefix(minted.Key, "aegis_") && minted.Key == "" {
		t.Fatalf("no key in %s", body)
	}

	var corrs []string
	for _, c := range []struct{ key, tool, want string }{
		{e.key, "work", `"result"`},           // allowed (sessionless: counts in the key's window and the new session's); the result echoes the credential (scrubbed)
		{e.key, "nope", "-32601"},             // refused at routing
		{e.key, "other", "-32000"},            // upstream 500 quoting the credential
		{e.key, "work", `"result"`},           // second call of the tool in the session
		{minted.Key, "work", `"result"`},      // the admin-minted key
		{e.key, "work", `"result"`},           // third call in the session
		{e.key, "work", "-32004"},             // fourth call of the tool in the session: rate limited (RATE_LIMIT_PER_TOOL=3)
		{e.key + "x", "work", "unauthorized"}, // wrong key
	} {
		ans, corr := e.call(t, c.key, c.tool)
		if !strings.Contains(ans, c.want) {
			t.Fatalf("%s with key %.8s…: answered %s, want %s", c.tool, c.key, ans, c.want)
		}
		if strings.Contains(ans, upstreamSecret) {
			t.Fatalf("credential reached the client: %s", ans)
		}
		corrs = append(corrs, corr)
	}

	logs := gwLogs.String() + adminLogs.String() + e.emf.String()
	if gwLogs.String() == "" {
		t.Fatal("the gateway logged nothing; the test would prove nothing")
	}
	for name, secret := range map[string]string{
		"API key": e.key, "minted API key": minted.Key, "admin key": adminKey, "brokered credential": upstreamSecret,
	} {
		for _, form := range []string{secret, url.QueryEscape(secret), base64.StdEncoding.EncodeToString([]byte(secret)), secret[len(secret)-12:]} {
			if strings.Contains(logs, form) {
				t.Errorf("the %s appears in the logs (as %q)", name, form)
			}
		}
	}
	// Every gateway line about a call carries correlation_id, and it is one
	// of the ids the client was given.
	for _, l := range strings.Split(strings.TrimSpace(gwLogs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		id, _ := m["correlation_id"].(string)
		if !slices.Contains(corrs, id) {
			t.Errorf("log line without a request's correlation id: %s", l)
		}
	}
	if testing.Verbose() {
		t.Log(gwLogs.String())
	}
	t.Logf("%d gateway log lines, %d admin log lines", strings.Count(gwLogs.String(), "\n"), strings.Count(adminLogs.String(), "\n"))
}
