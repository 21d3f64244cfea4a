package gateway_test

// Two gateway instances (separate DynamoDB clients, separate caches) over one
// moto_server's tables: the rate limit and the monthly quota admit exactly
// their limit under 100 parallel tools/call; and the DynamoDB requests of one
// allowed tools/call, counted by an SDK middleware (docs/perf/dynamodb.md).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
)

// requestLog records every DynamoDB operation a client issues.
type requestLog struct {
	mu   sync.Mutex
	reqs []loggedReq
}

type loggedReq struct {
	op         string
	start, end time.Time
}

func (l *requestLog) middleware(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("aegis-count",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				start := time.Now()
				out, md, err := next.HandleInitialize(ctx, in)
				l.mu.Lock()
				op := middleware.GetOperationName(ctx)
				if q, ok := in.Parameters.(*dynamodb.QueryInput); ok {
					op += "(" + q.ExpressionAttributeValues[":pk"].(*types.AttributeValueMemberS).Value + " " + q.ExpressionAttributeValues[":p"].(*types.AttributeValueMemberS).Value + ")"
				}
				l.reqs = append(l.reqs, loggedReq{op, start, time.Now()})
				l.mu.Unlock()
				return out, md, err
			}), middleware.After)
	})
}

func (l *requestLog) take() []loggedReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.reqs
	l.reqs = nil
	return r
}

// depth is the number of sequential waves: requests that overlap in time
// belong to one wave (they were in flight together).
func depth(reqs []loggedReq) int {
	sort.Slice(reqs, func(i, j int) bool { return reqs[i].start.Before(reqs[j].start) })
	d := 0
	var end time.Time
	for _, r := range reqs {
		if d == 0 || !r.start.Before(end) {
			d++
			end = r.end
		} else if r.end.After(end) {
			end = r.end
		}
	}
	return d
}

type dynEnv struct {
	URLs    [2]string
	Stores  [2]*dynamo.Store
	Logs    [2]*requestLog
	Key     string
	Up      *demo.Server
	Now     time.Time
	Session string
}

// slowStoreMargin is the request deadline's store margin for tests on
// dynamotest's serializing proxy (see newDynEnvWith).
const slowStoreMargin = 2 * time.Minute

func newDynEnv(t *testing.T, tune func(*config.Settings), tiers quota.Tiers) *dynEnv {
	return newDynEnvWith(t, tune, tiers, false)
}

// newDynEnvWith builds the two instances; production wires them as the
// Lambda function does, with the registry cache.
func newDynEnvWith(t *testing.T, tune func(*config.Settings), tiers quota.Tiers, production bool) *dynEnv {
	t.Helper()
	ctx := context.Background()
	env := dynamotest.Start(t)
	e := &dynEnv{Now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	var err error
	if e.Up, err = demo.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Up.Close() })
	s := config.Defaults()
	s.LocalMode = true
	// The upstream budget starts with a call's first upstream request and
	// covers its session set-up and dials too: with 100 parallel calls on
	// a loaded machine under -race, dials to the demo upstream queued past
	// 10 s ("could not connect: context deadline exceeded", -32000). These
	// tests count admitted calls; like the store margin below, the
	// upstream deadline is out of their way.
	s.UpstreamTimeout = time.Minute
	tune(&s)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := range 2 {
		e.Logs[i] = &requestLog{}
		e.Stores[i] = env.Store(t, dynamo.Options{}, e.Logs[i].middleware)
		st := e.Stores[i]
		o := &gateway.Options{
			Settings: s,
			Logger:   log,
			Now:      func() time.Time { return e.Now },
			Tiers:    tiers,
			// dynamotest hands moto one request at a time: with 100
			// parallel calls on a loaded machine a call's store work waits
			// many seconds for its turn. These tests count; they do not
			// time, so the request deadline is out of their way.
			StoreMargin: slowStoreMargin,
		}
		if production {
			o.RegistryCacheTTL = 10 * time.Second
		}
		gw, err := gateway.New(st, o)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		e.URLs[i] = srv.URL
	}
	st := e.Stores[0]
	must(t, st.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierFree, Created: e.Now}))
	must(t, st.PutServer(ctx, registry.Server{Tenant: "acme", Name: "mock-primary", URL: e.Up.URL, Created: e.Now}))
	var k registry.Key
	e.Key, k = auth.NewKey("acme", "acme-agent", e.Now)
	must(t, st.PutKey(ctx, k))
	e.Session = "0123456789abcdef0123456789abcdef"
	must(t, st.Create(ctx, session.Record{ID: e.Session, Tenant: "acme", Caller: "acme-agent", Created: e.Now, LastSeen: e.Now}))
	return e
}

type answer struct {
	Error *struct {
		Code int             `json:"code"`
		Data json.RawMessage `json:"data"`
	} `json:"error"`
}

