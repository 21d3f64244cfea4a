package approval

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
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
	secrets := secretMap{"env:HOOK": "k"}
	e := Event{Type: EventHeld, Approval: Approval{ID: "a1", Tool: "t", Server: "s"}, Tenant: registry.Tenant{ID: "acme", WebhookURL: srv.URL, WebhookSecretRef: "env:HOOK"}}
	if err := (&Webhook{Secrets: secrets}).send(context.Background(), e); err == nil || hits.Load() != 0 {
		t.Fatalf("loopback webhook sent outside local mode: err %v, hits %d", err, hits.Load())
	}
	// A name that resolves to loopback passes registration in no mode
	// (ValidateURL refuses localhost by name), so the dialer is what a DNS
	// name that rebinds to loopback meets.
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	req, _ := http.NewRequest(http.MethodPost, "http://localhost:"+port+"/", nil)
	if _, err := webhookClient(false).Do(req); err == nil || !strings.Contains(err.Error(), "loopback") || hits.Load() != 0 {
		t.Fatalf("the webhook dialer reached loopback outside local mode: err %v, hits %d", err, hits.Load())
	}
	e.Tenant.WebhookURL = "http://169.254.169.254/latest/meta-data/"
	if err := (&Webhook{Local: true, Secrets: secrets}).send(context.Background(), e); err == nil {
		t.Fatal("metadata address dialed")
	}
	e.Tenant.WebhookURL = srv.URL
	if err := (&Webhook{Local: true, Secrets: secrets}).send(context.Background(), e); err != nil || hits.Load() != 1 {
		t.Fatalf("local mode: err %v, hits %d", err, hits.Load())
	}
}

// proxyChildEnv marks the re-executed test binary that sends with the
// proxy variables set (net/http reads them once per process).
const proxyChildEnv = "AEGIS_TEST_PROXY_CHILD"

// TestWebhookClientIgnoresTheEnvironmentProxy: with HTTP_PROXY and
// HTTPS_PROXY pointing at a listener, the webhook client still dials the
// target itself, so the dial check refuses a metadata address and the
// listener gets no connection (issue 16, item 7). Local mode, so that a
// proxy on loopback could be dialed at all.
func TestWebhookClientIgnoresTheEnvironmentProxy(t *testing.T) {
	if os.Getenv(proxyChildEnv) != "" {
		c := webhookClient(true)
		for _, u := range []string{"http://169.254.169.254/hook", "https://169.254.169.254/hook", "http://[64:ff9b::a9fe:a9fe]/hook"} {
			resp, err := c.Post(u, "application/json", strings.NewReader("{}"))
			if err == nil {
				resp.Body.Close()
				t.Errorf("%s: HTTP %d; want refused by the dial check", u, resp.StatusCode)
			} else if !strings.Contains(err.Error(), "link-local") {
				t.Errorf("%s: %v; want refused by the dial check as link-local", u, err)
			}
		}
		return
	}
	if tr, ok := webhookClient(false).Transport.(*http.Transport); !ok || tr.Proxy != nil {
		t.Errorf("webhookClient: a transport with a Proxy function; want none")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
				}
			}()
		}
	}()
	p := "http://" + ln.Addr().String()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWebhookClientIgnoresTheEnvironmentProxy$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), proxyChildEnv+"=1", "HTTP_PROXY="+p, "HTTPS_PROXY="+p, "http_proxy="+p, "https_proxy="+p, "NO_PROXY=", "no_proxy=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("webhooks behind the proxy: %v\n%s", err, out)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the environment's proxy got %d connections; want none", n)
	}
}
