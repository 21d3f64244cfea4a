package gateway_test

// A refused call holds nothing (issue "Faults and state", items 2 and 3).
// Every test here reads the state the checks keep through the stores'
// public interfaces (ratelimit.Counter, quota.Meter, breaker.Store,
// approval.Store) and asserts exact values: the rate windows, the monthly
// meter and the in-flight leases equal what the admitted calls took, and
// an approval a refused call used is given back. The same bodies run on
// the embedded store (this file) and on DynamoDB through moto_server
// (holdnothing_dynamo_test.go), each with two gateway instances over one
// store.

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
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/breaker"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/ratelimit"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/sessioncheck"
)

// holdStores returns the backends of n gateway instances that share one
// state: the same *memstore.Store n times, or n DynamoDB clients of one
// pair of tables.
type holdStores func(t *testing.T, n int) []backend.Backend

func memStores(_ *testing.T, n int) []backend.Backend {
	st := memstore.New()
	out := make([]backend.Backend, n)
	for i := range out {
		out[i] = st
	}
	return out
}

// holdUpstream is an MCP upstream that counts every tool run as it starts
// (the count "at the upstream") and has a tool, hold, that stays in flight
// until release, so that a test can keep UPSTREAM_MAX_CONCURRENT slots
// taken for as long as it needs.
type holdUpstream struct {
	URL     string
	mu      sync.Mutex
	calls   map[string]int
	entered chan struct{} // one value per hold call that reached the upstream
	gate    chan struct{} // closed by release
	once    sync.Once
}

type holdMsg struct {
	Message string `json:"message" jsonschema:"any text"`
}

type holdNone struct{}

func startHoldUpstream(t *testing.T) *holdUpstream {
	t.Helper()
	u := &holdUpstream{calls: map[string]int{}, entered: make(chan struct{}, 256), gate: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: "hold-upstream", Version: "1.0.0"}, nil)
	// gated needs approval (the server's tool settings); halted is stopped
	// by the kill switch: both exist upstream, so that the check named
	// refuses them, not routing.
	for _, name := range []string{"echo", "gated", "halted"} {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: name},
			func(_ context.Context, _ *mcp.CallToolRequest, in holdMsg) (*mcp.CallToolResult, any, error) {
				u.count(name)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
			})
	}
	mcp.AddTool(s, &mcp.Tool{Name: "hold", Description: "stays in flight until the test releases it"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ holdNone) (*mcp.CallToolResult, any, error) {
			u.count("hold")
			u.entered <- struct{}{}
			select {
			case <-u.gate:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
		})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(u.release) // runs first: no handler is left waiting
	u.URL = srv.URL + "/mcp"
	return u
}

func (u *holdUpstream) count(tool string) {
	u.mu.Lock()
	u.calls[tool]++
	u.mu.Unlock()
}

// Calls is how many calls of tool reached the upstream.
func (u *holdUpstream) Calls(tool string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[tool]
}

func (u *holdUpstream) release() { u.once.Do(func() { close(u.gate) }) }

const (
	holdServer = "tools"
	holdCaller = "agent"
)

// holdEnv is a tenant with one server (holdUpstream) behind n gateway
// instances, a known session, and a way to read every counter the checks
// keep for it, at any time and at the moment an answer is written.
type holdEnv struct {
	t       *testing.T
	st      backend.Backend // store 0: reads go through the public interfaces
	urls    []string
	up      *holdUpstream
	now     time.Time
	tenant  string
	key     string // bearer
	keyID   string
	session string
	set     config.Settings
	next    atomic.Int64 // request ids, and which instance serves a call

	readMu   sync.Mutex // one read of the counters at a time; guards approval and other
	snapMu   sync.Mutex
	snaps    []holdCounts // read when a marked answer was written
	approval string       // the approval a read reports ("" none)
	// other is the one window besides echo's and hold's that a read
	// reports: "gated", "halted" or "nope" ("" none). Reading only what a
	// case touches keeps the DynamoDB table fast.
	other string
}

// snapHeader marks a request whose state is read when its answer is
// written (before the first byte of its status line).
const snapHeader = "X-Test-Read-State"

