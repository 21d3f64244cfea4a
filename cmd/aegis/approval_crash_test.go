package main

// Issue 11 item 6: the use of an approval is recorded durably before the
// call is sent, so a gateway killed mid-call leaves an approval that an
// operator can see and that never runs the call twice.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
)

// crashUpstream is an MCP upstream with a transfer tool. Its first call
// reads the approval store (probe) as it arrives, reports it on entered and
// holds until its connection goes away; later calls answer at once.
type crashUpstream struct {
	URL     string
	calls   atomic.Int64
	probe   func() (approval.Approval, error)
	entered chan probed
}

type probed struct {
	a   approval.Approval
	err error
}

func startCrashUpstream(t *testing.T) *crashUpstream {
	t.Helper()
	u := &crashUpstream{entered: make(chan probed, 1)}
	s := mcp.NewServer(&mcp.Implementation{Name: "crash-upstream", Version: "1.0.0"}, nil)
	type transferIn struct {
		To     string  `json:"to"`
		Amount float64 `json:"amount"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "transfer", Description: "Moves money (needs approval)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in transferIn) (*mcp.CallToolResult, any, error) {
			if u.calls.Add(1) == 1 {
				a, err := u.probe()
				u.entered <- probed{a, err}
				<-ctx.Done() // the gateway is killed while this call is held
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("moved %g to %s", in.Amount, in.To)}}}, nil, nil
		})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	u.URL = "http://" + ln.Addr().String() + "/mcp"
	return u
}

// heldAnswer is a tools/call answer with the -32061 data.
type heldAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code int `json:"code"`
		Data struct {
			ApprovalID string `json:"approval_id"`
			Status     string `json:"status"`
		} `json:"data"`
	} `json:"error"`
}

// transferCall posts tools/call transfer to base and decodes the answer;
// err is a failure to get one.
func transferCall(client *http.Client, base, key string) (heldAnswer, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"transfer","arguments":{"to":"acct-1","amount":5}}}`
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/invoke", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return heldAnswer{}, err
	}
	defer resp.Body.Close()
	var a heldAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return heldAnswer{}, fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	return a, nil
}

// adminJSON sends an admin API request to base and decodes into out.
func adminJSON(t *testing.T, method, url, key string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: HTTP %d, unreadable: %v", method, url, resp.StatusCode, err)
		}
	}
	return resp.StatusCode
}

