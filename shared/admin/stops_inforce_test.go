package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/testclock"
	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// A stop's answer says when it is in force on every instance: at once
// with no refresh period (the embedded store), else after it.
func TestStopAnswerInForce(t *testing.T) {
	clock := testclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		refresh time.Duration
		by      time.Time
		secs    float64
	}{
		{0, clock.Now(), 0},
		{2 * time.Second, clock.Now().Add(2 * time.Second), 2},
	} {
		m := memstore.New()
		must(t, m.PutTenant(context.Background(), registry.Tenant{ID: "acme", Tier: registry.TierFree}))
		must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "billing", URL: "http://127.0.0.1:9/mcp"}))
		key := admin.NewKey()
		h, err := admin.New(m, &admin.Options{AdminKey: key, KillSwitchRefresh: tc.refresh, Now: clock.Now})
		must(t, err)
		for _, verb := range []string{"stop", "resume"} {
			req := httptest.NewRequest(http.MethodPost, "/admin/v1/tenants/acme/servers/billing/"+verb, strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+key)
			rr := httptest.NewRecorder()
			h.ServeHTTP(rr, req)
			var a admin.StopAnswer
			if rr.Code != 200 || json.Unmarshal(rr.Body.Bytes(), &a) != nil {
				t.Fatalf("%s: %d %s", verb, rr.Code, rr.Body.String())
			}
			if !a.InForceBy.Equal(tc.by) || a.InForceAfterSecs != tc.secs || a.Stopped != (verb == "stop") {
				t.Fatalf("refresh %s, %s: %+v; want in force by %s (after %gs)", tc.refresh, verb, a, tc.by, tc.secs)
			}
		}
	}
}
