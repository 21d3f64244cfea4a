package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// BenchmarkUpstreamCall is a tools/call through /mcp with every check of
// Build on, against the demo upstream (the Go SDK), for profiling the
// forwarding path: go test -run '^$' -bench UpstreamCall -cpuprofile cpu.out
func BenchmarkUpstreamCall(b *testing.B) {
	ctx := context.Background()
	// AEGIS_BENCH_UPSTREAM points at an upstream in another process (e.g.
	// the conformance everything-server), so that a profile holds only the
	// gateway; the default is the in-process demo upstream.
	url, tool := os.Getenv("AEGIS_BENCH_UPSTREAM"), "test_simple_text"
	if url == "" {
		up, err := demo.Start("127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer up.Close()
		url, tool = up.URL, "echo"
	}
	st := memstore.New()
	_ = st.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierEnterprise})
	_ = st.PutServer(ctx, registry.Server{Tenant: "acme", Name: "demo", URL: url})
	key, rec := auth.NewKey("acme", "bench", time.Now())
	_ = st.PutKey(ctx, rec)
	s := config.Defaults()
	s.LocalMode = true
	s.RateLimitPerSession, s.RateLimitPerTool, s.RateLimitPerKey = 1e9, 1e9, 1e9
	s.BillingEnabled, s.BillingEnforce = true, true
	gw, err := gateway.New(st, &gateway.Options{
		Settings: s,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	post := func(sess, body string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sess != "" {
			req.Header.Set("Mcp-Session-Id", sess)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(out)
	}
	resp, _ := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
	sess := resp.Header.Get("Mcp-Session-Id")
	var id atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body := `{"jsonrpc":"2.0","id":` + strconv.FormatInt(id.Add(1)+10, 10) + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"message":"hi"}}}`
			if _, out := post(sess, body); !strings.Contains(out, `"result"`) {
				b.Fatal(out)
			}
		}
	})
}
