package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/testclock"
	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// env is a whole gateway and admin API over one embedded store, in front
// of the demo MCP server.
type env struct {
	t        *testing.T
	store    *memstore.Store
	up       *demo.Server
	gw, adm  *httptest.Server
	clock    *testclock.Clock
	adminKey string
	keys     map[string]string // caller → tenant key
	notes    *approval.Async
}

const ttl = time.Hour

func newEnv(t *testing.T, webhook string, secrets approval.Resolver) *env {
	t.Helper()
	up, err := demo.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	e := &env{t: t, store: memstore.New(), up: up, clock: testclock.New(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)),
		adminKey: admin.NewKey(), keys: map[string]string{}}
	ctx := context.Background()
	m := e.store
	tenant := registry.Tenant{ID: "acme", Tier: registry.TierFree, Created: e.clock.Now()}
	if webhook != "" {
		tenant.WebhookURL, tenant.WebhookSecretRef = webhook, "env:ACME_WEBHOOK_SECRET"
	}
	must(t, m.PutTenant(ctx, tenant))
	must(t, m.PutServer(ctx, registry.Server{Tenant: "acme", Name: "payments", URL: up.URL, Created: e.clock.Now(),
		Tools: map[string]registry.ToolSettings{"transfer": {RequiresApproval: true}}}))
	for _, caller := range []string{"agent-1", "agent-2"} {
		secret, rec := auth.NewKey("acme", caller, e.clock.Now())
		must(t, m.PutKey(ctx, rec))
		e.keys[caller] = secret
	}
	s := config.Defaults()
	s.LocalMode, s.ApprovalTTL = true, ttl
	// These tests hold calls whose arguments carry members the demo's
	// schema does not declare (a password, to check the approvers' mask);
	// with INPUT_VALIDATION=block the content stage would refuse them before
	// approval, as it should.
	s.InputValidation = "off"
	e.notes = &approval.Async{N: &approval.Webhook{Secrets: secrets, Timeout: 2 * time.Second, Now: e.clock.Now, Local: true}}
	gw, err := gateway.New(m, &gateway.Options{
		Settings: s,
		Now:      e.clock.Now,
		Notifier: e.notes,
	})
	must(t, err)
	adm, err := admin.New(m, &admin.Options{AdminKey: e.adminKey, Catalog: gw.Catalog(),
		LocalMode: true, Now: e.clock.Now})
	must(t, err)
	e.gw, e.adm = httptest.NewServer(gw), httptest.NewServer(adm)
	t.Cleanup(e.gw.Close)
	t.Cleanup(e.adm.Close)
	t.Cleanup(e.notes.Wait)
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// answer is a tools/call answer: a result, or a JSON-RPC error.
type answer struct {
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			ApprovalID string `json:"approval_id"`
			Status     string `json:"status"`
		} `json:"data"`
	} `json:"error"`
}