// newHoldEnv builds the tenant on the stores' shared state, with the
// gateways' settings tuned by tune and a monthly quota of quotaLimit calls
// (BILLING_ENABLED and BILLING_ENFORCE on).
func newHoldEnv(t *testing.T, stores []backend.Backend, tenant string, tune func(*config.Settings), quotaLimit int64) *holdEnv {
	t.Helper()
	ctx := context.Background()
	e := &holdEnv{t: t, st: stores[0], up: startHoldUpstream(t), tenant: tenant,
		now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), session: sessioncheck.NewID()}
	s := config.Defaults()
	s.LocalMode = true
	s.UpstreamTimeout = 20 * time.Second
	s.BillingEnabled, s.BillingEnforce = true, true
	tune(&s)
	e.set = s
	must(t, e.st.PutTenant(ctx, registry.Tenant{ID: tenant, Tier: registry.TierGrowth, Created: e.now}))
	must(t, e.st.PutServer(ctx, registry.Server{Tenant: tenant, Name: holdServer, URL: e.up.URL, Created: e.now,
		Tools: map[string]registry.ToolSettings{"gated": {RequiresApproval: true}}}))
	var k registry.Key
	e.key, k = auth.NewKey(tenant, holdCaller, e.now)
	e.keyID = k.ID
	must(t, e.st.PutKey(ctx, k))
	must(t, e.st.PutStop(ctx, killswitch.Stop{Tenant: tenant, Server: holdServer, Tool: "halted", By: "ops", At: e.now}))
	must(t, e.st.Create(ctx, session.Record{ID: e.session, Tenant: tenant, Caller: holdCaller, Created: e.now, LastSeen: e.now}))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, st := range stores {
		gw, err := gateway.New(st, &gateway.Options{
			Settings: s, Logger: log, Now: func() time.Time { return e.now },
			Tiers: quota.Tiers{registry.TierGrowth: quotaLimit},
			// Wired as on Lambda: the registry is read once per instance.
			RegistryCacheTTL: time.Minute,
			// On DynamoDB (dynamotest serializes requests to moto) the
			// store work of parallel calls can take seconds on a loaded
			// machine; these tests count, they do not time.
			StoreMargin: slowStoreMargin,
		})
		must(t, err)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(snapHeader) != "" {
				w = &readOnWrite{ResponseWriter: w, read: func() {
					c := e.counts()
					e.snapMu.Lock()
					e.snaps = append(e.snaps, c)
					e.snapMu.Unlock()
				}}
			}
			gw.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		e.urls = append(e.urls, srv.URL)
	}
	t.Cleanup(e.up.release) // first: a test that stops early leaves no call held
	return e
}

// readOnWrite reads the state once, when the handler starts its answer.
type readOnWrite struct {
	http.ResponseWriter
	read func()
	once sync.Once
}

func (w *readOnWrite) WriteHeader(code int) {
	w.once.Do(w.read)
	w.ResponseWriter.WriteHeader(code)
}

func (w *readOnWrite) Write(b []byte) (int, error) {
	w.once.Do(w.read)
	return w.ResponseWriter.Write(b)
}

// holdCounts is the state the checks keep for the env's tenant and
// session: the session's rate window, the tool windows (of Gated, Halted
// and Nope only the one the env watches), the month's quota meter, the
// leases in flight on the server, and the status of the approval the env
// watches.
type holdCounts struct {
	Session                   int64
	Echo, Hold, Gated, Halted int64 // tool windows of the routed tools
	Nope                      int64 // the window an unknown tool's call would count in
	Quota                     int64
	Leases                    int
	Approval                  approval.Status
}

// peek reads a counter through the Counter interface alone: Incr with
// limit 1 changes nothing on a counter at 1 or more and returns its value;
// on a counter at 0 it counts one, which Decr gives back.
func peek(ctx context.Context, c ratelimit.Counter, key string, expires time.Time) (int64, error) {
	n, ok, err := c.Incr(ctx, key, 1, expires)
	if err != nil || !ok {
		return n, err
	}
	return 0, c.Decr(ctx, key)
}

