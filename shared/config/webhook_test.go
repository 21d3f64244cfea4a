package config

import (
	"strings"
	"testing"
)

// TestWebhookNeedsASigningSecret: a tenant's webhook_url is accepted only
// with a webhook_secret_ref, as by the admin API and at send time (one
// rule, approval.ValidateWebhook; issue 16, item 8). The examples are the
// ones admin's TestWebhookNeedsASigningSecret and approval's
// TestUnsignedWebhookIsNotSent use.
func TestWebhookNeedsASigningSecret(t *testing.T) {
	const base = `tenants:
  - id: acme
    tier: growth
`
	for _, tc := range []struct {
		name, lines, field string // field "": accepted
	}{
		{"signed", "    webhook_url: https://hooks.example.com/aegis\n    webhook_secret_ref: env:ACME_WEBHOOK_SECRET\n", ""},
		{"unsigned", "    webhook_url: https://hooks.example.com/aegis\n", "tenants[0].webhook_secret_ref: required with webhook_url (webhooks are signed)"},
		{"empty secret reference", "    webhook_url: https://hooks.example.com/aegis\n    webhook_secret_ref: \"\"\n", "tenants[0].webhook_secret_ref: required with webhook_url"},
		{"not a reference", "    webhook_url: https://hooks.example.com/aegis\n    webhook_secret_ref: plain-secret\n", "tenants[0].webhook_secret_ref"},
		{"metadata address", "    webhook_url: https://169.254.169.254/aegis\n    webhook_secret_ref: env:ACME_WEBHOOK_SECRET\n", "tenants[0].webhook_url"},
		{"a secret reference alone", "    webhook_secret_ref: env:ACME_WEBHOOK_SECRET\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFile([]byte(base+tc.lines), env(nil), false)
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field)):
				t.Fatalf("err %v, want one containing %q", err, tc.field)
			}
		})
	}
}
