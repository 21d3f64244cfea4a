package approval

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/registry"
)

// TestWebhookFailureLogsNoURLSecret: a Slack-style webhook URL carries its
// secret in the path (others in the query or user info). When delivery
// fails, the log names the webhook's scheme and host and the cause, never
// the rest of the URL.
func TestWebhookFailureLogsNoURLSecret(t *testing.T) {
	// A server that accepts and hangs up at once.
	hangUp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hangUp.Close()
	go func() {
		for {
			c, err := hangUp.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// A port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()
	// A server that answers 500.
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer failing.Close()

	const secretPath = "/services/T0AEGIS/B0AEGIS/pathS3cretT0ken"
	const secrets = "pathS3cretT0ken querYS3cret userS3cret"
	for _, c := range []struct {
		name, url, host, cause string
	}{
		{"connection closed", "http://" + hangUp.Addr().String() + secretPath + "?token=querYS3cret", hangUp.Addr().String(), "Post: "}, // EOF or reset
		{"connection refused", "http://" + refused + secretPath + "?token=querYS3cret", refused, "connection refused"},
		{"HTTP 500", failing.URL + secretPath + "?token=querYS3cret", strings.TrimPrefix(failing.URL, "http://"), "HTTP 500"},
		// Refused before sending (ValidateWebhook), and logged as scrubbed.
		{"user info", "http://bob:userS3cret@" + refused + secretPath, refused, "credentials in the URL are not allowed"},
		{"unparsable URL", "http://127.0.0.1:1" + secretPath + "\x7f", "[unparsable URL]", "is not an absolute URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := &Webhook{Local: true, Timeout: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(&buf, nil)),
				Secrets: secretMap{"env:ACME_WEBHOOK_SECRET": "s3cret"}}
			w.Notify(context.Background(), Event{
				Type:     EventHeld,
				Approval: Approval{ID: "a1", Tenant: "acme", Tool: "t", Server: "s"},
				Tenant:   registry.Tenant{ID: "acme", WebhookURL: c.url, WebhookSecretRef: "env:ACME_WEBHOOK_SECRET"},
			})
			out := buf.String()
			if out == "" {
				t.Fatal("nothing logged")
			}
			for _, s := range append(strings.Fields(secrets), secretPath, "/services/") {
				if strings.Contains(out, s) {
					t.Errorf("log carries %q:\n%s", s, out)
				}
			}
			for _, s := range []string{c.host, c.cause} {
				if !strings.Contains(out, s) {
					t.Errorf("log does not say %q:\n%s", s, out)
				}
			}
		})
	}
}

// TestScrubKeepsTheCause: a scrubbed error still unwraps to its cause.
func TestScrubKeepsTheCause(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	const raw = "https://hooks.example.com/services/T/B/S3cret"
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, raw, nil)
	_, err := http.DefaultClient.Do(req)
	if err == nil || !strings.Contains(err.Error(), "S3cret") {
		t.Fatalf("precondition: the client's error quotes the URL: %v", err)
	}
	got := scrub(err, raw)
	if strings.Contains(got.Error(), "S3cret") || !errors.Is(got, context.Canceled) {
		t.Errorf("scrub = %q (is Canceled: %v)", got, errors.Is(got, context.Canceled))
	}
}
