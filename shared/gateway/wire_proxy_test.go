package gateway_test

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aegis-gw/aegis/shared/gateway"
)

// proxyChildEnv marks the re-executed test binary that makes the upstream
// calls with the proxy variables set. A child process, because
// net/http reads HTTP_PROXY and HTTPS_PROXY once per process: set in this
// one after any other test has made a request, they would be ignored
// whatever the client does.
const proxyChildEnv = "AEGIS_TEST_PROXY_CHILD"

// TestUpstreamClientIgnoresTheEnvironmentProxy: with HTTP_PROXY and
// HTTPS_PROXY pointing at a listener, an upstream call to a refused
// address is refused by the dial check and the listener gets no
// connection. A client that honoured the variables handed the call to the
// proxy, and the dial check saw only the proxy's address (issue 16, item
// 7). Local mode, so that a proxy on loopback could be dialed at all: only
// the absence of proxy support keeps the call from it.
func TestUpstreamClientIgnoresTheEnvironmentProxy(t *testing.T) {
	if os.Getenv(proxyChildEnv) != "" {
		upstreamCallsBehindProxy(t)
		return
	}
	for _, local := range []bool{false, true} {
		if tr, ok := gateway.NewHTTPClient(local).Transport.(*http.Transport); !ok || tr.Proxy != nil {
			t.Errorf("NewHTTPClient(%v): transport %T with a Proxy function; want none", local, gateway.NewHTTPClient(local).Transport)
		}
	}
	addr, conns := recordingProxy(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestUpstreamClientIgnoresTheEnvironmentProxy$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), proxyChildEnv+"=1",
		"HTTP_PROXY=http://"+addr, "HTTPS_PROXY=http://"+addr, "http_proxy=http://"+addr, "https_proxy=http://"+addr,
		"NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("upstream calls behind the proxy: %v\n%s", err, out)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the environment's proxy got %d connections; want none", n)
	}
}

// upstreamCallsBehindProxy runs in the child: every call to a refused
// address fails with the dial check's reason.
func upstreamCallsBehindProxy(t *testing.T) {
	client := gateway.NewHTTPClient(true)
	for _, u := range []string{
		"http://169.254.169.254/latest/meta-data/iam/security-credentials/",
		"https://169.254.169.254/",
		"http://169.254.170.2/v2/credentials",
		"http://[::ffff:169.254.169.254]/",
		"http://[64:ff9b::a9fe:a9fe]/",
	} {
		resp, err := client.Get(u)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: HTTP %d; want refused by the dial check", u, resp.StatusCode)
			continue
		}
		if !strings.Contains(err.Error(), "link-local") {
			t.Errorf("%s: %v; want refused by the dial check as link-local", u, err)
		}
	}
}

// recordingProxy is a listener that counts its connections and answers
// every request (a GET for a URL, a CONNECT) with 200, as a permissive
// proxy would.
func recordingProxy(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
				}
			}()
		}
	}()
	return ln.Addr().String(), &n
}
