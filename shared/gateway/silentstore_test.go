package gateway_test

// A silent store (issue "Faults and state", item 4): DynamoDB's endpoint
// accepts connections and never answers, as a stopped (SIGSTOP) process
// does. Every store operation has a deadline, and so has the request: the
// calls get their documented answers, the goroutines they used return, and
// nothing runs upstream for a client that left.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// failsafe bounds every wait of these tests: reaching it is a failure (a
// hang), never a measurement.
const failsafe = 60 * time.Second

// silentGateway is a gateway on DynamoDB behind the fault proxy, served on
// a loopback port, with its handlers in flight counted.
type silentGateway struct {
	URL      string
	HTTP     *http.Client // the gateway's upstream client
	inflight atomic.Int64
}

func newSilentGateway(t *testing.T, st *dynamo.Store, s config.Settings) *silentGateway {
	t.Helper()
	sg := &silentGateway{HTTP: gateway.NewHTTPClient(true)}
	gw, err := gateway.New(st, &gateway.Options{
		Settings:         s,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		HTTP:             sg.HTTP,
		RegistryCacheTTL: time.Hour, // as on Lambda: keys and servers are known when the store goes silent
	})
	must(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sg.inflight.Add(1)
		defer sg.inflight.Add(-1)
		gw.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	sg.URL = srv.URL
	return sg
}

// waitFor polls cond until it holds; failsafe ends the wait with a failure.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(failsafe)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSilentStore(t *testing.T) {
	ctx := context.Background()
	env := dynamotest.Start(t)
	proxy := dynamotest.NewFaultProxy(t, env.Endpoint)
	env.Endpoint = proxy.URL

	var leftRan atomic.Int64 // calls of clients that left, run upstream
	up := startRaw(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), `"left"`) {
			leftRan.Add(1)
		}
		okCall("done")(w, r, body)
	})

	// Two gateways on the same tables: one whose store operations give up
	// after 200 ms, for the answers; one whose operations would wait a
	// minute, so that its calls are certainly still waiting for the store
	// when their clients leave.
	fast := env.Store(t, dynamo.Options{OpTimeout: 200 * time.Millisecond})
	slow := env.Store(t, dynamo.Options{OpTimeout: time.Minute})
	now := time.Now()
	must(t, fast.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierFree, Created: now}))
	must(t, fast.PutServer(ctx, registry.Server{Tenant: "acme", Name: "tools", URL: up.URL, Created: now,
		Tools: map[string]registry.ToolSettings{"other": {RequiresApproval: true}}}))
	key, k := auth.NewKey("acme", "agent", now)
	must(t, fast.PutKey(ctx, k))

	s := config.Defaults()
	s.LocalMode = true
	s.BillingEnabled, s.BillingEnforce = true, true // the meter fails open too
	gwFast := newSilentGateway(t, fast, s)
	gwSlow := newSilentGateway(t, slow, s)

	client := &http.Client{Transport: &http.Transport{}, Timeout: failsafe}
	t.Cleanup(client.CloseIdleConnections)
	type result struct {
		r   reply
		err error
	}
	send := func(ctx context.Context, url, tool, args string, hdr ...string) result {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/invoke", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			return result{err: err}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: b}
		if err := json.Unmarshal(b, &r); err != nil {
			return result{err: fmt.Errorf("%w: %s", err, b)}
		}
		return result{r: r}
	}

	// Warm up while the store answers: registry caches, tool catalogs,
	// kill switches, the policy set, one session. On a loaded machine a
	// read of the fast store can pass its 200 ms before the store went
	// silent at all (the policy set not loaded yet: -32003); the warm-up
	// is set-up, not what is tested, so it is tried again until it runs.
	var sid string
	for _, g := range []*silentGateway{gwFast, gwSlow} {
		var res result
		deadline := time.Now().Add(failsafe)
		for {
			res = send(ctx, g.URL, "work", `{}`)
			if res.err == nil && res.r.code() == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("warm-up: %v %s", res.err, res.r.Raw)
			}
			time.Sleep(100 * time.Millisecond)
		}
		sid = res.r.Header.Get("X-Session-ID")
	}
	ranBefore := up.calls.Load()
	idle := func() {
		client.CloseIdleConnections()
		gwFast.HTTP.CloseIdleConnections()
		gwSlow.HTTP.CloseIdleConnections()
	}
	idle()
	waitFor(t, "the warm-up's handlers", func() bool { return gwFast.inflight.Load()+gwSlow.inflight.Load() == 0 })
	base := runtime.NumGoroutine()

	proxy.Silent.Store(true)

	// Clients that leave while their calls wait for the store: the calls
	// are not sent, and their handlers return.
	const leaving = 5
	lctx, leave := context.WithCancel(ctx)
	var lwg sync.WaitGroup
	for i := range leaving {
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			res := send(lctx, gwSlow.URL, "work", `{"left":`+string(rune('0'+i))+`}`, "X-Session-ID", sid)
			if !errors.Is(res.err, context.Canceled) {
				t.Errorf("a client that left got %v %s", res.err, res.r.Raw)
			}
		}()
	}
	waitFor(t, "the leaving calls to wait for the store", func() bool { return proxy.Held.Load() >= leaving })
	leave()
	lwg.Wait()
	waitFor(t, "the handlers of the clients that left to return", func() bool { return gwSlow.inflight.Load() == 0 })
	if n := leftRan.Load(); n != 0 {
		t.Fatalf("%d calls ran upstream after their clients left", n)
	}

	// Calls that stay: each gets its stage's documented answer once the
	// store's deadlines pass. Session, rate limit, quota and breaker fail
	// open: the call runs. Approval fails closed: -32061 unavailable.
	cases := []struct {
		name string
		tool string
		hdr  []string
		want int
	}{
		{"known session", "work", []string{"X-Session-ID", sid}, 0},
		{"known session", "work", []string{"X-Session-ID", sid}, 0},
		{"known session", "work", []string{"X-Session-ID", sid}, 0},
		{"known session", "work", []string{"X-Session-ID", sid}, 0},
		{"new session", "work", nil, 0},
		{"new session", "work", nil, 0},
		{"approval needed", "other", []string{"X-Session-ID", sid}, -32061},
		{"approval needed", "other", nil, -32061},
	}
	results := make([]result, len(cases))
	var wg sync.WaitGroup
	for i, tc := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = send(ctx, gwFast.URL, tc.tool, `{"to":"x"}`, tc.hdr...)
		}()
	}
	wg.Wait()
	allowed := 0
	for i, tc := range cases {
		res := results[i]
		if res.err != nil {
			t.Fatalf("%s: no answer: %v", tc.name, res.err)
		}
		if res.r.code() != tc.want || (tc.want == 0 && res.r.Result == nil) {
			t.Fatalf("%s: %d %s; want code %d", tc.name, res.r.Status, res.r.Raw, tc.want)
		}
		if tc.want == 0 {
			allowed++
		}
		if tc.want == -32061 && !strings.Contains(string(res.r.Error.Data), `"status":"unavailable"`) {
			t.Fatalf("%s: %s; want status unavailable", tc.name, res.r.Raw)
		}
	}
	if got := up.calls.Load() - ranBefore; got != int64(allowed) {
		t.Fatalf("upstream ran %d calls during the silence, want %d (the allowed ones, nothing else)", got, allowed)
	}

	// Nothing is left waiting: every handler returned, and so did every
	// goroutine the calls started (store operations, audit writes, lease
	// releases, upstream exchanges).
	waitFor(t, "every handler to return", func() bool { return gwFast.inflight.Load()+gwSlow.inflight.Load() == 0 })
	waitFor(t, "the store's held requests to be given up", func() bool { return proxy.Held.Load() == 0 })
	waitFor(t, "the goroutines to return to their number before the silence", func() bool {
		idle()
		return runtime.NumGoroutine() <= base
	})

	// The store comes back: nothing that waited for it runs now.
	proxy.Silent.Store(false)
	if res := send(ctx, gwSlow.URL, "work", `{}`, "X-Session-ID", sid); res.err != nil || res.r.code() != 0 {
		t.Fatalf("after the silence: %v %s", res.err, res.r.Raw)
	}
	if n := leftRan.Load(); n != 0 {
		t.Fatalf("%d calls of clients that left ran upstream once the store answered again", n)
	}
}

