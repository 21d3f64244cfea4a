package approval

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aegis-gw/aegis/shared/registry"
)

// TestWebhookDialerRefusesLoopbackOutsideLocalMode: a tenant's webhook URL
// is dialed through the same address check as upstreams, so a name that
// resolves to loopback (or link-local metadata) is refused on AWS.
func TestWebhookDialerRefusesLoopbackOutsideLocalMode(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	defer srv.Close()
	e := Event{Type: EventHeld, Approval: Approval{ID: "a1", Tool: "t", Server: "s"}, Tenant: registry.Tenant{ID: "acme", WebhookURL: srv.URL}}
	if err := (&Webhook{}).send(context.Background(), e); err == nil || hits.Load() != 0 {
		t.Fatalf("loopback webhook sent outside local mode: err %v, hits %d", err, hits.Load())
	}
	e.Tenant.WebhookURL = "http://169.254.169.254/latest/meta-data/"
	if err := (&Webhook{Local: true}).send(context.Background(), e); err == nil {
		t.Fatal("metadata address dialed")
	}
	e.Tenant.WebhookURL = srv.URL
	if err := (&Webhook{Local: true}).send(context.Background(), e); err != nil || hits.Load() != 1 {
		t.Fatalf("local mode: err %v, hits %d", err, hits.Load())
	}
}
