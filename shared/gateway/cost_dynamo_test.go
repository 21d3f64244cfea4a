package gateway_test

// The deployment path's cost, counted: the gateway wired as the Lambda
// function is (template defaults, the registry cache) over DynamoDB
// (moto_server), every request of one call counted by internal/dynacount,
// per kind of request. Counts are deterministic, so they are asserted
// exactly; docs/perf/dynamodb.md and docs/deploy.md's cost table are
// computed from them:
//
//	go test -run 'TestDynamoDBCostPerCall' -v ./shared/gateway/

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aegis-gw/aegis/internal/dynacount"
	"github.com/aegis-gw/aegis/internal/testclock"
	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/wiring"
)

// costEnv is one gateway on DynamoDB through a counting proxy, and an
// admin store that reaches the tables directly (set-up, not counted).
type costEnv struct {
	Proxy   *dynacount.Proxy
	Admin   *dynamo.Store
	Clock   *testclock.Clock
	URL     string
	Key     string
	Session string
	Up      *demo.Server
	gw      func() http.Handler // a new gateway instance (a cold start)
}

// policyEverything is a roles layer and a Cedar set that allow the calls
// the cost test makes.
const policyEverything = `roles:
  ops:
    allow: ["mock-primary/*"]
  intern:
    deny: ["mock-primary/transfer"]
cedar_policies: |
  @id("ops-only")
  permit (principal, action == Action::"tools/call", resource)
  when { resource.name == "echo" || resource.name == "transfer" };
`

// newCostEnv builds a costEnv; each of with, when given, adds to the
// options of every gateway instance it makes, over that instance's
// counted store.
func newCostEnv(t *testing.T, tune func(*config.Settings), roles []string, with ...func(e *costEnv, st *dynamo.Store, o *gateway.Options)) *costEnv {
	t.Helper()
	ctx := context.Background()
	env := dynamotest.Start(t)
	e := &costEnv{Clock: testclock.New(time.Date(2026, 12, 3, 12, 0, 7, 0, time.UTC))}
	e.Proxy = dynacount.Start(t, env.Endpoint)
	e.Admin = env.Store(t, dynamo.Options{})
	var err error
	if e.Up, err = demo.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Up.Close() })
	s := config.Defaults() // the template's defaults
	s.LocalMode = true     // the demo upstream is on loopback
	if tune != nil {
		tune(&s)
	}
	e.gw = func() http.Handler {
		st := env.Store(t, dynamo.Options{}, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(e.Proxy.URL) })
		o := &gateway.Options{
			Settings:         s,
			Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
			Now:              e.Clock.Now,
			Tiers:            quota.Tiers{registry.TierFree: 1_000_000},
			StoreMargin:      slowStoreMargin,
			RegistryCacheTTL: wiring.RegistryCacheTTL,
		}
		for _, w := range with {
			w(e, st, o)
		}
		gw, err := gateway.New(st, o)
		if err != nil {
			t.Fatal(err)
		}
		return gw
	}
	srv := httptest.NewServer(e.gw())
	t.Cleanup(srv.Close)
	e.URL = srv.URL
	now := e.Clock.Now()
	must(t, e.Admin.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierFree, Created: now}))
	must(t, e.Admin.PutServer(ctx, registry.Server{Tenant: "acme", Name: "mock-primary", URL: e.Up.URL, Created: now,
		Tools: map[string]registry.ToolSettings{"transfer": {RequiresApproval: true}}}))
	var k registry.Key
	e.Key, k = auth.NewKey("acme", "acme-agent", now)
	k.Roles = roles
	must(t, e.Admin.PutKey(ctx, k))
	if roles != nil {
		must(t, e.Admin.PutPolicy(ctx, registry.Policy{Tenant: "acme", Source: policyEverything, Updated: now}))
	}
	e.Session = "fedcba9876543210fedcba9876543210"
	must(t, e.Admin.Create(ctx, session.Record{ID: e.Session, Tenant: "acme", Caller: "acme-agent", Created: now, LastSeen: now}))
	return e
}

// call sends one tools/call in the env's session and returns its answer
// and when it arrived.
func (e *costEnv) call(t *testing.T, id int, tool, args string) (answer, time.Time) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/v1/invoke", bytes.NewBufferString(call(fmt.Sprint(id), tool, args)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.Key)
	req.Header.Set("X-Session-ID", e.Session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	at := time.Now()
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return a, at
}

func (e *costEnv) mustCall(t *testing.T, id int, tool, args string, wantCode int) time.Time {
	t.Helper()
	a, at := e.call(t, id, tool, args)
	code := 0
	if a.Error != nil {
		code = a.Error.Code
	}
	if code != wantCode {
		t.Fatalf("call %d (%s): code %d, want %d (%+v)", id, tool, code, wantCode, a.Error)
	}
	return at
}

