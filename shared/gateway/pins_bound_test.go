package gateway_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/testclock"
	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/content"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/wiring"
)

// TestPinsAtTheBound: on DynamoDB, wired as the Lambda function is (the
// tenant's view cache), with a tenant bounded at one pin: listing pins the
// first clean tool and holds the second (never listed unpinned, a call
// refused with -32051 held-for-review naming the limit); an operator's pin
// is refused with 409 saying why; once the operator unpins the first and
// pins the second, the gateway meets the change at its next refresh
// (the pins' tally moved on: the pins are read again) and the call runs.
func TestPinsAtTheBound(t *testing.T) {
	ctx := context.Background()
	st := dynamotest.Start(t).Store(t, dynamo.Options{PinBounds: registry.PinBounds{Count: 1, Bytes: 512 << 10}})
	clock := testclock.New(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	up := startThreatUpstream(t)
	must(t, st.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierGrowth}))
	must(t, st.PutServer(ctx, registry.Server{Tenant: "acme", Name: "tools", URL: up.URL}))
	key, k := auth.NewKey("acme", "acme-agent", clock.Now())
	must(t, st.PutKey(ctx, k))
	s := config.Defaults()
	s.LocalMode = true
	s.UpstreamTimeout = 5 * time.Second
	g, err := gateway.New(st, &gateway.Options{Settings: s, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: clock.Now, RegistryCacheTTL: wiring.RegistryCacheTTL})
	must(t, err)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	adminKey := admin.NewKey()
	h, err := admin.New(st, &admin.Options{AdminKey: adminKey, Catalog: g.Catalog(), LocalMode: true, Now: clock.Now})
	must(t, err)
	asrv := httptest.NewServer(h)
	t.Cleanup(asrv.Close)
	adminURL := asrv.URL + "/admin/v1/tenants/acme"

	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "pins-bound", Version: "1"}, nil)
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/tools", HTTPClient: bearerClient(key)}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	must(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	listed := toolNames(t, cs)
	if len(listed) != 1 || (listed[0] != "echo" && listed[0] != "page") {
		t.Fatalf("tools/list %v, want one of echo and page (the other held at the bound, add poisoned)", listed)
	}
	pinned, held := listed[0], "echo"
	if pinned == "echo" {
		held = "page"
	}
	_, err = callTool(cs, held)
	d := refusalData(t, err, -32051)
	if d["tool"] != held || d["rule"] != content.RuleHeld || !strings.Contains(d["reason"].(string), "limit") {
		t.Fatalf("call of %s at the bound: %v, want held-for-review naming the limit", held, d)
	}
	if _, err := callTool(cs, pinned); err != nil {
		t.Fatalf("call of the pinned %s: %v", pinned, err)
	}

	// The operator's pin at the bound: 409, saying why.
	req, _ := http.NewRequest(http.MethodPost, adminURL+"/servers/tools/tools/"+held+"/pin", strings.NewReader(`{"by":"ops"}`))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(b), "pins are at their limit") {
		t.Fatalf("pin at the bound: %d %s; want 409 naming the limit", resp.StatusCode, b)
	}

	var ans admin.PinAnswer
	adminDo(t, http.MethodDelete, adminURL+"/servers/tools/tools/"+pinned+"/pin", adminKey, "", &ans)
	adminDo(t, http.MethodPost, adminURL+"/servers/tools/tools/"+held+"/pin", adminKey, `{"by":"ops"}`, &ans)
	if !ans.Pinned || ans.Pin.Tool != held {
		t.Fatalf("pin %s after making room: %+v", held, ans)
	}
	clock.Advance(content.DefaultPinRefresh)
	// It runs now (the threat upstream's page answers with a planted
	// injection: -32050 on its result, after the call ran).
	_, err = callTool(cs, held)
	var we *jsonrpc.Error
	if err != nil && (!errors.As(err, &we) || we.Code != -32050 || held != "page") {
		t.Fatalf("call of %s once pinned by the operator, after the pins' refresh: %v", held, err)
	}
	if got := toolNames(t, cs); !slices.Contains(got, held) {
		t.Fatalf("tools/list %v, want %s listed once pinned", got, held)
	}
}
