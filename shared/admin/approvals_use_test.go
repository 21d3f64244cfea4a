package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/approval"
)

// An approval taken by a gateway that died before settling it is listed
// as running, then, past its lease, as unsettled, with the correlation id
// of the call that took it; the list filter accepts both. It can no longer
// be decided, and the same call is held afresh: re-approving is approving
// that new one, which runs once.
func TestListShowsApprovalsInUse(t *testing.T) {
	e := newEnv(t, "", nil)
	ctx := context.Background()
	args := `{"to":"acct-1","amount":5}`
	id := e.held(e.call("agent-1", args), "pending")
	if code, _ := e.decide(id, "approve", ""); code != 200 {
		t.Fatal(code)
	}
	// A gateway takes it (what it stores before the send), then dies.
	a, err := e.store.GetApproval(ctx, id)
	must(t, err)
	now := e.clock.Now()
	u := approval.Use{ID: approval.NewID(), CorrelationID: "corr-crashed", Started: now, LeaseUntil: now.Add(time.Minute)}
	_, err = e.store.ConsumeApproval(ctx, a, u, now)
	must(t, err)

	list := func(status string) []admin.ApprovalItem {
		t.Helper()
		var l admin.ApprovalList
		if code := e.admin(http.MethodGet, "/admin/v1/approvals?tenant=acme&status="+status, e.adminKey, "", &l); code != 200 {
			t.Fatalf("list status=%s: HTTP %d", status, code)
		}
		return l.Approvals
	}
	one := func(what string, items []admin.ApprovalItem, want approval.Status) admin.ApprovalItem {
		t.Helper()
		if len(items) != 1 || items[0].ID != id || items[0].Status != want || items[0].Use == nil ||
			items[0].Use.CorrelationID != "corr-crashed" || !items[0].Use.LeaseUntil.Equal(u.LeaseUntil) || items[0].Use.Outcome != "" {
			t.Fatalf("%s = %+v; want %s %s taken by corr-crashed", what, items, id, want)
		}
		return items[0]
	}
	one("running", list("running"), approval.Running)
	if got := list("unsettled"); len(got) != 0 {
		t.Fatalf("unsettled within the lease = %+v", got)
	}

	// The same call, a moment later: held afresh, never run on the one in use.
	e.clock.Advance(time.Second)
	next := e.held(e.call("agent-1", args), "pending")
	if next == id || e.up.Calls("transfer") != 0 {
		t.Fatalf("same call: approval %s (in use: %s), upstream ran %d", next, id, e.up.Calls("transfer"))
	}

	e.clock.Advance(time.Minute)
	one("unsettled", list("unsettled"), approval.Unsettled)
	if got := list("running"); len(got) != 0 {
		t.Fatalf("running past the lease = %+v", got)
	}
	if all := list(""); len(all) != 2 || all[0].ID != id || all[1].ID != next || all[1].Status != approval.Pending {
		t.Fatalf("list = %+v; want the unsettled one, then the new hold", all)
	}
	var got admin.ApprovalItem
	if code := e.admin(http.MethodGet, "/admin/v1/approvals/"+id, e.adminKey, "", &got); code != 200 {
		t.Fatalf("GET unsettled = %d", code)
	}
	one("GET", []admin.ApprovalItem{got}, approval.Unsettled)
	var body admin.ErrorBody
	if code := e.admin(http.MethodPost, "/admin/v1/approvals/"+id+"/approve", e.adminKey, "", &body); code != http.StatusConflict ||
		!strings.Contains(body.Error.Message, "unsettled") {
		t.Fatalf("approving an unsettled approval = %d %+v; want 409 naming it unsettled", code, body)
	}
	// Past the TTL it still shows unsettled, never expired or approved.
	e.clock.Advance(ttl)
	one("unsettled after the TTL", list("unsettled"), approval.Unsettled)

	if code := e.admin(http.MethodGet, "/admin/v1/approvals?status=bogus", e.adminKey, "", &body); code != http.StatusBadRequest ||
		!strings.Contains(body.Error.Message, "running") || !strings.Contains(body.Error.Message, "unsettled") {
		t.Fatalf("bad status = %d %+v; want 400 naming running and unsettled", code, body)
	}
}

// A call that runs on an approval settles it: listed consumed, with the
// outcome and the correlation id of the call.
func TestListShowsSettledUse(t *testing.T) {
	e := newEnv(t, "", nil)
	args := `{"to":"acct-2","amount":5}`
	id := e.held(e.call("agent-1", args), "pending")
	if code, _ := e.decide(id, "approve", ""); code != 200 {
		t.Fatal(code)
	}
	e.ran(e.call("agent-1", args))
	// The use is settled as the call ends; the answer may arrive first.
	var it admin.ApprovalItem
	for range 1000 {
		if code := e.admin(http.MethodGet, "/admin/v1/approvals/"+id, e.adminKey, "", &it); code != 200 {
			t.Fatalf("GET = %d", code)
		}
		if it.Status != approval.Running {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if it.Status != approval.Consumed || it.Use == nil || it.Use.Outcome != approval.Answered || it.Use.CorrelationID == "" || it.Use.SettledAt.IsZero() {
		t.Fatalf("after the call = %+v use %+v; want consumed, answered", it, it.Use)
	}
	var l admin.ApprovalList
	if code := e.admin(http.MethodGet, "/admin/v1/approvals?status=consumed", e.adminKey, "", &l); code != 200 || len(l.Approvals) != 1 || l.Approvals[0].ID != id {
		t.Fatalf("consumed list = %d %+v", code, l)
	}
}