// TestApprovalUseSurvivesGatewayKill: `aegis serve --store dynamodb` takes
// an approval and sends the call; the upstream sees the use already stored
// (running, with the call's correlation id) when the call arrives; the
// gateway is killed with SIGKILL while the upstream holds the call. After
// that the approval is still running, visible to operators with the
// correlation id (GET /admin/v1/approvals, status filter running), a
// restarted gateway holds the same call afresh instead of running it again
// (the upstream's count stays 1), and re-approving the new approval runs
// it exactly once more.
func TestApprovalUseSurvivesGatewayKill(t *testing.T) {
	e := dynamotest.Start(t)
	st := e.Store(t, dynamo.Options{})
	up := startCrashUpstream(t)
	var heldID atomic.Value
	up.probe = func() (approval.Approval, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return st.GetApproval(ctx, heldID.Load().(string))
	}

	secret, rec := auth.NewKey("acme", "agent-1", time.Now())
	cfg := filepath.Join(t.TempDir(), "aegis.yaml")
	yaml := fmt.Sprintf(`tenants:
  - id: acme
    tier: growth
    keys:
      - id: %s
        caller: agent-1
        sha256: %s
    servers:
      - name: payments
        url: %s
        tools:
          transfer:
            requires_approval: true
`, rec.ID, rec.Hash, up.URL)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	adminKey := admin.NewKey()
	env := append(dynamoEnv(e), "AEGIS_ADMIN_KEY="+adminKey)
	serveGW := func() *serveProc {
		t.Helper()
		p := startServe(t, env, "--config", cfg, "--store", "dynamodb")
		if !p.running() {
			t.Fatalf("aegis serve exited: %v\n%s", p.err, p.stderr.String())
		}
		return p
	}
	client := &http.Client{Timeout: 60 * time.Second}

	gw := serveGW()
	first, err := transferCall(client, gw.base, secret)
	if err != nil || first.Error == nil || first.Error.Code != -32061 || first.Error.Data.Status != "pending" {
		t.Fatalf("first call = %+v, %v; want -32061 pending", first, err)
	}
	id := first.Error.Data.ApprovalID
	heldID.Store(id)
	var decided admin.ApprovalItem
	if code := adminJSON(t, http.MethodPost, gw.base+"/admin/v1/approvals/"+id+"/approve", adminKey, &decided); code != 200 || decided.Status != approval.Approved {
		t.Fatalf("approve = %d %+v", code, decided)
	}

	// The approved call: the upstream holds it; the gateway is killed.
	answered := make(chan error, 1)
	go func() { _, err := transferCall(client, gw.base, secret); answered <- err }()
	var seen probed
	select {
	case seen = <-up.entered:
	case err := <-answered:
		t.Fatalf("the approved call ended (%v) before reaching the upstream", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the approved call never reached the upstream")
	}
	gw.signal(t, syscall.SIGKILL) // no shutdown, no settling
	gw.wait(t, 30*time.Second)
	if err := <-answered; err == nil {
		t.Fatal("the client got an answer from a killed gateway")
	}

	// Recorded before the upstream received the call.
	if seen.err != nil || seen.a.Status != approval.Running || seen.a.Use == nil || seen.a.Use.CorrelationID == "" || seen.a.Use.Outcome != "" {
		t.Fatalf("store as the upstream received the call: %+v use %+v, %v; want running with the call's correlation id", seen.a, seen.a.Use, seen.err)
	}
	corr := seen.a.Use.CorrelationID
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	after, err := st.GetApproval(ctx, id)
	if err != nil || after.Status != approval.Running || after.Use == nil || after.Use.CorrelationID != corr || after.Use.ID != seen.a.Use.ID {
		t.Fatalf("after the kill: %+v, %v; want still running, taken by %s", after, err, corr)
	}

	// A restarted gateway: the same call is held afresh, not run again.
	gw = serveGW()
	again, err := transferCall(client, gw.base, secret)
	if err != nil || again.Error == nil || again.Error.Code != -32061 || again.Error.Data.Status != "pending" || again.Error.Data.ApprovalID == id {
		t.Fatalf("same call on the restarted gateway = %+v, %v; want -32061 pending under a new approval", again, err)
	}
	next := again.Error.Data.ApprovalID
	if n := up.calls.Load(); n != 1 {
		t.Fatalf("upstream ran transfer %d times, want 1", n)
	}

	// Operators see it: running (unsettled once its lease passes), with the
	// correlation id of the call that took it, beside the new hold.
	var list admin.ApprovalList
	if code := adminJSON(t, http.MethodGet, gw.base+"/admin/v1/approvals?tenant=acme&status=running", adminKey, &list); code != 200 ||
		len(list.Approvals) != 1 || list.Approvals[0].ID != id || list.Approvals[0].Use == nil || list.Approvals[0].Use.CorrelationID != corr {
		t.Fatalf("running approvals = %d %+v; want %s taken by %s", code, list, id, corr)
	}
	if lease := list.Approvals[0].Use.LeaseUntil; !lease.After(list.Approvals[0].Use.Started) {
		t.Fatalf("lease %v not after the start %v", lease, list.Approvals[0].Use.Started)
	}
	list = admin.ApprovalList{}
	if code := adminJSON(t, http.MethodGet, gw.base+"/admin/v1/approvals?tenant=acme", adminKey, &list); code != 200 || len(list.Approvals) != 2 {
		t.Fatalf("approvals = %d %+v; want the one in use and the new hold", code, list)
	}
	// The audit trail has the consumption, by the same call.
	var page admin.AuditPage
	if code := adminJSON(t, http.MethodGet, gw.base+"/admin/v1/tenants/acme/audit?limit=1000", adminKey, &page); code != 200 {
		t.Fatalf("audit = %d", code)
	}
	consumed := false
	for _, r := range page.Records {
		consumed = consumed || r.Method == approval.EventConsumed && r.Detail == "approval_id="+id && r.CorrelationID == corr
	}
	if !consumed {
		t.Fatalf("audit lacks approval.consumed of %s by %s: %+v", id, corr, page.Records)
	}

	// Re-approving is approving the new hold: the call runs once more, and
	// the one in use stays as it was.
	if code := adminJSON(t, http.MethodPost, gw.base+"/admin/v1/approvals/"+next+"/approve", adminKey, &decided); code != 200 {
		t.Fatalf("approve %s = %d", next, code)
	}
	ran, err := transferCall(client, gw.base, secret)
	if err != nil || ran.Error != nil || len(ran.Result) == 0 {
		t.Fatalf("re-approved call = %+v, %v; want a result", ran, err)
	}
	if after, err := transferCall(client, gw.base, secret); err != nil || after.Error == nil || after.Error.Code != -32061 {
		t.Fatalf("call after the re-approved one = %+v, %v; want it held", after, err)
	}
	if n := up.calls.Load(); n != 2 {
		t.Fatalf("upstream ran transfer %d times, want 2 (the killed call, the re-approved one)", n)
	}
	if a, err := st.GetApproval(ctx, id); err != nil || a.Status != approval.Running || a.Use.CorrelationID != corr {
		t.Fatalf("the killed call's approval = %+v, %v; want still running", a, err)
	}
}
