package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/memstore"
)

// TestWebhookNeedsASigningSecret: the admin API accepts a tenant's
// webhook_url only with a webhook_secret_ref, as the config file does and
// as the notifier checks again at send time (one rule,
// approval.ValidateWebhook; issue 16, item 8). The examples are the ones
// config's TestWebhookNeedsASigningSecret and approval's
// TestUnsignedWebhookIsNotSent use.
func TestWebhookNeedsASigningSecret(t *testing.T) {
	key := admin.NewKey()
	h, err := admin.New(memstore.New(), &admin.Options{AdminKey: key})
	must(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	for i, tc := range []struct {
		name       string
		body       map[string]string
		field, msg string // field "": created
	}{
		{"signed", map[string]string{"webhook_url": "https://hooks.example.com/aegis", "webhook_secret_ref": "env:ACME_WEBHOOK_SECRET"}, "", ""},
		{"unsigned", map[string]string{"webhook_url": "https://hooks.example.com/aegis"}, "webhook_secret_ref", "required with webhook_url (webhooks are signed)"},
		{"empty secret reference", map[string]string{"webhook_url": "https://hooks.example.com/aegis", "webhook_secret_ref": ""}, "webhook_secret_ref", "required with webhook_url"},
		{"not a reference", map[string]string{"webhook_url": "https://hooks.example.com/aegis", "webhook_secret_ref": "plain-secret"}, "webhook_secret_ref", ""},
		{"metadata address", map[string]string{"webhook_url": "https://169.254.169.254/aegis", "webhook_secret_ref": "env:ACME_WEBHOOK_SECRET"}, "webhook_url", ""},
		{"a secret reference alone", map[string]string{"webhook_secret_ref": "env:ACME_WEBHOOK_SECRET"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]string{"id": "acme" + string(rune('a'+i)), "tier": "growth"}
			for k, v := range tc.body {
				body[k] = v
			}
			b, _ := json.Marshal(body)
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/admin/v1/tenants", strings.NewReader(string(b)))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			defer resp.Body.Close()
			var eb admin.ErrorBody
			_ = json.NewDecoder(resp.Body).Decode(&eb)
			switch {
			case tc.field == "" && resp.StatusCode != http.StatusCreated:
				t.Fatalf("%s = %d %+v; want 201", b, resp.StatusCode, eb.Error)
			case tc.field != "" && (resp.StatusCode != http.StatusBadRequest || eb.Error.Field != tc.field || !strings.Contains(eb.Error.Message, tc.msg)):
				t.Fatalf("%s = %d %+v; want 400 on %s saying %q", b, resp.StatusCode, eb.Error, tc.field, tc.msg)
			}
		})
	}
}
