package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/registry"
)

// TestDynamoDBUnreachable: the gateway wired as on Lambda (every store on
// DynamoDB, registry cache) keeps answering with well-formed frames when
// DynamoDB goes away: rate limit, quota and sessions let calls through,
// the kill switch and the registry keep their last known state, approvals
// answer "unavailable" and never run the call.
func TestDynamoDBUnreachable(t *testing.T) {
	ctx := context.Background()
	env := dynamotest.Start(t)
	proxy := dynamotest.NewFaultProxy(t, env.Endpoint)
	env.Endpoint = proxy.URL
	// One attempt per request: an outage costs the test no retry backoff.
	st := env.Store(t, dynamo.Options{}, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	up, err := demo.Start("127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { up.Close() })

	now := time.Now()
	must(t, st.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierFree}))
	must(t, st.PutServer(ctx, registry.Server{Tenant: "acme", Name: "crm", URL: up.URL,
		Tools: map[string]registry.ToolSettings{"transfer": {RequiresApproval: true}}}))
	key, rec := auth.NewKey("acme", "agent", now)
	must(t, st.PutKey(ctx, rec))
	must(t, st.PutStop(ctx, killswitch.Stop{Tenant: "acme", Server: "crm", Tool: "fail", By: "ops", At: now}))

	s := config.Defaults()
	s.LocalMode = true
	s.BillingEnabled, s.BillingEnforce = true, true
	gw, err := gateway.New(st, &gateway.Options{
		Settings:         s,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		RegistryCacheTTL: time.Minute,
	})
	must(t, err)
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	post := func(body string, hdr ...string) reply {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/invoke", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return do(t, req)
	}

	// Warm up while DynamoDB is there: registry, catalog, kill switches.
	warm := post(call("1", "echo", `{"message":"warm"}`))
	if warm.code() != 0 {
		t.Fatalf("warm-up: %s", warm.Raw)
	}
	sid := warm.Header.Get("X-Session-ID")
	if r := post(call("2", "fail", `{}`), "X-Session-ID", sid); r.code() != -32062 {
		t.Fatalf("stopped tool before the outage: %s", r.Raw)
	}
	ranBefore := up.Calls("echo")

	proxy.Down.Store(true)
	for _, tc := range []struct {
		name     string
		body     string
		hdr      []string
		wantCode int
		check    func(t *testing.T, r reply)
	}{
		{"allowed call in a known session", call("10", "echo", `{"message":"during"}`), []string{"X-Session-ID", sid}, 0, nil},
		{"allowed call, new session", call("11", "echo", `{"message":"new"}`), nil, 0, func(t *testing.T, r reply) {
			if r.Header.Get("X-Session-ID") == "" {
				t.Fatal("no session id minted")
			}
		}},
		{"stopped tool stays stopped", call("12", "fail", `{}`), []string{"X-Session-ID", sid}, -32062, nil},
		{"approval store down: unavailable", call("13", "transfer", `{"to":"x","amount":1}`), []string{"X-Session-ID", sid}, -32061, func(t *testing.T, r reply) {
			var d map[string]any
			_ = json.Unmarshal(r.Error.Data, &d)
			if d["status"] != "unavailable" || d["approval_id"] != nil {
				t.Fatalf("want status unavailable without an id: %s", r.Raw)
			}
		}},
		{"unknown tool", call("14", "nope", `{}`), nil, -32601, nil},
		{"tools/list from the catalog", `{"jsonrpc":"2.0","id":15,"method":"tools/list"}`, nil, 0, func(t *testing.T, r reply) {
			if !strings.Contains(string(r.Result), `"echo"`) || strings.Contains(string(r.Result), `"fail"`) {
				t.Fatalf("list during the outage: %s", r.Result)
			}
		}},
		{"parse error", `{oops`, nil, -32700, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := post(tc.body, tc.hdr...)
			if !json.Valid(r.Raw) || (r.code() == 0 && r.Result == nil) {
				t.Fatalf("not a well-formed frame: %d %q", r.Status, r.Raw)
			}
			if r.code() != tc.wantCode {
				t.Fatalf("code %d, want %d: %s", r.code(), tc.wantCode, r.Raw)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
	if got := up.Calls("echo") - ranBefore; got != 2 {
		t.Fatalf("upstream ran %d echo calls during the outage, want 2", got)
	}
	if up.Calls("transfer") != 0 {
		t.Fatal("a call needing approval ran while the approval store was down")
	}
}
