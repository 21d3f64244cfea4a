package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/testclock"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/registry"
)

// env is a gateway over the embedded store with two tenants:
// "acme" (server mock-primary → a demo upstream) and "globex" (server
// globex-tools → another demo upstream).
type env struct {
	URL      string
	Store    *memstore.Store
	Clock    *testclock.Clock
	KeyA     string
	KeyB     string
	UpA, UpB *demo.Server
	Log      *bytes.Buffer
	Settings config.Settings
	Gateway  *gateway.Gateway
	logMu    sync.Mutex
}

type envOpt func(*config.Settings, *memstore.Store)

// testTiers are the monthly quotas of the gateway under test: acme (free)
// may make 3 calls a month, so quota tests reach the edge quickly.
var testTiers = quota.Tiers{"free": 3, "growth": 1000, "enterprise": 0}

func newEnv(t *testing.T, opts ...envOpt) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{Store: memstore.New(), Clock: testclock.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)), Log: &bytes.Buffer{}}
	var err error
	if e.UpA, err = demo.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.UpA.Close() })
	if e.UpB, err = demo.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.UpB.Close() })
	s := config.Defaults()
	s.LocalMode = true
	s.UpstreamTimeout = 5 * time.Second
	must(t, e.Store.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierFree}))
	must(t, e.Store.PutTenant(ctx, registry.Tenant{ID: "globex", Tier: registry.TierGrowth}))
	must(t, e.Store.PutServer(ctx, registry.Server{Tenant: "acme", Name: "mock-primary", URL: e.UpA.URL}))
	must(t, e.Store.PutServer(ctx, registry.Server{Tenant: "globex", Name: "globex-tools", URL: e.UpB.URL}))
	var ka, kb registry.Key
	e.KeyA, ka = auth.NewKey("acme", "acme-agent", e.Clock.Now())
	e.KeyB, kb = auth.NewKey("globex", "globex-agent", e.Clock.Now())
	must(t, e.Store.PutKey(ctx, ka))
	must(t, e.Store.PutKey(ctx, kb))
	for _, o := range opts {
		o(&s, e.Store)
	}
	e.Settings = s
	log := slog.New(slog.NewJSONHandler(lockedWriter{e}, nil))
	e.Gateway, err = gateway.New(e.Store, &gateway.Options{
		Settings: s,
		Tiers:    testTiers,
		Logger:   log,
		Now:      e.Clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.Gateway)
	t.Cleanup(srv.Close)
	e.URL = srv.URL
	return e
}

type lockedWriter struct{ e *env }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.e.logMu.Lock()
	defer w.e.logMu.Unlock()
	return w.e.Log.Write(p)
}

func (e *env) logs() string {
	e.logMu.Lock()
	defer e.logMu.Unlock()
	return e.Log.String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// reply is a decoded gateway answer.
type reply struct {
	Status int
	Header http.Header
	Raw    []byte
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// post sends body to path with key and extra headers.
func (e *env) post(t *testing.T, path, key, body string, hdr ...string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.URL+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) reply {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: b}
	if len(b) > 0 && b[0] == '{' {
		_ = json.Unmarshal(b, &r)
	}
	return r
}

func (r reply) code() int {
	if r.Error == nil {
		return 0
	}
	return r.Error.Code
}

// word is error.data.aegis.code.
func (r reply) word() string {
	if r.Error == nil {
		return ""
	}
	var d struct {
		Aegis struct {
			Layer string `json:"layer"`
			Code  string `json:"code"`
		} `json:"aegis"`
	}
	_ = json.Unmarshal(r.Error.Data, &d)
	return d.Aegis.Code
}

func call(id, tool, args string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}