// TestSilentStoreDefaultBudgets: with production's client and defaults
// (dynamo.NewClient, dynamo.DefaultOpTimeout), one operation on a silent
// endpoint gives up and reports the store unavailable; its first attempt
// gave up on its own (dynamo.ResponseHeaderTimeout) early enough for the
// retryer to try again within the operation's budget.
func TestSilentStoreDefaultBudgets(t *testing.T) {
	env := dynamotest.Start(t)
	proxy := dynamotest.NewFaultProxy(t, env.Endpoint)
	c, err := dynamo.NewClient(context.Background(), dynamotest.Load(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(proxy.URL) })
	must(t, err)
	st := dynamo.New(c, env.Tables, dynamo.Options{})
	proxy.Silent.Store(true)

	done := make(chan error, 1)
	go func() {
		_, err := st.Key(context.Background(), "k") // no deadline of the caller's
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Key on a silent store: %v, want store.ErrUnavailable", err)
		}
	case <-time.After(failsafe):
		t.Fatal("an operation on a silent store did not return")
	}
	if a := proxy.Attempts.Load(); a < 2 || a > dynamo.MaxAttempts {
		t.Fatalf("attempts = %d, want 2..%d: a silent attempt gives up before the operation's deadline and is retried", a, dynamo.MaxAttempts)
	}
	waitFor(t, "the held requests to be given up", func() bool { return proxy.Held.Load() == 0 })
}
