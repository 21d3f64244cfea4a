package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// TestConnectionsAreReused: answers read from an SSE stream leave the
// connection reusable, so calls do not pay a TCP handshake each.
func TestConnectionsAreReused(t *testing.T) {
	c, srv, sess, dials := dialCounting(t)
	ctx := context.Background()
	before := dials.Load()
	for i := range 20 {
		resp, _, err := c.Call(ctx, &upstream.Exchange{Server: srv, Session: sess, ID: json.RawMessage(fmt.Sprint(i + 10)),
			Method: "tools/call", Params: json.RawMessage(`{"name":"echo","arguments":{"message":"x"}}`)})
		if err != nil || resp.Error != nil {
			t.Fatalf("call %d: %v %s", i, err, resp.Error)
		}
	}
	if n := dials.Load() - before; n > 2 {
		t.Fatalf("20 sequential calls opened %d connections; want them to reuse the pool (at most 2: a call may start before the last one's stream is drained)", n)
	}
}

// TestConnectionsAreReusedWhenTheCallerEnds: the gateway cancels a call's
// context as soon as it has answered its client, while the rest of the
// upstream's event stream may still be on its way. That must not cost the
// connection: it once cost a new connection (and a reset one) every 27
// calls or so under load.
func TestConnectionsAreReusedWhenTheCallerEnds(t *testing.T) {
	c, srv, sess, dials := dialCounting(t)
	before := dials.Load()
	for i := range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		resp, _, err := c.Call(ctx, &upstream.Exchange{Server: srv, Session: sess, ID: json.RawMessage(fmt.Sprint(i + 10)),
			Method: "tools/call", Params: json.RawMessage(`{"name":"echo","arguments":{"message":"x"}}`)})
		cancel() // the caller is done with it at once, as the gateway is
		if err != nil || resp.Error != nil {
			t.Fatalf("call %d: %v %s", i, err, resp.Error)
		}
	}
	if n := dials.Load() - before; n > 2 {
		t.Fatalf("20 sequential calls, each cancelled once answered, opened %d connections; want the pool reused (at most 2)", n)
	}
}

// dialCounting is a client on a transport that counts its dials, with a
// session open on an SDK server.
func dialCounting(t *testing.T) (*upstream.Client, *registry.Server, upstream.Session, *atomic.Int64) {
	t.Helper()
	dials := &atomic.Int64{}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 4,
	}
	c := &upstream.Client{HTTP: &http.Client{Transport: tr}, Timeout: 5 * time.Second}
	srv := &registry.Server{Tenant: "t", Name: "s", URL: sdkServer(t, false, nil)}
	sess, err := c.Initialize(context.Background(), srv)
	if err != nil {
		t.Fatal(err)
	}
	return c, srv, sess, dials
}