// counts reads the state. It is safe to call from a handler (at write
// time) and from the test; reads are serialized.
func (e *holdEnv) counts() holdCounts {
	e.readMu.Lock()
	defer e.readMu.Unlock()
	ctx := context.Background()
	exp := e.now.Add(time.Hour)
	var c holdCounts
	var errs []error
	read := func(dst *int64, key string) {
		n, err := peek(ctx, e.st, key, exp)
		*dst = n
		if err != nil {
			errs = append(errs, err)
		}
	}
	// The session's own windows are in its record (session.Admitter).
	rec, err := e.st.Session(ctx, e.tenant, e.session, e.now, session.Limits{})
	if err != nil {
		errs = append(errs, err)
	}
	start := e.now.UTC().Truncate(ratelimit.Window)
	c.Session = rec.Windows.At(start, "")
	c.Echo = rec.Windows.At(start, holdServer+"/echo")
	c.Hold = rec.Windows.At(start, holdServer+"/hold")
	switch e.other {
	case "gated":
		c.Gated = rec.Windows.At(start, holdServer+"/gated")
	case "halted":
		c.Halted = rec.Windows.At(start, holdServer+"/halted")
	case "nope":
		c.Nope = rec.Windows.At(start, "nope")
	}
	period, _ := quota.Period(e.now)
	read(&c.Quota, quota.Key(e.tenant, period))
	if c.Leases, err = e.st.InFlight(ctx, breaker.Key(e.tenant, holdServer), e.now); err != nil {
		errs = append(errs, err)
	}
	if e.approval != "" {
		a, err := e.st.GetApproval(ctx, e.approval)
		if err != nil {
			errs = append(errs, err)
		}
		c.Approval = a.Status
	}
	if len(errs) > 0 {
		e.t.Errorf("reading the state: %v", errs)
	}
	return c
}

// watch sets what a read reports besides the session's, echo's and
// hold's windows, the meter and the leases: the window of other and the
// status of approval id.
func (e *holdEnv) watch(other, id string) {
	e.readMu.Lock()
	defer e.readMu.Unlock()
	e.other, e.approval = other, id
}

// takeSnaps returns the states read at write time since the last call.
func (e *holdEnv) takeSnaps() []holdCounts {
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	s := e.snaps
	e.snaps = nil
	return s
}

// holdReply is one decoded answer.
type holdReply struct {
	Code    int
	Message string
	Data    map[string]any
	Header  http.Header
	Raw     string
}

// params of a tools/call.
func toolParams(tool, args string) string {
	return `{"name":"` + tool + `","arguments":` + args + `}`
}

// send posts one tools/call with params to the next gateway instance, in
// session sid ("" = none: the gateway mints one), with extra headers.
func (e *holdEnv) send(params, sid string, hdr ...string) (holdReply, error) {
	id := e.next.Add(1)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, params)
	req, _ := http.NewRequest(http.MethodPost, e.urls[int(id)%len(e.urls)]+"/v1/invoke", bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.key)
	if sid != "" {
		req.Header.Set("X-Session-ID", sid)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return holdReply{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return holdReply{}, fmt.Errorf("%w: %s", err, b)
	}
	r := holdReply{Header: resp.Header, Raw: string(b)}
	switch {
	case m.Error != nil:
		r.Code, r.Message, r.Data = m.Error.Code, m.Error.Message, m.Error.Data
	case m.Result == nil:
		return r, fmt.Errorf("neither result nor error: %s", b)
	}
	return r, nil
}