// approve holds a transfer call and approves it: the measured call is
// the approved one.
func approve(t *testing.T, e *costEnv) {
	a, _ := e.call(t, 90, "transfer", `{"to":"acct-1","amount":5}`)
	var d struct {
		ID string `json:"approval_id"`
	}
	if a.Error == nil || a.Error.Code != -32061 || json.Unmarshal(a.Error.Data, &d) != nil || d.ID == "" {
		t.Fatalf("held call: %+v", a.Error)
	}
	if _, err := e.Admin.DecideApproval(context.Background(), d.ID, approval.Decision{Status: approval.Approved, By: "alice"}, e.Clock.Now()); err != nil {
		t.Fatal(err)
	}
}

// costWant is what one kind of call asserts: requests, writes, reads,
// write units, read units (×2, to keep halves whole), sequential trips
// before the answer, requests after it.
type costWant struct {
	Requests, Writes, Reads, WriteUnits, ReadHalfUnits, Trips, After int
}

func wantOf(c dynacount.Counts) costWant {
	return costWant{c.Requests, c.Writes, c.Reads, c.WriteUnits, int(c.ReadUnits * 2), c.Trips, c.After}
}

const echoArgs = `{"message":"hi"}`

// TestDynamoDBCostPerCall counts the DynamoDB requests of each kind of
// tools/call on a warm instance (after one allowed call), an idle one and
// a cold one, and asserts them exactly. With the template's defaults no
// policy rule reads the session's manifest counters, so an allowed call
// writes none (policycheck: counted); "everything on" has Cedar policies,
// and its forwarded call counts them in one more session write.
func TestDynamoDBCostPerCall(t *testing.T) {
	billing := func(s *config.Settings) { s.BillingEnabled, s.BillingEnforce = true, true }
	for _, tc := range []struct {
		name  string
		tune  func(*config.Settings)
		roles []string // the key's roles; non-nil: a policy set (roles + Cedar) too
		// prepare runs after the warm-up call (none when first), before
		// the measured call. cold: the measured call is the first of a
		// new instance (a cold start), made after the warm-up call on
		// another: the tenant, its session and its pins are in use.
		// first: no warm-up at all, a new tenant's first call ever.
		cold     bool
		first    bool
		prepare  func(t *testing.T, e *costEnv)
		tool     string
		args     string
		wantCode int
		want     costWant
	}{
		{name: "allowed, template defaults", tool: "echo", args: echoArgs,
			want: costWant{5, 5, 0, 5, 0, 3, 0}},
		// The lease off (UPSTREAM_MAX_CONCURRENT=0, not the seed's
		// default): the session item, the key window, the audit record.
		{name: "allowed, lease off", tune: func(s *config.Settings) { s.UpstreamMaxConcurrent = 0 }, tool: "echo", args: echoArgs,
			want: costWant{3, 3, 0, 3, 0, 2, 0}},
		{name: "allowed, everything on", tune: billing, roles: []string{"ops"}, tool: "echo", args: echoArgs,
			want: costWant{6, 6, 0, 6, 0, 3, 0}},
		// The lease off (UPSTREAM_MAX_CONCURRENT=0): the session item (its
		// touch, rate windows and manifest counters in one write), the key
		// window, the quota meter, then the audit record.
		{name: "allowed, everything on, lease off", tune: func(s *config.Settings) { billing(s); s.UpstreamMaxConcurrent = 0 }, roles: []string{"ops"}, tool: "echo", args: echoArgs,
			want: costWant{4, 4, 0, 4, 0, 2, 0}},
		// Decided before anything is counted (decision 9): wave 1 reads
		// the session's record and the key's window (would either
		// refuse?), wave 2 writes the audit record; the session is
		// touched too when its LastSeen is stale (here it is not).
		{name: "refused by a store-free check (-32053)", tool: "echo", args: `{"message":"card 4111 1111 1111 1111"}`, wantCode: -32053,
			want: costWant{3, 1, 2, 1, 4, 2, 0}},
		// Foreseen by the policy stage (decision 11): its Cedar policies
		// read no context.session, so the refusal holds whatever the
		// session's record holds; wave 1 reads the session's record, the
		// key's window and the quota meter (would any refuse first?),
		// wave 2 writes the audit record. The tool was called (and
		// refused, and pinned) once before.
		{name: "refused by Cedar (-32003), everything on", tune: billing, roles: []string{"ops"}, tool: "leak", args: `{}`, wantCode: -32003,
			prepare: func(t *testing.T, e *costEnv) { e.mustCall(t, 90, "leak", `{}`, -32003) },
			want:    costWant{4, 1, 3, 1, 6, 2, 0}},
		// A role's deny (Cedar permits the tool), foreseen alike.
		{name: "refused by a role's deny (-32003), everything on", tune: billing, roles: []string{"ops", "intern"}, tool: "transfer", args: `{"to":"acct-1","amount":5}`, wantCode: -32003,
			prepare: func(t *testing.T, e *costEnv) { e.mustCall(t, 90, "transfer", `{"to":"acct-1","amount":5}`, -32003) },
			want:    costWant{4, 1, 3, 1, 6, 2, 0}},
		{name: "refused by the rate limit", tune: func(s *config.Settings) { s.RateLimitPerTool = 1 }, tool: "echo", args: echoArgs, wantCode: -32004,
			want: costWant{4, 4, 0, 4, 0, 2, 0}},
		{name: "held for approval", tool: "transfer", args: `{"to":"acct-1","amount":5}`, wantCode: -32061,
			want: costWant{10, 8, 2, 14, 4, 5, 0}},
		{name: "approved", prepare: approve, tool: "transfer", args: `{"to":"acct-1","amount":5}`,
			want: costWant{10, 9, 1, 9, 2, 6, 0}},
		// The lease off: wave 1 (with the approval slot's read), its
		// consumption, the approval.consumed record, then the settling
		// wave and the approval.settled record.
		{name: "approved, lease off", tune: func(s *config.Settings) { s.UpstreamMaxConcurrent = 0 }, prepare: approve,
			tool: "transfer", args: `{"to":"acct-1","amount":5}`,
			want: costWant{8, 7, 1, 7, 2, 5, 0}},
		// A minute later: every cache is past its lifetime (the key, the
		// tenant's view, the kill switches, the pins' tally, the policy,
		// the circuit); the session's one write (touch and count) starts
		// its windows afresh. The key and the
		// tenant's view (one Query: record, servers, stops, pins' tally)
		// are read in one wave: docs/design/cost.md, "Idle and cold
		// instances".
		{name: "idle past every cache's lifetime", prepare: func(t *testing.T, e *costEnv) { e.Clock.Advance(61 * time.Second) },
			tool: "echo", args: echoArgs,
			want: costWant{9, 5, 4, 5, 8, 4, 0}},
		// A new instance: the key, then the tenant's view with its pins
		// (one Query), then the call as on a warm instance.
		{name: "first call after a cold start", cold: true, tool: "echo", args: echoArgs,
			want: costWant{9, 5, 4, 5, 8, 5, 0}},
		// A new tenant's first call ever, on a new instance: besides the
		// cold start, echo is pinned on first use (the pin and its
		// tally, which PutTenant made, in one transaction) and the
		// upstream session is opened and stored.
		{name: "a new tenant's first call, cold", first: true, tool: "echo", args: echoArgs,
			want: costWant{11, 7, 4, 10, 8, 7, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCostEnv(t, tc.tune, tc.roles)
			if !tc.first {
				e.mustCall(t, 1, "echo", echoArgs, 0)
			}
			if tc.prepare != nil {
				tc.prepare(t, e)
			}
			if tc.cold {
				srv := httptest.NewServer(e.gw())
				t.Cleanup(srv.Close)
				e.URL = srv.URL
			}
			e.Proxy.Take()
			at := e.mustCall(t, 2, tc.tool, tc.args, tc.wantCode)
			reqs := e.Proxy.Take()
			c := dynacount.Tally(reqs, at)
			got := wantOf(c)
			t.Logf("%+v; largest item written %d bytes\n\t%s", got, c.MaxItemBytes, dynacount.Ops(reqs))
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestLeaseWritesPerItem: with UPSTREAM_MAX_CONCURRENT at its default
// (64), 64 calls at once each take and give back a lease, and those writes
// are spread over the lease's shards (a take that finds its shard full
// tries another: those failed writes count too): no lease item takes
// more than half of them (one item took them all before issue 27), and none is larger
// than 1 KB (one write unit each; the single item with 64 holders was
// about 2.3 KB, three units a write). docs/design/cost.md has the
// arithmetic for 2,000 calls a second.
func TestLeaseWritesPerItem(t *testing.T) {
	const calls = 64
	e := newCostEnv(t, func(s *config.Settings) {
		s.RateLimitPerSession, s.RateLimitPerTool, s.RateLimitPerKey = 0, 0, 0
	}, nil)
	e.mustCall(t, 1, "echo", echoArgs, 0)
	e.Proxy.Take()
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			a, _ := e.call(t, 100+i, "echo", echoArgs)
			if a.Error != nil {
				t.Errorf("call %d: %+v", i, a.Error)
			}
		})
	}
	wg.Wait()
	perItem := map[string]int{}
	total, landed := 0, 0
	for _, r := range e.Proxy.Take() {
		if !r.Write() || !strings.HasPrefix(r.Key, "LEASE#") {
			continue
		}
		perItem[r.Key]++
		total++
		if r.Status == http.StatusOK {
			landed++ // else a take that found its shard full, then tried another
		}
		if r.WriteUnits != 1 {
			t.Errorf("%s %s: %d write units (%d bytes), want 1", r.Op, r.Key, r.WriteUnits, r.ItemBytes)
		}
	}
	busiest := 0
	for _, n := range perItem {
		busiest = max(busiest, n)
	}
	t.Logf("%d lease writes (%d landed) over %d items %v", total, landed, len(perItem), perItem)
	if landed != 2*calls {
		t.Errorf("%d lease writes landed for %d calls, want %d (a take and a release each)", landed, calls, 2*calls)
	}
	if busiest > total/2 {
		t.Errorf("one lease item took %d of %d writes, want at most half", busiest, total)
	}
}
