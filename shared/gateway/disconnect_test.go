package gateway_test

// A client that leaves (issue "Faults and state", item 7): once its call
// was sent, the upstream exchange runs to its end within its budget, and
// the audit record and the idempotency ledger get the real outcome, never
// "could not connect"; before it was sent, nothing is sent.

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/breaker"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/gateway"
)

// watched serves h on a loopback server; left receives one value for each
// request whose client left before h was done with it. When left says
// so, every context derived from the request's has ended too: context.Cause
// waits for the cancellation to reach them.
func watched(t *testing.T, h http.Handler) (url string, left <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var once sync.Once
		gone := func() {
			_ = context.Cause(r.Context()) // takes the lock its cancellation of children holds
			once.Do(func() { ch <- struct{}{} })
		}
		done := make(chan struct{})
		go func() {
			select {
			case <-r.Context().Done():
				select {
				case <-done: // h has returned: seen below, or a normal end
				default: // the client left while h works on
					gone()
				}
			case <-done:
			}
		}()
		h.ServeHTTP(w, r)
		if r.Context().Err() != nil { // the client left, and h has returned since
			gone()
		}
		close(done)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ch
}

// leavingCall starts a tools/call of work that the client abandons when
// cancel is called; the returned channel gets Do's error.
func leavingCall(t *testing.T, url, key, corr, args string, hdr ...string) (cancel func(), errc <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"work","arguments":` + args + `}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/invoke", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("traceparent", "00-"+corr+"-00f067aa0ba902b7-01") // the correlation id is its trace-id
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	ch := make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		ch <- err
	}()
	return cancel, ch
}

func notCouldNotConnect(t *testing.T, rec audit.Record) {
	t.Helper()
	if rec.Code == -32000 || strings.Contains(rec.Detail, "could not connect") {
		t.Fatalf("audit record of a call that was sent says it could not connect: %+v", rec)
	}
}

// TestClientLeavesAfterSend: the client leaves after the upstream got the
// call; the upstream then answers. The upstream's request is never
// aborted, the audit record says allowed, and a retry with the same
// Idempotency-Key gets the upstream's answer from the ledger: the upstream
// ran the call exactly once.
func TestClientLeavesAfterSend(t *testing.T) {
	received := make(chan struct{}, 1)
	release := make(chan struct{})
	var aborted atomic.Int64
	u := startRaw(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		received <- struct{}{}
		<-release
		if r.Context().Err() != nil {
			aborted.Add(1) // the gateway gave up on the exchange
		}
		okCall("finished after the client left")(w, r, body)
	})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	e := newUpEnv(t, u.URL, upOpts{})
	sent := &sentContexts{}
	gw := gatewayOver(t, e, auditingStore{e.Store, e.Audit}, upSettings(time.Minute), func(o *gateway.Options) {
		o.HTTP = gateway.NewHTTPClient(true)
		sent.next, o.HTTP.Transport = o.HTTP.Transport, sent
	})
	url, left := watched(t, gw)

	const corr = "4bf92f3577b34da6a3ce929d0e0e4736"
	cancel, errc := leavingCall(t, url, e.Key, corr, `{"n":1}`, "Idempotency-Key", "pay-1")
	<-received
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the client got an answer before it left")
	}
	<-left // the gateway's request context has ended: the client is gone
	if err := sent.last().Err(); err != nil {
		t.Fatalf("the gateway aborted its upstream request when its client left: %v", err)
	}
	once.Do(func() { close(release) })

	rec := e.Audit.await(t, corr)
	notCouldNotConnect(t, rec)
	if rec.Outcome != audit.OutcomeAllowed || rec.Code != 0 {
		t.Fatalf("audit record: outcome %q code %d detail %q; want allowed, 0 (the upstream answered)", rec.Outcome, rec.Code, rec.Detail)
	}
	if n := aborted.Load(); n != 0 {
		t.Fatalf("the gateway aborted %d upstream exchange(s) when its client left", n)
	}

	r := e.invokeOn(t, url, `{"n":1}`, "Idempotency-Key", "pay-1")
	if r.code() != 0 || !strings.Contains(string(r.Result), "finished after the client left") {
		t.Fatalf("retry with the same key: %s; want the upstream's answer from the ledger", r.Raw)
	}
	if n := u.calls.Load(); n != 1 {
		t.Fatalf("upstream ran %d tools/call, want exactly 1", n)
	}
}