// call sends tools/call transfer with args (raw JSON) as caller.
func (e *env) call(caller, args string) answer {
	e.t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"transfer","arguments":` + args + `}}`
	req, _ := http.NewRequest(http.MethodPost, e.gw.URL+"/v1/invoke", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.keys[caller])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a answer
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &a) != nil {
		e.t.Fatalf("tools/call: HTTP %d %s", resp.StatusCode, b)
	}
	return a
}

func (e *env) held(a answer, status string) string {
	e.t.Helper()
	// The seed's message, then the next step for the status, then the word.
	if a.Error == nil || a.Error.Code != -32061 || a.Error.Data.Status != status ||
		!strings.HasPrefix(a.Error.Message, "Approval required for transfer on payments; ") || !strings.HasSuffix(a.Error.Message, " (APPROVAL_REQUIRED)") {
		e.t.Fatalf("answer = %+v; want -32061 %q", a, status)
	}
	return a.Error.Data.ApprovalID
}

func (e *env) ran(a answer) {
	e.t.Helper()
	if a.Error != nil || a.Result == nil {
		e.t.Fatalf("answer = %+v; want a result", a)
	}
}

// admin sends an admin request with key ("" = none) and decodes into out.
func (e *env) admin(method, path, key, body string, out any) int {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.adm.URL+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: HTTP %d, unreadable %s", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

func (e *env) decide(id, verb, reason string) (int, admin.ApprovalItem) {
	e.t.Helper()
	var it admin.ApprovalItem
	body, _ := json.Marshal(admin.DecisionRequest{Reason: reason, By: "alice"})
	code := e.admin(http.MethodPost, "/admin/v1/approvals/"+id+"/"+verb, e.adminKey, string(body), &it)
	return code, it
}

func TestLifecycle(t *testing.T) {
	e := newEnv(t, "", nil)
	args := `{"to":"acct-1","amount":5}`

	// Held; the same call (key order and spacing aside) gets the same id.
	id := e.held(e.call("agent-1", args), "pending")
	if id == "" {
		t.Fatal("pending hold without approval_id")
	}
	if again := e.held(e.call("agent-1", ` { "amount" : 5, "to":"acct-1" }`), "pending"); again != id {
		t.Fatalf("repeat got approval %s, want %s", again, id)
	}
	if n := e.up.Calls("transfer"); n != 0 {
		t.Fatalf("upstream ran transfer %d times while held", n)
	}

	// The operator sees it, masked params and all.
	var list admin.ApprovalList
	if code := e.admin(http.MethodGet, "/admin/v1/approvals?status=pending&tenant=acme", e.adminKey, "", &list); code != 200 ||
		len(list.Approvals) != 1 || list.Approvals[0].ID != id {
		t.Fatalf("list = %d %+v", code, list)
	}
	it := list.Approvals[0]
	if it.Tenant != "acme" || it.Caller != "agent-1" || it.Server != "payments" || it.Tool != "transfer" ||
		string(it.Params) != `{"to":"acct-1","amount":5}` || !it.Expires.Equal(it.Created.Add(ttl)) {
		t.Fatalf("listed item = %+v", it)
	}

	e.clock.Advance(time.Minute)
	if code, it := e.decide(id, "approve", "ticket 7"); code != 200 || it.Status != approval.Approved || it.DecidedBy != "alice via admin-key" {
		t.Fatalf("approve = %d %+v", code, it)
	}
	if code, _ := e.decide(id, "deny", ""); code != http.StatusConflict {
		t.Fatalf("deciding again = %d, want 409", code)
	}

	// Nobody else rides on it: another caller, other params.
	if other := e.held(e.call("agent-2", args), "pending"); other == id {
		t.Fatal("another caller rode on the approval")
	}
	if other := e.held(e.call("agent-1", `{"to":"acct-1","amount":6}`), "pending"); other == id {
		t.Fatal("other params rode on the approval")
	}

	// Runs once, verified upstream, then held again.
	e.ran(e.call("agent-1", args))
	if n := e.up.Calls("transfer"); n != 1 {
		t.Fatalf("upstream ran transfer %d times, want 1", n)
	}
	next := e.held(e.call("agent-1", args), "pending")
	if next == id {
		t.Fatal("the used approval was reused")
	}
	if n := e.up.Calls("transfer"); n != 1 {
		t.Fatalf("upstream ran transfer %d times, want still 1", n)
	}
	var got admin.ApprovalItem
	if code := e.admin(http.MethodGet, "/admin/v1/approvals/"+id, e.adminKey, "", &got); code != http.StatusNotFound {
		t.Fatalf("GET superseded approval = %d, want 404", code)
	}

	// Denied.
	if code, it := e.decide(next, "deny", "not today"); code != 200 || it.Status != approval.Denied || it.Reason != "not today" {
		t.Fatalf("deny = %d %+v", code, it)
	}
	if d := e.held(e.call("agent-1", args), "denied"); d != next {
		t.Fatalf("denied call carried approval %s, want %s", d, next)
	}

	// The audit trail holds the hold, both decisions (who and why) and the consumption.
	var page admin.AuditPage
	if code := e.admin(http.MethodGet, "/admin/v1/tenants/acme/audit?limit=1000", e.adminKey, "", &page); code != 200 {
		t.Fatalf("audit = %d", code)
	}
	seen := map[string]string{}
	for _, r := range page.Records {
		if strings.HasPrefix(r.Method, "approval.") {
			seen[r.Method+" "+strings.Fields(r.Detail)[0]] = r.Detail
		}
	}
	for _, want := range []string{
		"approval.held approval_id=" + id, "approval.approved approval_id=" + id, "approval.consumed approval_id=" + id,
		"approval.held approval_id=" + next, "approval.denied approval_id=" + next,
	} {
		if _, ok := seen[want]; !ok {
			t.Errorf("audit trail lacks %q; has %v", want, seen)
		}
	}
	if d := seen["approval.approved approval_id="+id]; !strings.Contains(d, `by="alice via admin-key"`) || !strings.Contains(d, `reason="ticket 7"`) {
		t.Errorf("approval record detail = %q; want who and why", d)
	}
}

func TestExpiry(t *testing.T) {
	e := newEnv(t, "", nil)
	args := `{"to":"acct-9","amount":1}`

	// A denial applies only within the TTL of the first hold.
	id := e.held(e.call("agent-1", args), "pending")
	if code, _ := e.decide(id, "deny", ""); code != 200 {
		t.Fatal(code)
	}
	e.clock.Advance(ttl - time.Second)
	e.held(e.call("agent-1", args), "denied")
	e.clock.Advance(time.Second)
	fresh := e.held(e.call("agent-1", args), "pending")
	if fresh == id {
		t.Fatal("expired denial still in force")
	}

	// An approval too: approved, then unused past the TTL → held afresh, never run.
	if code, _ := e.decide(fresh, "approve", ""); code != 200 {
		t.Fatal(code)
	}
	e.clock.Advance(ttl)
	if again := e.held(e.call("agent-1", args), "pending"); again == fresh {
		t.Fatal("expired approval reused")
	}
	if n := e.up.Calls("transfer"); n != 0 {
		t.Fatalf("upstream ran transfer %d times, want 0", n)
	}

	// An expired pending approval cannot be decided.
	pending := e.held(e.call("agent-2", args), "pending")
	e.clock.Advance(ttl)
	if code, _ := e.decide(pending, "approve", ""); code != http.StatusConflict {
		t.Fatalf("approving an expired approval = %d, want 409", code)
	}
	var list admin.ApprovalList
	e.admin(http.MethodGet, "/admin/v1/approvals?status=expired", e.adminKey, "", &list)
	if len(list.Approvals) == 0 {
		t.Fatal("no expired approvals listed")
	}
}

func TestStoreUnavailableFailsClosed(t *testing.T) {
	e := newEnv(t, "", nil)
	args := `{"to":"acct-1","amount":5}`
	id := e.held(e.call("agent-1", args), "pending")
	if code, _ := e.decide(id, "approve", ""); code != 200 {
		t.Fatal(code)
	}
	e.store.SetApprovalFailure(store.ErrUnavailable)
	a := e.call("agent-1", args)
	if got := e.held(a, "unavailable"); got != "" {
		t.Fatalf("unavailable carried approval_id %q", got)
	}
	if n := e.up.Calls("transfer"); n != 0 {
		t.Fatalf("upstream ran transfer %d times with the store down", n)
	}
	var body admin.ErrorBody
	if code := e.admin(http.MethodGet, "/admin/v1/approvals", e.adminKey, "", &body); code != http.StatusServiceUnavailable || body.Error.Code != admin.CodeUnavailable || body.CorrelationID == "" {
		t.Fatalf("admin list with the store down = %d %+v", code, body)
	}
	e.store.SetApprovalFailure(nil)
	e.ran(e.call("agent-1", args))
}

func TestRaceAfterOneApproval(t *testing.T) {
	e := newEnv(t, "", nil)
	args := `{"to":"acct-race","amount":100}`
	for round := 0; round < 5; round++ {
		id := e.held(e.call("agent-1", args), "pending")
		if code, _ := e.decide(id, "approve", ""); code != 200 {
			t.Fatal(code)
		}
		before := e.up.Calls("transfer")
		const n = 2
		answers := make([]answer, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); answers[i] = e.call("agent-1", args) }()
		}
		wg.Wait()
		ran := 0
		for _, a := range answers {
			if a.Error == nil {
				ran++
			} else {
				e.held(a, "pending")
			}
		}
		if ran != 1 || e.up.Calls("transfer")-before != 1 {
			t.Fatalf("round %d: %d calls answered with a result, upstream ran %d; want exactly 1", round, ran, e.up.Calls("transfer")-before)
		}
		// The loser's fresh hold is the next round's approval.
	}
}

func TestWebhookNotification(t *testing.T) {
	secret := "whsec-test-0123456789"
	got := make(chan *http.Request, 1)
	bodies := make(chan []byte, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}))
	defer hook.Close()
	e := newEnv(t, hook.URL, resolver{"env:ACME_WEBHOOK_SECRET": secret})
	id := e.held(e.call("agent-1", `{"to":"acct-1","amount":5,"password":"hunter2"}`), "pending")
	e.notes.Wait()
	r, b := <-got, <-bodies
	if err := approval.Verify([]byte(secret), r.Header.Get(approval.SignatureHeader), b, e.clock.Now(), 5*time.Minute); err != nil {
		t.Fatalf("signature: %v (header %q)", err, r.Header.Get(approval.SignatureHeader))
	}
	var p approval.Payload
	must(t, json.Unmarshal(b, &p))
	if p.Type != approval.EventHeld || p.Approval.ID != id || p.Approval.Tenant != "acme" || bytes.Contains(b, []byte("hunter2")) {
		t.Fatalf("payload = %s", b)
	}
	// Only the first hold notifies.
	e.held(e.call("agent-1", `{"to":"acct-1","amount":5,"password":"hunter2"}`), "pending")
	e.notes.Wait()
	select {
	case <-got:
		t.Fatal("repeat of a pending call notified again")
	default:
	}
}

func TestFailingWebhookNeverBlocksTheCall(t *testing.T) {
	release := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer hook.Close()
	e := newEnv(t, hook.URL, resolver{"env:ACME_WEBHOOK_SECRET": "s"})
	// The webhook hangs until released; the call is answered anyway.
	e.held(e.call("agent-1", `{"to":"acct-1","amount":5}`), "pending")
	close(release)
	e.notes.Wait()
}

type resolver map[string]string

func (r resolver) Resolve(_ context.Context, ref string) (string, error) {
	if v, ok := r[ref]; ok {
		return v, nil
	}
	return "", store.ErrNotFound
}

var _ audit.Reader = (*memstore.Store)(nil)