// mustSend sends in the env's session and fails the test on a transport
// error.
func (e *holdEnv) mustSend(params string, hdr ...string) holdReply {
	e.t.Helper()
	r, err := e.send(params, e.session, hdr...)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// startHolds sends n hold calls (extra headers per call from hdr) and
// waits until all n are in flight at the upstream. The returned wait
// blocks until they have answered and fails the test unless each was
// admitted.
func (e *holdEnv) startHolds(n int, hdr func(i int) []string) (wait func()) {
	e.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var h []string
			if hdr != nil {
				h = hdr(i)
			}
			r, err := e.send(toolParams("hold", `{}`), e.session, h...)
			switch {
			case err != nil:
				errs <- err.Error()
			case r.Code != 0:
				errs <- "hold call refused: " + r.Raw
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// Hold calls that fail never reach the upstream: report them instead
	// of waiting for them.
	for got := 0; got < n; {
		select {
		case <-e.up.entered:
			got++
		case msg := <-errs:
			e.t.Fatalf("hold call %d of %d: %s", got+1, n, msg)
		case <-time.After(20 * time.Second):
			e.t.Fatalf("%d of %d hold calls reached the upstream", got, n)
		}
	}
	return func() {
		e.t.Helper()
		<-done
		close(errs)
		for msg := range errs {
			e.t.Error(msg)
		}
	}
}

// holdLimit is the limit a table case sets tight (3), the others having
// room.
type holdLimit int

const (
	limSession    holdLimit = iota // RATE_LIMIT_PER_SESSION
	limTool                        // RATE_LIMIT_PER_TOOL
	limQuota                       // the tier's monthly quota
	limConcurrent                  // UPSTREAM_MAX_CONCURRENT
)

func (l holdLimit) String() string {
	return [...]string{"rate per session", "rate per tool", "quota", "max concurrent"}[l]
}

// holdRefusal is the check that refuses a case's calls.
type holdRefusal int

const (
	refRate     holdRefusal = iota // -32004
	refQuota                       // -32060
	refKill                        // -32062
	refApproval                    // -32061 pending
	refBreaker                     // -32063, UPSTREAM_MAX_CONCURRENT in flight (after the call used an approval)
	refRoute                       // -32601 unknown tool
	refParams                      // -32602 arguments not an object
	refLedger                      // -32063 from the idempotency ledger: the same key in flight
)

func (r holdRefusal) String() string {
	return [...]string{"ratelimit", "quota", "killswitch", "approval pending", "breaker concurrency",
		"route unknown tool", "params invalid", "idempotency in flight"}[r]
}

const (
	roomyRate  = 100
	roomyQuota = 1_000_000
	roomyConc  = 50
	tight      = 3
)

// holdCase is one cell of limits × refusals.
type holdCase struct {
	limit   holdLimit
	refusal holdRefusal
}

// limits are the case's settings: the limit under test at 3, every other
// mechanism on with room (so its counter is asserted too), and what the
// refusing check needs to refuse at 2 (below the tight limit, so that the
// named check, not the tight limit, refuses).
func (hc holdCase) limits() (perSession, perTool int, quotaLimit int64, maxConc int) {
	perSession, perTool, quotaLimit, maxConc = roomyRate, roomyRate, roomyQuota, roomyConc
	switch hc.limit {
	case limSession:
		perSession = tight
	case limTool:
		perTool = tight
	case limQuota:
		quotaLimit = tight
	case limConcurrent:
		maxConc = tight
	}
	switch {
	case hc.refusal == refRate && hc.limit != limSession && hc.limit != limTool:
		perSession = 2
	case hc.refusal == refQuota && hc.limit != limQuota:
		quotaLimit = 2
	case hc.refusal == refBreaker && hc.limit != limConcurrent:
		maxConc = 2
	}
	return perSession, perTool, quotaLimit, maxConc
}

// runHoldCase runs one cell:
//  1. fill: hold calls kept in flight (2, or every slot when the breaker
//     is to refuse) and completed echo calls, up to the edge of the
//     refusing limit;
//  2. one refused call, the state read when its answer is written, then 3
//     refused at once;
//  3. release the held calls; every counter equals what the admitted calls
//     took, no lease is held, the approval is not used, and the tight
//     limits admit exactly the calls they have room for: the refused calls
//     took none of it.
func runHoldCase(t *testing.T, stores []backend.Backend, tenant string, hc holdCase) {
	perSession, perTool, quotaLimit, maxConc := hc.limits()
	e := newHoldEnv(t, stores, tenant, func(s *config.Settings) {
		s.RateLimitPerSession, s.RateLimitPerTool, s.UpstreamMaxConcurrent = perSession, perTool, maxConc
	}, quotaLimit)

	var want holdCounts // the model: what admitted calls took
	admitted := func(tool string, n int) {
		for range n {
			want.Session++
			want.Quota++
			switch tool {
			case "echo":
				want.Echo++
			case "hold":
				want.Hold++
			case "gated":
				want.Gated++
			default:
				t.Fatalf("model: tool %s", tool)
			}
		}
	}
	check := func(stage string, got holdCounts) {
		t.Helper()
		if got != want {
			t.Errorf("%s: state %+v\n\twant %+v", stage, got, want)
		}
	}

	// The approval the breaker case's refused call uses, approved first.
	gatedArgs := `{"message":"pay"}`
	if hc.refusal == refBreaker {
		r := e.mustSend(toolParams("gated", gatedArgs))
		id, _ := r.Data["approval_id"].(string)
		if r.Code != -32061 || id == "" {
			t.Fatalf("first gated call: want -32061 pending with an approval id: %s", r.Raw)
		}
		if _, err := e.st.DecideApproval(context.Background(), id, approval.Decision{Status: approval.Approved, By: "ops"}, e.now); err != nil {
			t.Fatal(err)
		}
		e.watch("gated", id)
		want.Approval = approval.Approved
	}

	// 1. Fill.
	holds, echoes := 2, 0
	switch hc.refusal {
	case refBreaker:
		holds = maxConc
	case refRate:
		if hc.limit == limTool {
			echoes = perTool // echo's tool window at its limit (hold has its own)
		} else {
			echoes = perSession - holds
		}
	case refQuota:
		echoes = int(quotaLimit) - holds
	}
	const ledgerKey = "one-key"
	var holdHdr func(int) []string
	if hc.refusal == refLedger {
		holdHdr = func(i int) []string {
			if i == 0 {
				return []string{"Idempotency-Key", ledgerKey}
			}
			return nil
		}
	}
	waitHolds := e.startHolds(holds, holdHdr)
	admitted("hold", holds)
	want.Leases = holds
	for range echoes {
		if r := e.mustSend(toolParams("echo", `{"message":"fill"}`)); r.Code != 0 {
			t.Fatalf("fill call refused: %s", r.Raw)
		}
	}
	admitted("echo", echoes)

	// 2. Refusals: one with the state read as its answer is written, then
	// three at once.
	params, hdr := toolParams("echo", `{"message":"over"}`), []string{}
	wantCode, wantIn := 0, ""
	switch hc.refusal {
	case refRate:
		wantCode = -32004
		wantIn = "per session"
		if hc.limit == limTool {
			wantIn = "per tool"
		}
	case refQuota:
		wantCode = -32060
	case refKill:
		params, wantCode = toolParams("halted", `{"message":"x"}`), -32062
		e.watch("halted", "")
	case refApproval:
		params, wantCode, wantIn = toolParams("gated", `{"message":"held"}`), -32061, "Approval required"
		e.watch("gated", "")
	case refBreaker:
		params, wantCode, wantIn = toolParams("gated", gatedArgs), -32063, "UPSTREAM_MAX_CONCURRENT"
	case refRoute:
		params, wantCode = toolParams("nope", `{}`), -32601
		e.watch("nope", "")
	case refParams:
		params, wantCode = toolParams("echo", `[1]`), -32602
	case refLedger:
		params, hdr, wantCode, wantIn = toolParams("hold", `{}`), []string{"Idempotency-Key", ledgerKey}, -32063, "Idempotency-Key"
	}
	refused := func(r holdReply, err error) string {
		switch {
		case err != nil:
			return err.Error()
		case r.Code != wantCode || !strings.Contains(r.Message, wantIn):
			return fmt.Sprintf("want %d (%q): %s", wantCode, wantIn, r.Raw)
		case hc.refusal == refApproval && r.Data["status"] != "pending":
			return "want status pending: " + r.Raw
		}
		return ""
	}
	r, err := e.send(params, e.session, append([]string{snapHeader, "1"}, hdr...)...)
	if msg := refused(r, err); msg != "" {
		t.Fatalf("refused call: %s", msg)
	}
	if snaps := e.takeSnaps(); len(snaps) != 1 {
		t.Errorf("%d reads at write time, want 1", len(snaps))
	} else {
		check("when the refusal was written", snaps[0])
	}
	if hc.refusal == refApproval {
		id, _ := r.Data["approval_id"].(string)
		e.watch("gated", id)
		want.Approval = approval.Pending
	}
	if hc.refusal == refBreaker {
		// The approval stays with its one call (below): these three need
		// none, so they do not race for it.
		params = toolParams("echo", `{"message":"over"}`)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// At a tight limit's edge a call refused later holds its unit
			// for a moment, so a call beside it may meet that limit first;
			// and beside an in-flight key, the last slot: any refusal
			// will do, the state read after them is exact.
			r, err := e.send(params, e.session, hdr...)
			switch {
			case err != nil:
				t.Error(err)
			case r.Code != wantCode && r.Code != -32004 && r.Code != -32060 && r.Code != -32063:
				t.Errorf("concurrent refused call: want %d or a limit's refusal: %s", wantCode, r.Raw)
			}
		}()
	}
	wg.Wait()

	// 3. Release the held calls.
	e.up.release()
	waitHolds()
	want.Leases = 0
	if hc.refusal == refBreaker {
		// The approval was given back: it still runs its call, once.
		if r := e.mustSend(toolParams("gated", gatedArgs)); r.Code != 0 {
			t.Fatalf("approved call after the refusal: %s", r.Raw)
		}
		admitted("gated", 1)
		want.Approval = approval.Consumed
	}
	// The tight limits admit exactly the calls they have room for.
	// In the order of the checks: of two with the same room, the earlier
	// refuses.
	room, code := -1, 0
	for _, l := range []struct {
		limit, used int64
		code        int
	}{
		{int64(perSession), want.Session, -32004},
		{int64(perTool), want.Echo, -32004},
		{quotaLimit, want.Quota, -32060},
	} {
		if r := int(l.limit - l.used); l.limit <= tight && (room < 0 || r < room) {
			room, code = r, l.code
		}
	}
	for i := 0; i <= room; i++ {
		r := e.mustSend(toolParams("echo", `{"message":"room"}`))
		switch {
		case i < room && r.Code != 0:
			t.Fatalf("call %d of the %d the tight limits have room for: %s", i+1, room, r.Raw)
		case i < room:
			admitted("echo", 1)
		case r.Code != code:
			t.Fatalf("call %d after the refusals, past the room of the tight limits: %s, want %d", i+1, r.Raw, code)
		}
	}
	check("at the end", e.counts())
	for tool, n := range map[string]int64{"echo": want.Echo, "hold": want.Hold, "gated": want.Gated, "halted": 0} {
		if got := e.up.Calls(tool); int64(got) != n {
			t.Errorf("upstream ran %s %d times, want %d (the calls admitted)", tool, got, n)
		}
	}
}

// runHoldTable runs every cell of limits × refusals over stores, one
// tenant (and fresh state keys) per cell.
func runHoldTable(t *testing.T, stores holdStores, parallel bool) {
	n := 0
	for _, l := range []holdLimit{limSession, limTool, limQuota, limConcurrent} {
		for _, r := range []holdRefusal{refRate, refQuota, refKill, refApproval, refBreaker, refRoute, refParams, refLedger} {
			n++
			tenant := fmt.Sprintf("hold-%02d", n)
			t.Run(l.String()+"/"+r.String(), func(t *testing.T) {
				if parallel {
					t.Parallel()
				}
				runHoldCase(t, stores(t, 2), tenant, holdCase{l, r})
			})
		}
	}
}

func TestRefusedCallHoldsNothing(t *testing.T) {
	runHoldTable(t, memStores, true)
}

// runHundred is the measured scenario of the issue: RATE_LIMIT_PER_SESSION
// 5, UPSTREAM_MAX_CONCURRENT 5, billing enforced with room, 100 calls at
// once in one session over two instances.
func runHundred(t *testing.T, stores []backend.Backend) {
	e := newHoldEnv(t, stores, "hundred", func(s *config.Settings) {
		s.RateLimitPerSession, s.RateLimitPerTool, s.UpstreamMaxConcurrent = 5, 0, 5
		// A request's deadline is the upstream timeout plus the store
		// margin, and it runs from the request's start: on moto (one
		// process answering every request in turn) under -race on a
		// busy machine, the 5 admitted calls' waves queue behind the
		// other 95 calls' writes for longer than 20 s. The test counts
		// state, not time: give them room.
		s.UpstreamTimeout = time.Minute
	}, roomyQuota)
	var (
		mu       sync.Mutex
		admitted int
		refused  = map[int]int{}
		wg       sync.WaitGroup
	)
	start := make(chan struct{})
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := e.send(toolParams("echo", `{"message":"hi"}`), e.session)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case r.Code == 0:
				admitted++
			default:
				refused[r.Code]++
			}
		}()
	}
	close(start)
	wg.Wait()
	if admitted != 5 || refused[-32004] != 95 || len(refused) != 1 {
		t.Errorf("admitted %d, refused %v; want exactly 5 admitted and 95 × -32004", admitted, refused)
	}
	if got := e.up.Calls("echo"); got != 5 {
		t.Errorf("%d calls reached the upstream, want 5", got)
	}
	c := e.counts()
	if ran := int64(e.up.Calls("echo")); c.Quota != ran || c.Session != int64(admitted) {
		t.Errorf("meter %d and session window %d; want the %d calls that reached the upstream and the %d admitted", c.Quota, c.Session, ran, admitted)
	}
	if want := (holdCounts{Session: 5, Quota: 5}); c != want {
		t.Errorf("state %+v, want %+v (session window and meter = the 5 admitted, no lease)", c, want)
	}
	// No lease held: 5 new holders get the 5 slots, a sixth does not.
	ctx, key := context.Background(), breaker.Key(e.tenant, holdServer)
	for i := range 6 {
		ok, err := e.st.AcquireLease(ctx, key, fmt.Sprint("after-", i), 5, e.now, e.now.Add(time.Minute))
		if err != nil || ok != (i < 5) {
			t.Errorf("AcquireLease %d of limit 5 after the run: %v %v, want %v", i+1, ok, err, i < 5)
		}
	}
	for i := range 5 {
		must(t, e.st.ReleaseLease(ctx, key, fmt.Sprint("after-", i)))
	}
}

