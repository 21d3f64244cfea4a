package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/testclock"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/credentials"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// This file is the harness of the upstream failure-contract tests
// (upstream_*_test.go): a raw MCP upstream on a loopback port whose
// tools/call behaviour each test chooses, and a gateway built with
// gateway.New over the embedded store with a capturing audit writer.

// rawUpstream is a minimal MCP server: it answers server/discover as a
// legacy server (JSON-RPC error), initialize, notifications and tools/list
// correctly, and hands tools/call to onCall.
type rawUpstream struct {
	URL   string
	srv   *http.Server
	ln    net.Listener
	calls atomic.Int64
	// initDelay (nanoseconds) holds every initialize answer back that long.
	initDelay atomic.Int64
	// down makes every request, of any method, a 502; requests counts them all.
	down     atomic.Bool
	requests atomic.Int64
	mu       sync.Mutex
	onCall   func(w http.ResponseWriter, r *http.Request, body []byte)
	seen     []http.Header // headers of each tools/call
	bodies   [][]byte
}

// requestOf reads the id of a JSON-RPC request a test upstream received.
func requestOf(body []byte) (msg struct {
	ID json.RawMessage `json:"id"`
}) {
	_ = json.Unmarshal(body, &msg)
	return msg
}

func startRaw(t *testing.T, onCall func(w http.ResponseWriter, r *http.Request, body []byte)) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln, onCall: onCall, URL: "http://" + ln.Addr().String() + "/mcp"}
	u.srv = &http.Server{Handler: http.HandlerFunc(u.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = u.srv.Serve(ln) }()
	t.Cleanup(u.Close)
	return u
}

func (u *rawUpstream) Close() { _ = u.srv.Close() }

func (u *rawUpstream) lastCall() (http.Header, []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		return nil, nil
	}
	return u.seen[len(u.seen)-1], u.bodies[len(u.bodies)-1]
}

func (u *rawUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.requests.Add(1)
	if u.down.Load() {
		http.Error(w, "down", http.StatusBadGateway)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(body, &msg)
	answer := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+result+`}`)
	}
	switch msg.Method {
	case "server/discover":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"error":{"code":-32601,"message":"Method not found"}}`)
	case "initialize":
		if d := time.Duration(u.initDelay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Mcp-Session-Id", "raw-session")
		answer(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`)
	case "notifications/initialized":
		w.WriteHeader(http.StatusAccepted)
	case "tools/list":
		answer(`{"tools":[{"name":"work","inputSchema":{"type":"object"}},{"name":"other","inputSchema":{"type":"object"}}]}`)
	case "tools/call":
		u.calls.Add(1)
		u.mu.Lock()
		u.seen = append(u.seen, r.Header.Clone())
		u.bodies = append(u.bodies, body)
		f := u.onCall
		u.mu.Unlock()
		f(w, r, body)
	default:
		w.WriteHeader(http.StatusBadRequest)
	}
}

