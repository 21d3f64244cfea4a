package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/breaker"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
)

// holdUpstream is an MCP server whose hold tool answers only once release
// is closed; entered receives one value per call that reached it.
type holdUpstream struct {
	URL     string
	entered chan struct{}
	release chan struct{}
	done    atomic.Int64 // hold calls answered
}

func startHoldUpstream(t *testing.T) *holdUpstream {
	t.Helper()
	h := &holdUpstream{entered: make(chan struct{}, 64), release: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: "hold-upstream", Version: "1.0.0"}, nil)
	type noIn struct{}
	mcp.AddTool(s, &mcp.Tool{Name: "hold", Description: "Answers when the test releases it."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
			h.entered <- struct{}{}
			select {
			case <-h.release:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			h.done.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	h.URL = srv.URL + "/mcp"
	return h
}

// TestServeDrainsOnSIGTERM is issue 11 item 8: with 8 calls in flight,
// SIGTERM makes `aegis serve` refuse new connections, finish the 8 calls
// (each client gets its answer), write their 8 audit records, release
// their 8 concurrency leases, and exit 0.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	const inFlight = 8
	e := dynamotest.Start(t)
	up := startHoldUpstream(t)
	cfg, key := configWithKey(t, up.URL)
	env := append(dynamoEnv(e), fmt.Sprintf("UPSTREAM_MAX_CONCURRENT=%d", inFlight), "UPSTREAM_TIMEOUT_SECS=20")
	p := startServe(t, env, "--config", cfg, "--store", "dynamodb")
	if !p.running() {
		t.Fatalf("aegis serve exited: %v\n%s", p.err, p.stderr.String())
	}
	start := time.Now().UTC()

	type answer struct {
		status int
		a      rpcAnswer
		err    error
	}
	answers := make(chan answer, inFlight)
	// The calls start one after another, each once the one before it has
	// reached the upstream: a cold gateway sending all eight at once makes
	// some eighty store requests in a burst, which a loaded moto_server
	// answered past the store's deadlines (a -32603 from a fail-closed
	// read). Held one by one, the eight are still all in flight together
	// when the signal comes.
	for i := range inFlight {
		go func() {
			// Its own connection per call: none is idle when the signal
			// comes, so each one is drained, not closed.
			c := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{}}
			st, a, err := invoke(c, p.base, key, "hold", map[string]any{})
			answers <- answer{st, a, err}
		}()
		select {
		case <-up.entered:
		case a := <-answers:
			t.Fatalf("call answered before the upstream released it: %d %v %s", a.status, a.err, a.a.raw)
		case <-time.After(time.Minute):
			t.Fatalf("%d of %d calls reached the upstream", i, inFlight)
		}
	}
	st := e.Store(t, dynamo.Options{})
	ctx := context.Background()
	leaseKey := breaker.Key("acme", "up")
	// The 8 calls hold the 8 leases: the limit is reached.
	if ok, err := st.AcquireLease(ctx, leaseKey, "probe-before", inFlight, time.Now(), time.Now().Add(time.Minute)); err != nil || ok {
		t.Fatalf("a lease was free while %d calls were in flight (ok %v, err %v)", inFlight, ok, err)
	}

	p.signal(t, syscall.SIGTERM)
	// New connections are refused once the signal is handled.
	const dials = 500
	refused := 0
	for i := range dials {
		c, err := net.DialTimeout("tcp", p.base[len("http://"):], time.Second)
		if err != nil {
			refused = i + 1
			break
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
	if refused == 0 {
		t.Fatalf("still accepting connections after %d dials since SIGTERM", dials)
	}
	if !p.running() {
		t.Fatalf("aegis serve exited with %d calls in flight: %v\n%s", inFlight, p.err, p.stderr.String())
	}
	select {
	case a := <-answers:
		t.Fatalf("a call was answered before the upstream released it: %d %v %s", a.status, a.err, a.a.raw)
	default:
	}

	close(up.release)
	for i := range inFlight {
		a := <-answers
		if a.err != nil || a.status != 200 || !a.a.ok() || a.a.text() != "released" {
			t.Fatalf("call %d of %d: status %d, err %v, answer %s", i+1, inFlight, a.status, a.err, a.a.raw)
		}
	}
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0; stderr:\n%s", code, p.stderr.String())
	}
	if n := up.done.Load(); n != inFlight {
		t.Fatalf("upstream answered %d calls, want %d", n, inFlight)
	}

	// Every call has its audit record.
	recs, _, err := st.Query(ctx, audit.Query{Tenant: "acme", From: start.Add(-time.Minute), To: time.Now().Add(time.Minute), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	allowed := 0
	for _, r := range recs {
		if r.Method == "tools/call" && r.Tool == "hold" && r.Outcome == audit.OutcomeAllowed {
			allowed++
		}
	}
	if allowed != inFlight {
		t.Fatalf("%d allowed hold records in the audit, want %d (of %d records)", allowed, inFlight, len(recs))
	}
	// No lease is left: all 8 can be taken again.
	now := time.Now()
	for i := range inFlight {
		ok, err := st.AcquireLease(ctx, leaseKey, fmt.Sprintf("probe-%d", i), inFlight, now, now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("lease %d of %d refused after shutdown: %d leases were left behind", i+1, inFlight, inFlight-i)
		}
	}
	if ok, _ := st.AcquireLease(ctx, leaseKey, "probe-over", inFlight, now, now.Add(time.Minute)); ok {
		t.Fatal("a lease past the limit was granted: the probe does not measure what it claims")
	}
}