// TestHundredCallsOneSessionHoldNothing runs the scenario on the embedded
// store with a millisecond of latency on counting and on taking and giving
// back a lease, as a remote store has: without it the checks' inline store
// work takes the leases in the order the rate window admitted the calls,
// and a lease taken too early is held for microseconds only; the test
// could not tell.
func TestHundredCallsOneSessionHoldNothing(t *testing.T) {
	slow := &storeLatency{Backend: memstore.New(), d: time.Millisecond}
	runHundred(t, []backend.Backend{slow, slow})
}

// storeLatency answers counter and lease requests d later than its store.
type storeLatency struct {
	backend.Backend
	d time.Duration
}

func (l *storeLatency) Incr(ctx context.Context, key string, limit int64, expires time.Time) (int64, bool, error) {
	n, ok, err := l.Backend.Incr(ctx, key, limit, expires)
	time.Sleep(l.d)
	return n, ok, err
}

func (l *storeLatency) AcquireLease(ctx context.Context, key, holder string, limit int, now, expires time.Time) (bool, error) {
	ok, err := l.Backend.AcquireLease(ctx, key, holder, limit, now, expires)
	time.Sleep(l.d)
	return ok, err
}

func (l *storeLatency) ReleaseLease(ctx context.Context, key, holder string) error {
	time.Sleep(l.d)
	return l.Backend.ReleaseLease(ctx, key, holder)
}

