package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// streamWatch is an MCP client's HTTP transport (bearerRT's) that reports
// its GET streams: one value on opened when a GET is answered 200, one on
// ended when that answer's body ends.
type streamWatch struct {
	bearerRT
	opened, ended chan struct{}
}

func newStreamWatch(key string) *streamWatch {
	return &streamWatch{bearerRT: bearerRT{key: key}, opened: make(chan struct{}, 16), ended: make(chan struct{}, 16)}
}

func (w *streamWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := w.bearerRT.RoundTrip(r)
	if err != nil || r.Method != http.MethodGet || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	w.opened <- struct{}{}
	resp.Body = &watchedBody{ReadCloser: resp.Body, ended: w.ended}
	return resp, nil
}

// watchedBody sends on ended once, when a read first fails (EOF included).
type watchedBody struct {
	io.ReadCloser
	once  sync.Once
	ended chan<- struct{}
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(func() { b.ended <- struct{}{} })
	}
	return n, err
}

// connectHolding connects a Go SDK client (MCP 2025-11-25, which holds a
// GET stream) to p as key's caller, waits until its GET stream is open,
// and starts one hold call on the session, waiting until the upstream has
// it. The call's result arrives on the returned channel.
func connectHolding(t *testing.T, p *serveProc, up *holdUpstream, key string) (*streamWatch, <-chan error) {
	t.Helper()
	watch := newStreamWatch(key)
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "stop-test", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.base + "/mcp", HTTPClient: &http.Client{Transport: watch}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	select {
	case <-watch.opened:
	case <-time.After(time.Minute):
		t.Fatal("the client's GET stream did not open")
	}
	called := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{}})
		if err == nil && (res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "released") {
			err = fmt.Errorf("hold answered %+v", res)
		}
		called <- err
	}()
	select {
	case <-up.entered:
	case err := <-called:
		t.Fatalf("hold answered before the upstream had it: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the hold call did not reach the upstream")
	}
	return watch, called
}

// TestServeStopsWithClientConnected is issue 33's stop: with a Go SDK
// client connected (its GET stream open and idle) and one of its calls in
// flight, SIGTERM ends the GET stream while the call is still held, the
// call then gets its answer once the upstream gives it, and the process
// exits 0 right after, far inside its drain budget (UPSTREAM_TIMEOUT_SECS
// 60: the idle stream does not hold the stop).
func TestServeStopsWithClientConnected(t *testing.T) {
	up := startHoldUpstream(t)
	cfg, key := configWithKey(t, up.URL)
	p := startServe(t, []string{"UPSTREAM_TIMEOUT_SECS=60"}, "--config", cfg)
	if !p.running() {
		t.Fatalf("aegis serve exited: %v\n%s", p.err, p.stderr.String())
	}
	watch, called := connectHolding(t, p, up, key)

	p.signal(t, syscall.SIGTERM)
	select {
	case <-watch.ended:
	case err := <-called:
		t.Fatalf("the call ended (%v) before the idle GET stream was closed", err)
	case <-time.After(time.Minute):
		t.Fatalf("the GET stream is still open a minute after SIGTERM; stderr:\n%s", p.stderr.String())
	}
	// The stream is closed; the call is still in flight and holds the stop.
	select {
	case err := <-called:
		t.Fatalf("the call ended (%v) before the upstream released it", err)
	default:
	}
	if !p.running() {
		t.Fatalf("aegis serve exited with a call in flight: %v\n%s", p.err, p.stderr.String())
	}
	close(up.release)
	if err := <-called; err != nil {
		t.Fatalf("the call in flight at SIGTERM: %v", err)
	}
	// Well inside the 60 s budget: nothing else holds the stop.
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0; stderr:\n%s", code, p.stderr.String())
	}
}

// TestServeSecondSignal: a second signal while a call is in flight stops
// `aegis serve` at once (exit 1, before the upstream answers), with a line
// that says the calls in flight were cut.
func TestServeSecondSignal(t *testing.T) {
	up := startHoldUpstream(t)
	cfg, key := configWithKey(t, up.URL)
	p := startServe(t, []string{"UPSTREAM_TIMEOUT_SECS=60"}, "--config", cfg)
	if !p.running() {
		t.Fatalf("aegis serve exited: %v\n%s", p.err, p.stderr.String())
	}
	watch, called := connectHolding(t, p, up, key)
	p.signal(t, syscall.SIGINT)
	select {
	case <-watch.ended: // the first signal was handled
	case <-time.After(time.Minute):
		t.Fatalf("the GET stream is still open a minute after SIGINT; stderr:\n%s", p.stderr.String())
	}
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, 20*time.Second); code != 1 {
		t.Fatalf("exit code %d after a second signal, want 1; stderr:\n%s", code, p.stderr.String())
	}
	if up.done.Load() != 0 {
		t.Fatal("the upstream answered: the test does not show the exit came first")
	}
	if s := p.stderr.String(); !strings.Contains(s, "aegis serve: second signal (interrupt): stopped at once; calls still in flight were cut") {
		t.Fatalf("stderr does not say the second signal cut the calls:\n%s", s)
	}
	if err := <-called; err == nil {
		t.Fatal("the cut call was answered")
	}
	close(up.release)
}