func (e *dynEnv) call(i int, id int) (answer, error) {
	body := call(fmt.Sprint(id), "echo", `{"message":"hi"}`)
	req, _ := http.NewRequest(http.MethodPost, e.URLs[i%2]+"/v1/invoke", bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.Key)
	req.Header.Set("X-Session-ID", e.Session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		return a, fmt.Errorf("%w: %s", err, b)
	}
	return a, nil
}

// parallel sends n calls split over both instances; it returns how many
// were admitted and the refusals by code, with one refusal's data.
func (e *dynEnv) parallel(t *testing.T, n int) (admitted int, refused map[int]int, data json.RawMessage) {
	t.Helper()
	var mu sync.Mutex
	refused = map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := e.call(i, i+1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("call %d: %v", i, err)
			case a.Error == nil:
				admitted++
			default:
				refused[a.Error.Code]++
				data = a.Error.Data
			}
		}()
	}
	wg.Wait()
	return admitted, refused, data
}

func dataWithout(t *testing.T, raw json.RawMessage, drop string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("data %s: %v", raw, err)
	}
	delete(m, drop)
	b, _ := json.Marshal(m)
	return string(b)
}

func TestTwoInstancesRateLimitOnDynamoDB(t *testing.T) {
	e := newDynEnv(t, func(s *config.Settings) { s.RateLimitPerSession, s.RateLimitPerTool = 30, 0 }, nil)
	admitted, refused, data := e.parallel(t, 100)
	if admitted != 30 || refused[-32004] != 70 || len(refused) != 1 {
		t.Fatalf("admitted %d, refused %v; want exactly 30 admitted and 70 × -32004", admitted, refused)
	}
	if got, want := dataWithout(t, data, "aegis"), `{"limit":30,"retry_after_ms":60000,"scope":"session"}`; got != want {
		t.Fatalf("-32004 data = %s, want %s", got, want)
	}
	if got := e.Up.Calls("echo"); got != 30 {
		t.Fatalf("upstream saw %d echo calls, want 30", got)
	}
}

func TestTwoInstancesQuotaEdgeOnDynamoDB(t *testing.T) {
	e := newDynEnv(t, func(s *config.Settings) {
		s.RateLimitPerSession, s.RateLimitPerTool = 0, 0
		s.BillingEnabled, s.BillingEnforce = true, true
	}, quota.Tiers{registry.TierFree: 50})
	// 20 of 50 already used this month: 30 left at the edge.
	period, end := quota.Period(e.Now)
	for range 20 {
		if _, ok, err := e.Stores[1].Incr(context.Background(), quota.Key("acme", period), 0, end); err != nil || !ok {
			t.Fatal(err)
		}
	}
	admitted, refused, data := e.parallel(t, 100)
	if admitted != 30 || refused[-32060] != 70 || len(refused) != 1 {
		t.Fatalf("admitted %d, refused %v; want exactly 30 admitted and 70 × -32060", admitted, refused)
	}
	if got, want := dataWithout(t, data, "aegis"), `{"limit":50,"period":"202611","tier":"free","used":50}`; got != want {
		t.Fatalf("-32060 data = %s, want exactly %s", got, want)
	}
}

// TestDynamoDBRequestsPerCall measures one allowed tools/call in an existing
// session after a warm-up call (registry, tool catalog and kill switches
// cached), wired as the Lambda function is, with every check on. Reported
// in docs/perf/dynamodb.md.
func TestDynamoDBRequestsPerCall(t *testing.T) {
	for _, tc := range []struct {
		name       string
		concurrent int // UPSTREAM_MAX_CONCURRENT
		maxDepth   int
	}{
		// Session Touch, both rate windows, the quota meter and the circuit
		// read in one wave before the upstream call; the audit record after.
		{"backpressure off", 0, 2},
		// The lease is taken once every earlier check has allowed the call
		// (a call they refuse must not hold a slot meanwhile: issue "Faults
		// and state", item 2), a second wave; released alongside the audit
		// write.
		{"backpressure on", 64, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newDynEnvWith(t, func(s *config.Settings) {
				s.BillingEnabled, s.BillingEnforce = true, true
				s.UpstreamMaxConcurrent = tc.concurrent
			}, nil, true)
			if a, err := e.call(0, 1); err != nil || a.Error != nil {
				t.Fatalf("warm-up: %v %+v", err, a.Error)
			}
			e.Logs[0].take()
			if a, err := e.call(0, 2); err != nil || a.Error != nil {
				t.Fatalf("measured call: %v %+v", err, a.Error)
			}
			reqs := e.Logs[0].take()
			var ops []string
			for _, r := range reqs {
				ops = append(ops, r.op)
				if r.op == "Query(T#acme STOP#)" {
					t.Errorf("kill switches re-read within the refresh period")
				}
			}
			t.Logf("DynamoDB requests for one allowed tools/call: %d %v; sequential depth %d", len(reqs), ops, depth(reqs))
			if d := depth(reqs); d > tc.maxDepth {
				t.Errorf("sequential depth %d, want at most %d", d, tc.maxDepth)
			}
		})
	}
}