// stallBackend stops one kind of store call of one call until released:
// HoldApproval, or the Admit of session stallKey (its session and tool
// windows: session.Admitter).
type stallBackend struct {
	backend.Backend
	approval bool
	stallKey string
	entered  chan struct{}
	release  chan struct{}
}

func (s *stallBackend) stall() {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
}

func (s *stallBackend) HoldApproval(ctx context.Context, cand approval.Approval, now time.Time) (approval.Approval, bool, error) {
	if s.approval {
		s.stall()
	}
	return s.Backend.HoldApproval(ctx, cand, now)
}

func (s *stallBackend) Admit(ctx context.Context, tenant, id, caller string, now time.Time, l session.Limits, w session.Window) (session.Record, session.Admission, error) {
	if s.stallKey != "" && id == s.stallKey {
		s.stall()
	}
	return s.Backend.Admit(ctx, tenant, id, caller, now, l, w)
}

// runNoSlotWhileDeciding: with UPSTREAM_MAX_CONCURRENT 1, a call that an
// earlier check is still deciding on (and then refuses) holds no slot
// meanwhile: a call sent in that time is admitted. The stalled decision is
// the approval store's (the call is then held, -32061) or, with async
// (the store is remote, and the checks' store requests overlap), the rate
// window's of another session at its limit (-32004). (On the embedded store
// a rate window is counted inline before the breaker starts anything.)
func runNoSlotWhileDeciding(t *testing.T, stores holdStores, async bool) {
	type stallCase struct {
		name     string
		approval bool
		wantCode int
	}
	cases := []stallCase{{"approval deciding", true, -32061}}
	if async {
		cases = append(cases, stallCase{"rate limit deciding", false, -32004})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			other := sessioncheck.NewID()
			var wrapped []backend.Backend
			sb := &stallBackend{approval: tc.approval, entered: make(chan struct{}, 1), release: make(chan struct{})}
			for i, st := range stores(t, 2) {
				if i == 0 {
					sb.Backend = st
					st = sb
				}
				wrapped = append(wrapped, st)
			}
			e := newHoldEnv(t, wrapped, "stall", func(s *config.Settings) {
				s.RateLimitPerSession, s.RateLimitPerTool, s.UpstreamMaxConcurrent = 2, 0, 1
			}, roomyQuota)
			ctx := context.Background()
			must(t, sb.Backend.Create(ctx, session.Record{ID: other, Tenant: e.tenant, Caller: holdCaller, Created: e.now, LastSeen: e.now}))
			if !tc.approval { // the other session's window is full
				w := session.Window{Start: e.now.UTC().Truncate(ratelimit.Window), PerSession: 2}
				for range 2 {
					_, a, err := sb.Backend.Admit(ctx, e.tenant, other, holdCaller, e.now, session.Limits{}, w)
					must(t, err)
					if !a.Counted() {
						t.Fatalf("filling the other session's window: %+v", a)
					}
				}
				sb.stallKey = other
			}
			// The stalled call goes to instance 0 (the wrapped store).
			e.next.Store(-1)
			stalled := make(chan holdReply, 1)
			go func() {
				params, sid := toolParams("gated", `{"message":"x"}`), e.session
				if !tc.approval {
					params, sid = toolParams("echo", `{"message":"x"}`), other
				}
				r, err := e.send(params, sid)
				if err != nil {
					t.Error(err)
				}
				stalled <- r
			}()
			select {
			case <-sb.entered:
			case <-time.After(20 * time.Second):
				t.Fatal("the call did not reach the stalled store call")
			}
			// Instance 1 (next id is odd).
			r := e.mustSend(toolParams("echo", `{"message":"meanwhile"}`))
			close(sb.release)
			if r.Code != 0 {
				t.Errorf("a call sent while another was being refused: %s; want it admitted (the refused call held the only slot)", r.Raw)
			}
			if got := <-stalled; got.Code != tc.wantCode {
				t.Errorf("stalled call: %s, want %d", got.Raw, tc.wantCode)
			}
			if c := e.counts(); c != (holdCounts{Session: 1, Quota: 1}) {
				t.Errorf("state %+v, want only the admitted call's units and no lease", c)
			}
		})
	}
}

