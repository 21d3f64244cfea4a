package approval

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/registry"
)

// secretMap resolves references from a map.
type secretMap map[string]string

func (m secretMap) Resolve(_ context.Context, ref string) (string, error) {
	if v, ok := m[ref]; ok {
		return v, nil
	}
	return "", errors.New("no such secret")
}

// recordingTransport answers 204 to every request and keeps them, so a
// test sees what would have left the process.
type recordingTransport struct {
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	rt.mu.Lock()
	rt.reqs, rt.body = append(rt.reqs, r), append(rt.body, b)
	rt.mu.Unlock()
	return &http.Response{StatusCode: http.StatusNoContent, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// TestUnsignedWebhookIsNotSent: a tenant whose webhook_url has no
// webhook_secret_ref (registered before the rule, or by hand in the
// store) gets no approval.held: nothing is sent, and the refusal is
// logged at ERROR without the URL's path. The same webhook with a secret
// reference is sent, signed. The examples are the ones config's and
// admin's TestWebhookNeedsASigningSecret use (issue 16, item 8).
func TestUnsignedWebhookIsNotSent(t *testing.T) {
	const hookURL = "https://hooks.example.com/aegis"
	secrets := secretMap{"env:ACME_WEBHOOK_SECRET": "s3cret"}
	ev := func(ref string) Event {
		return Event{Type: EventHeld, Approval: Approval{ID: "a1", Tenant: "acme", Tool: "transfer", Server: "payments"},
			Tenant: registry.Tenant{ID: "acme", WebhookURL: hookURL, WebhookSecretRef: ref}}
	}
	for _, tc := range []struct {
		name    string
		secrets Resolver
		ref     string
		sent    bool
	}{
		{"unsigned", secrets, "", false},
		{"unsigned, no resolver", nil, "", false},
		{"a reference but no resolver", nil, "env:ACME_WEBHOOK_SECRET", false},
		{"signed", secrets, "env:ACME_WEBHOOK_SECRET", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &recordingTransport{}
			var logs bytes.Buffer
			now := time.Unix(1_800_000_000, 0)
			w := &Webhook{HTTP: &http.Client{Transport: rt}, Secrets: tc.secrets, Now: func() time.Time { return now },
				Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			w.Notify(context.Background(), ev(tc.ref))
			if !tc.sent {
				if len(rt.reqs) != 0 {
					t.Fatalf("sent %d requests, signature header %q; want none", len(rt.reqs), rt.reqs[0].Header.Get(SignatureHeader))
				}
				if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "webhook_secret_ref") && !strings.Contains(logs.String(), "resolver") {
					t.Errorf("want the refusal logged at ERROR naming the cause; log:\n%s", logs.String())
				}
				if strings.Contains(logs.String(), "/aegis") {
					t.Errorf("log carries the webhook's path:\n%s", logs.String())
				}
				return
			}
			if len(rt.reqs) != 1 {
				t.Fatalf("sent %d requests, want 1; log:\n%s", len(rt.reqs), logs.String())
			}
			if err := Verify([]byte("s3cret"), rt.reqs[0].Header.Get(SignatureHeader), rt.body[0], now, time.Minute); err != nil {
				t.Errorf("signature: %v", err)
			}
		})
	}
}

// TestValidateWebhook is the rule itself, on the examples config's and
// admin's TestWebhookNeedsASigningSecret send through their front doors.
func TestValidateWebhook(t *testing.T) {
	for _, tc := range []struct {
		url, ref string
		local    bool
		field    string // "": accepted
	}{
		{"https://hooks.example.com/aegis", "env:ACME_WEBHOOK_SECRET", false, ""},
		{"https://hooks.example.com/aegis", "", false, "webhook_secret_ref"},
		{"https://169.254.169.254/aegis", "env:ACME_WEBHOOK_SECRET", false, "webhook_url"},
		{"http://hooks.example.com/aegis", "env:ACME_WEBHOOK_SECRET", false, "webhook_url"},
		{"http://127.0.0.1:8080/aegis", "env:ACME_WEBHOOK_SECRET", true, ""},
		{"http://127.0.0.1:8080/aegis", "", true, "webhook_secret_ref"},
		{"", "env:ACME_WEBHOOK_SECRET", false, ""},
		{"", "", false, ""},
	} {
		err := ValidateWebhook(tc.url, tc.ref, tc.local)
		var we *WebhookError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("ValidateWebhook(%q, %q, %v) = %v; want accepted", tc.url, tc.ref, tc.local, err)
		case tc.field != "" && (!errors.As(err, &we) || we.Field != tc.field):
			t.Errorf("ValidateWebhook(%q, %q, %v) = %v; want a *WebhookError on %s", tc.url, tc.ref, tc.local, err, tc.field)
		}
	}
}