// TestClientLeavesDeadlinePasses: the client leaves after the send and the
// upstream does not answer before the request's deadline (here the store
// margin is tiny, so the deadline comes before the upstream budget ends):
// the outcome is indeterminate (-32064), never -32000 "could not connect".
func TestClientLeavesDeadlinePasses(t *testing.T) {
	received := make(chan struct{}, 1)
	u := startRaw(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		received <- struct{}{}
		<-r.Context().Done() // never answers; the gateway gives up
	})
	e := newUpEnv(t, u.URL, upOpts{})
	gw := gatewayOver(t, e, auditingStore{e.Store, e.Audit}, upSettings(300*time.Millisecond), func(o *gateway.Options) {
		o.StoreMargin = time.Nanosecond
	})
	url, _ := watched(t, gw)

	const corr = "5bf92f3577b34da6a3ce929d0e0e4737"
	cancel, errc := leavingCall(t, url, e.Key, corr, `{"n":2}`, "Idempotency-Key", "pay-2")
	<-received
	cancel()
	<-errc

	rec := e.Audit.await(t, corr)
	notCouldNotConnect(t, rec)
	if rec.Outcome != audit.OutcomeIndeterminate || rec.Code != -32064 {
		t.Fatalf("audit record: outcome %q code %d; want indeterminate -32064", rec.Outcome, rec.Code)
	}
	if n := u.calls.Load(); n != 1 {
		t.Fatalf("upstream got %d tools/call, want 1", n)
	}
}

// gatewayOver builds a gateway over b with e's clock and settings s; tune
// adjusts its options.
func gatewayOver(t *testing.T, e *upEnv, b backend.Backend, s config.Settings, tune func(*gateway.Options)) *gateway.Gateway {
	t.Helper()
	o := &gateway.Options{Settings: s, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: e.Clock.Now}
	if tune != nil {
		tune(o)
	}
	gw, err := gateway.New(b, o)
	must(t, err)
	return gw
}

// invokeOn sends a tools/call of work to the gateway at url.
func (e *upEnv) invokeOn(t *testing.T, url, args string, hdr ...string) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/invoke", strings.NewReader(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"work","arguments":`+args+`}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.Key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return do(t, req)
}

// sentContexts is the gateway's upstream transport with the context of
// every tools/call it sends (those carry an Idempotency-Key) kept.
type sentContexts struct {
	next http.RoundTripper
	mu   sync.Mutex
	ctxs []context.Context
}

func (s *sentContexts) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Idempotency-Key") != "" {
		s.mu.Lock()
		s.ctxs = append(s.ctxs, r.Context())
		s.mu.Unlock()
	}
	return s.next.RoundTrip(r)
}

func (s *sentContexts) last() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctxs[len(s.ctxs)-1]
}

// upSettings are the harness's settings with upstream timeout d.
func upSettings(d time.Duration) config.Settings {
	s := config.Defaults()
	s.LocalMode = true
	s.UpstreamTimeout = d
	return s
}

// stallingStore holds every circuit read until the call's context ends,
// and says when one is held: a store that never answers, for a client that
// leaves before its call was sent.
type stallingStore struct {
	auditingStore
	held chan struct{}
}

func (s stallingStore) Circuit(ctx context.Context, key string) (breaker.Circuit, error) {
	s.held <- struct{}{}
	<-ctx.Done()
	return breaker.Circuit{}, ctx.Err()
}

// TestClientLeavesBeforeSend: the client leaves while the checks wait for
// the store. The stages decide as declared (the breaker fails open), and
// the call, allowed, is not sent: nothing runs upstream after its client
// left, and the record says why, never "could not connect".
func TestClientLeavesBeforeSend(t *testing.T) {
	u := startRaw(t, okCall("ran"))
	e := newUpEnv(t, u.URL, upOpts{})
	st := stallingStore{auditingStore{e.Store, e.Audit}, make(chan struct{}, 1)}
	url, _ := watched(t, gatewayOver(t, e, st, upSettings(10*time.Second), nil))

	const corr = "6bf92f3577b34da6a3ce929d0e0e4738"
	cancel, errc := leavingCall(t, url, e.Key, corr, `{"n":3}`, "Idempotency-Key", "pay-3")
	<-st.held // the circuit read waits, until the request's context ends
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the client got an answer before it left")
	}

	rec := e.Audit.await(t, corr)
	notCouldNotConnect(t, rec)
	if rec.Outcome != audit.OutcomeError || rec.Code != -32603 || !strings.Contains(rec.Detail, "client left before the call was sent") {
		t.Fatalf("audit record: outcome %q code %d detail %q; want error -32603, the client left before the call was sent", rec.Outcome, rec.Code, rec.Detail)
	}
	if n := u.calls.Load(); n != 0 {
		t.Fatalf("upstream ran %d tools/call after the client left; want 0", n)
	}
	// The ledger's claim was given back: the key is free for a retry.
	r := e.invoke(t, "work", `{"n":3}`, "Idempotency-Key", "pay-3")
	if r.code() != 0 || u.calls.Load() != 1 {
		t.Fatalf("retry: %s, upstream calls %d; want the call run once now", r.Raw, u.calls.Load())
	}
}