func TestRefusedCallHoldsNoSlotWhileDeciding(t *testing.T) {
	runNoSlotWhileDeciding(t, memStores, false)
}

// runMinting (item 3): a call without X-Session-ID counts in its API key's
// window and in the session it mints, so that session gets exactly limit-1
// more calls.
func runMinting(t *testing.T, stores holdStores) {
	const limit = 5
	for _, tc := range []struct {
		name                string
		perSession, perTool int
	}{
		{"per session", limit, 0},
		{"per tool", 0, limit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newHoldEnv(t, stores(t, 2), "mint", func(s *config.Settings) {
				s.RateLimitPerSession, s.RateLimitPerTool, s.UpstreamMaxConcurrent = tc.perSession, tc.perTool, 0
			}, roomyQuota)
			first, err := e.send(toolParams("echo", `{"message":"first"}`), "")
			if err != nil || first.Code != 0 {
				t.Fatalf("minting call: %v %s", err, first.Raw)
			}
			sid := first.Header.Get("X-Session-ID")
			if sid == "" {
				t.Fatal("no session minted")
			}
			more := 0
			for ; more <= limit; more++ {
				r, err := e.send(toolParams("echo", `{"message":"again"}`), sid)
				if err != nil {
					t.Fatal(err)
				}
				if r.Code != 0 {
					if r.Code != -32004 {
						t.Fatalf("refused with %s, want -32004", r.Raw)
					}
					break
				}
			}
			if more != limit-1 {
				t.Errorf("the minted session admitted %d more calls, want %d (the minting call counts in it)", more, limit-1)
			}
			ctx := context.Background()
			exp := e.now.Add(time.Hour)
			// The key's window is a counter; the session's is in its record.
			sKey, tKey := ratelimit.Keys(e.tenant, "key:"+e.keyID, holdServer, "echo", e.now)
			key, tool := sKey, ""
			if tc.perTool > 0 {
				key, tool = tKey, holdServer+"/echo"
			}
			if n, err := peek(ctx, e.st, key, exp); err != nil || n != 1 {
				t.Errorf("window of the key: %d %v, want 1", n, err)
			}
			rec, err := e.st.Session(ctx, e.tenant, sid, e.now, session.Limits{})
			if n := rec.Windows.At(e.now.UTC().Truncate(ratelimit.Window), tool); err != nil || n != limit {
				t.Errorf("window of the minted session: %d %v, want %d", n, err, limit)
			}
			if got := e.up.Calls("echo"); got != limit {
				t.Errorf("upstream ran %d calls, want %d", got, limit)
			}
		})
	}
}

func TestMintingCallCountsInItsSession(t *testing.T) {
	runMinting(t, memStores)
}
