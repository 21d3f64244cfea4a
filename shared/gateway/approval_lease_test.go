package gateway_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// The lease of an approval's use is the longest a call can take with the
// gateway's settings ((UPSTREAM_MAX_RETRIES+3) × UPSTREAM_TIMEOUT_SECS +
// 30 s), so a slow live call never shows as unsettled.
func TestApprovalLeaseFollowsUpstreamTimeout(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, func(s *config.Settings, _ *memstore.Store) { s.UpstreamTimeout = 2 * time.Minute })
	must(t, e.Store.PutServer(ctx, registry.Server{Tenant: "acme", Name: "mock-primary", URL: e.UpA.URL,
		Tools: map[string]registry.ToolSettings{"transfer": {RequiresApproval: true}}}))
	body := call("1", "transfer", `{"to":"acct-1","amount":5}`)
	r := e.post(t, "/v1/invoke", e.KeyA, body)
	var d struct {
		ID string `json:"approval_id"`
	}
	if r.code() != -32061 || json.Unmarshal(r.Error.Data, &d) != nil || d.ID == "" {
		t.Fatalf("first call: %s; want -32061 pending", r.Raw)
	}
	if _, err := e.Store.DecideApproval(ctx, d.ID, approval.Decision{Status: approval.Approved, By: "alice"}, e.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if r := e.post(t, "/v1/invoke", e.KeyA, body); r.code() != 0 {
		t.Fatalf("approved call: %s", r.Raw)
	}
	a, err := e.Store.GetApproval(ctx, d.ID)
	if err != nil || a.Use == nil {
		t.Fatalf("%+v, %v; want its use", a, err)
	}
	if got, want := a.Use.LeaseUntil.Sub(a.Use.Started), time.Duration(e.Settings.UpstreamMaxRetries+3)*2*time.Minute+30*time.Second; got != want {
		t.Fatalf("lease %v; want %v", got, want)
	}
}