// okCall answers tools/call with a text result.
func okCall(text string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, body []byte) {
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &msg)
		t, _ := json.Marshal(text)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{"content":[{"type":"text","text":`+string(t)+`}]}}`)
	}
}

// captureAudit is an audit.Writer that keeps records for the test.
type captureAudit struct {
	mu   sync.Mutex
	recs []audit.Record
	ch   chan struct{}
}

func newCaptureAudit() *captureAudit { return &captureAudit{ch: make(chan struct{}, 1024)} }

func (a *captureAudit) Write(_ context.Context, r audit.Record) error {
	a.mu.Lock()
	a.recs = append(a.recs, r)
	a.mu.Unlock()
	a.ch <- struct{}{}
	return nil
}

// await returns the record of correlation id corr (written after the
// response: the gateway audits once the answer is out).
func (a *captureAudit) await(t *testing.T, corr string) audit.Record {
	t.Helper()
	deadline := time.After(3 * time.Second)
	for {
		a.mu.Lock()
		for _, r := range a.recs {
			if r.CorrelationID == corr {
				a.mu.Unlock()
				return r
			}
		}
		a.mu.Unlock()
		select {
		case <-a.ch:
		case <-deadline:
			t.Fatalf("no audit record for correlation id %s", corr)
		}
	}
}

// upEnv is one gateway (or two, sharing a store) in front of one upstream.
type upEnv struct {
	Store *memstore.Store
	Clock *testclock.Clock
	Audit *captureAudit
	Key   string
	Dials *atomic.Int64 // connections the gateway's upstream transport opened
	Trans *http.Transport
	GW    *gateway.Gateway
}

type upOpts struct {
	settings func(*config.Settings)
	cred     *registry.Credential
	env      map[string]string
	store    *memstore.Store // shared with another gateway
	clock    *testclock.Clock
}

const testTenant, testServer = "acme", "tools"

func newUpEnv(t *testing.T, url string, o upOpts) *upEnv {
	t.Helper()
	ctx := context.Background()
	e := &upEnv{Store: o.store, Clock: o.clock, Audit: newCaptureAudit(), Dials: &atomic.Int64{}}
	if e.Clock == nil {
		e.Clock = testclock.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	}
	if e.Store == nil {
		e.Store = memstore.New()
		if err := e.Store.PutTenant(ctx, registry.Tenant{ID: testTenant, Tier: registry.TierEnterprise}); err != nil {
			t.Fatal(err)
		}
		if err := e.Store.PutServer(ctx, registry.Server{Tenant: testTenant, Name: testServer, URL: url, Credential: o.cred}); err != nil {
			t.Fatal(err)
		}
	}
	secret, k := auth.NewKey(testTenant, "agent", e.Clock.Now())
	if err := e.Store.PutKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	e.Key = secret
	s := config.Defaults()
	s.LocalMode = true
	s.UpstreamTimeout = time.Second
	if o.settings != nil {
		o.settings(&s)
	}
	hc := gateway.NewHTTPClient(true)
	tr := hc.Transport.(*http.Transport)
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		e.Dials.Add(1)
		return dial(ctx, network, addr)
	}
	var creds upstream.Credentials
	if o.env != nil {
		creds = credentials.New(credentials.Options{Local: true, Getenv: func(k string) string { return o.env[k] }})
	}
	gw, err := gateway.New(auditingStore{e.Store, e.Audit}, &gateway.Options{
		Settings:    s,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:         e.Clock.Now,
		HTTP:        hc,
		Credentials: creds,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.GW = gw
	e.Trans = tr
	return e
}

// upReply is a decoded gateway answer.
type upReply struct {
	Status int
	Corr   string
	Raw    string
	Result json.RawMessage
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
}

// invoke sends a tools/call to /v1/invoke through the gateway's handler.
func (e *upEnv) invoke(t *testing.T, tool, args string, hdr ...string) upReply {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
	req, _ := http.NewRequest(http.MethodPost, "/v1/invoke", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.Key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := &recorder{h: http.Header{}}
	e.GW.ServeHTTP(rec, req)
	r := upReply{Status: rec.status, Corr: rec.h.Get("X-Correlation-ID"), Raw: rec.body.String()}
	var frame struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.body.Bytes(), &frame); err != nil {
		t.Fatalf("gateway answer is not JSON: %q", rec.body.String())
	}
	r.Result, r.Error = frame.Result, frame.Error
	return r
}

func (r upReply) code() int {
	if r.Error == nil {
		return 0
	}
	return r.Error.Code
}

// recorder is a minimal concurrent-safe http.ResponseWriter.
type recorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// auditingStore is the embedded store with its audit writes captured.
type auditingStore struct {
	*memstore.Store
	audit *captureAudit
}

func (s auditingStore) Write(ctx context.Context, r audit.Record) error { return s.audit.Write(ctx, r) }
