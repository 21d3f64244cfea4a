package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/testclock"
	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// records is an audit.Writer that keeps what it is given.
type records struct {
	mu  sync.Mutex
	got []audit.Record
}

func (r *records) Write(_ context.Context, rec audit.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rec)
	return nil
}

// approvalEvents lists "method detail" of the approval records.
func (r *records) approvalEvents() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.got {
		if strings.HasPrefix(rec.Method, "approval.") {
			out = append(out, rec.Method+" "+rec.Detail)
		}
	}
	return out
}

// durable is one approval check (a gateway) over a shared store.
type durable struct {
	t     *testing.T
	st    *memstore.Store
	clock *testclock.Clock
	audit *records
	lease time.Duration
	n     int
}

func newDurable(t *testing.T) *durable {
	return &durable{t: t, st: memstore.New(), clock: testclock.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)),
		audit: &records{}, lease: 2 * time.Minute}
}

// gateway is a fresh check over d's store: what a restarted gateway runs.
func (d *durable) gateway() *approval.Check {
	return approval.New(d.st, approval.Options{Now: d.clock.Now, Lease: d.lease, Audit: d.audit, ParamsKey: testParamsKey(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func (d *durable) call() *pipeline.Call {
	d.n++
	return &pipeline.Call{
		Tenant: registry.Tenant{ID: "acme"}, Caller: "agent", Method: "tools/call", CorrelationID: fmt.Sprintf("corr-%d", d.n),
		ID: json.RawMessage(`1`), Params: json.RawMessage(`{"name":"transfer","arguments":{"amount":5}}`),
		Tool: "transfer", UpstreamTool: "transfer", Server: &registry.Server{Tenant: "acme", Name: "payments"}, Inline: true,
		Settings: registry.ToolSettings{RequiresApproval: true},
	}
}

// held runs c through k and wants -32061 pending: the approval id.
func (d *durable) held(k *approval.Check, c *pipeline.Call) string {
	d.t.Helper()
	var ref *refusal.Refusal
	if err := k.Check(context.Background(), c); !errors.As(err, &ref) || ref.Code != refusal.CodeApprovalRequired || ref.Fields["status"] != refusal.ApprovalPending {
		d.t.Fatalf("want -32061 pending, got %v", err)
	}
	id, _ := ref.Fields["approval_id"].(string)
	return id
}

// approvedOne holds the call and approves it: its id.
func (d *durable) approvedOne(k *approval.Check) string {
	d.t.Helper()
	id := d.held(k, d.call())
	if _, err := d.st.DecideApproval(context.Background(), id, approval.Decision{Status: approval.Approved, By: "alice"}, d.clock.Now()); err != nil {
		d.t.Fatal(err)
	}
	return id
}

func (d *durable) get(id string) approval.Approval {
	d.t.Helper()
	a, err := d.st.GetApproval(context.Background(), id)
	if err != nil {
		d.t.Fatalf("GetApproval(%s): %v", id, err)
	}
	return a
}

// The use of an approval is stored before the call can be sent (the check
// returns only after the store holds it running, with the call's
// correlation id and a lease) and settled with the call's outcome.
func TestUseRecordedBeforeSendAndSettledAfter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ended audit.Outcome
		want  approval.Outcome
	}{
		{"answered", audit.OutcomeAllowed, approval.Answered},
		{"upstream error", audit.OutcomeError, approval.Failed},
		{"timed out", audit.OutcomeIndeterminate, approval.Indeterminate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDurable(t)
			k := d.gateway()
			id := d.approvedOne(k)
			c := d.call()
			taken := d.clock.Now()
			if err := k.Check(context.Background(), c); err != nil {
				t.Fatalf("approved call refused: %v", err)
			}
			// Between the check and the send: durably in use.
			a := d.get(id)
			if a.Status != approval.Running || a.Use == nil || a.Use.ID == "" || a.Use.CorrelationID != c.CorrelationID ||
				!a.Use.Started.Equal(taken) || !a.Use.LeaseUntil.Equal(taken.Add(d.lease)) || a.Use.Outcome != "" {
				t.Fatalf("before the send: %+v use %+v; want running with the call's correlation id and a lease", a, a.Use)
			}
			if got := a.Shown(d.clock.Now()); got != approval.Running {
				t.Fatalf("shown %s, want running", got)
			}
			d.clock.Advance(time.Second)
			c.Finish(tc.ended)
			a = d.get(id)
			if a.Status != approval.Consumed || a.Use == nil || a.Use.Outcome != tc.want || !a.Use.SettledAt.Equal(d.clock.Now()) ||
				a.Use.CorrelationID != c.CorrelationID {
				t.Fatalf("after the call: %+v use %+v; want consumed, %s", a, a.Use, tc.want)
			}
			want := []string{
				"approval.held approval_id=" + id,
				"approval.consumed approval_id=" + id,
				"approval.settled approval_id=" + id + " outcome=" + string(tc.want),
			}
			if got := d.audit.approvalEvents(); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("audit:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			// The next identical call is held afresh.
			if next := d.held(k, d.call()); next == id {
				t.Fatal("the used approval was reused")
			}
		})
	}
}

// A gateway that dies between taking the approval and settling it leaves
// it running. Nothing makes it approved again: the same call on a
// restarted gateway, now or after the TTL, is held afresh and never runs
// on it; operators see it (listed, unsettled after its lease, with the
// correlation id of the call that took it) until its call is settled.
func TestUseLeftByACrashNeverRunsAgain(t *testing.T) {
	d := newDurable(t)
	id := d.approvedOne(d.gateway())
	crashed := d.call()
	if err := d.gateway().Check(context.Background(), crashed); err != nil {
		t.Fatalf("approved call refused: %v", err)
	}
	// The gateway dies: crashed.Finish never runs.

	restarted := d.gateway()
	next := d.held(restarted, d.call())
	if next == id {
		t.Fatal("a restarted gateway answered with the approval in use")
	}
	for _, wait := range []time.Duration{0, d.lease, 2 * time.Hour} {
		d.clock.Advance(wait)
		a := d.get(id)
		if a.Status != approval.Running || a.Use.CorrelationID != crashed.CorrelationID {
			t.Fatalf("after %v: %+v; want running, taken by %s", wait, a, crashed.CorrelationID)
		}
		wantShown := approval.Running
		if d.clock.Now().Sub(a.Use.Started) >= d.lease {
			wantShown = approval.Unsettled
		}
		if got := a.Shown(d.clock.Now()); got != wantShown {
			t.Fatalf("after %v: shown %s, want %s", wait, got, wantShown)
		}
		list, err := d.st.ListApprovals(context.Background(), approval.Filter{Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, l := range list {
			found = found || l.ID == id && l.Status == approval.Running
		}
		if !found {
			t.Fatalf("after %v: the approval in use is not listed: %+v", wait, list)
		}
		// The same call again is held (never run on the one in use).
		c := d.call()
		var ref *refusal.Refusal
		if err := restarted.Check(context.Background(), c); !errors.As(err, &ref) || ref.Fields["approval_id"] == id {
			t.Fatalf("after %v: the same call = %v; want it held under another approval", wait, err)
		}
	}
	// Its record in the audit trail was written before the send, too.
	if ev := d.audit.approvalEvents(); len(ev) < 2 || ev[1] != "approval.consumed approval_id="+id {
		t.Fatalf("audit %q; want the consumption recorded", ev)
	}
}

// A call refused after the approval check gives the approval back; if a
// new hold superseded it meanwhile it cannot come back, and its use is
// settled as not sent (no longer listed), never left running.
func TestRefusedAfterSupersedeSettlesNotSent(t *testing.T) {
	d := newDurable(t)
	k := d.gateway()
	id := d.approvedOne(k)
	c := d.call()
	if err := k.Check(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	next := d.held(k, d.call()) // an identical call while it is in use
	c.Finish(audit.OutcomeRefused)
	if _, err := d.st.GetApproval(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetApproval(settled, superseded) = %v, want ErrNotFound", err)
	}
	if a := d.get(next); a.Status != approval.Pending {
		t.Fatalf("the new approval = %s, want pending", a.Status)
	}
	ev := d.audit.approvalEvents()
	if last := ev[len(ev)-1]; last != "approval.settled approval_id="+id+" outcome=not_sent" {
		t.Fatalf("last audit event %q; want the use settled as not sent", last)
	}
}

// When the store cannot settle the use, it stays running (shown unsettled
// after its lease), the safe side: never approved again.
func TestUnsettledWhenTheStoreIsAway(t *testing.T) {
	d := newDurable(t)
	k := d.gateway()
	id := d.approvedOne(k)
	c := d.call()
	if err := k.Check(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	d.st.SetApprovalFailure(store.ErrUnavailable)
	c.Finish(audit.OutcomeAllowed)
	d.st.SetApprovalFailure(nil)
	d.clock.Advance(d.lease)
	if a := d.get(id); a.Status != approval.Running || a.Shown(d.clock.Now()) != approval.Unsettled {
		t.Fatalf("%+v; want running, shown unsettled", a)
	}
	if next := d.held(k, d.call()); next == id {
		t.Fatal("an unsettled approval was used again")
	}
}

// testParamsKey is the deployment's params key in these tests: the same
// for every check, as for every gateway of one deployment.
func testParamsKey() audit.ParamsKey {
	k, err := audit.NewParamsKey([]byte("approval-tests-params-key-32byte"))
	if err != nil {
		panic(err)
	}
	return k
}
