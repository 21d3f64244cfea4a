package gateway

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/registry"
)

// TestElicitationsBounds: the elicitations remembered are bounded per
// session and in all, forgotten when their link expires; a completion
// reaches only the GET streams of the session, caller and tenant that
// was asked, waits for that session's next stream when it has none open,
// and is sent once.
func TestElicitationsBounds(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	call := func(tenant, caller, session string) *pipeline.Call {
		return &pipeline.Call{Tenant: registry.Tenant{ID: tenant}, Caller: caller, SessionID: session}
	}
	listener := func(e *elicitations, c *pipeline.Call) (*httptest.ResponseRecorder, func()) {
		rec := httptest.NewRecorder()
		out := newStream(rec)
		out.Begin()
		return rec, e.listen(c, out, now)
	}
	done := func(tenant, caller, id string) *connect.Completed {
		return &connect.Completed{Tenant: tenant, Caller: caller, Server: "docs", ElicitationID: id}
	}

	t.Run("bounds and expiry", func(t *testing.T) {
		var e elicitations
		a := call("acme", "alice", "s1")
		for i := range MaxElicitationsPerSession {
			if !e.ask(a, fmt.Sprint("e", i), now) {
				t.Fatalf("elicitation %d not remembered", i)
			}
		}
		if e.ask(a, "one-more", now) || e.ask(a, "e0", now) {
			t.Fatal("more than MaxElicitationsPerSession remembered for one session, or one id twice")
		}
		if e.ask(&pipeline.Call{Tenant: registry.Tenant{ID: "acme"}, Caller: "alice", SessionID: "s2", Stateless: true}, "x", now) || e.ask(call("acme", "alice", ""), "y", now) {
			t.Fatal("an elicitation remembered for a call without a session")
		}
		big := call("acme", "alice", strings.Repeat("s", MaxElicitationBytes))
		if e.ask(big, "z", now) {
			t.Fatal("an elicitation past MaxElicitationBytes remembered")
		}
		later := now.Add(connect.PendingTTL)
		if !e.ask(a, "b", later) || len(e.byID) != 1 || len(e.bySession) != 1 { // a's bound reached: the expired go
			t.Fatalf("the expired elicitations are still held: %d", len(e.byID))
		}
		for i := 0; len(e.byID) < MaxElicitations; i++ {
			if !e.ask(call("acme", "bob", fmt.Sprint("t", i)), fmt.Sprint("f", i), later) {
				t.Fatalf("elicitation %d of %d refused", len(e.byID), MaxElicitations)
			}
		}
		if e.ask(call("acme", "carol", "c"), "over", later) {
			t.Fatal("more than MaxElicitations remembered")
		}
		if e.complete(done("acme", "alice", "b"), later.Add(connect.PendingTTL)) != 0 || len(e.byID) != MaxElicitations-1 {
			t.Fatal("an expired elicitation was completed")
		}
	})

	t.Run("only the session asked", func(t *testing.T) {
		var e elicitations
		a := call("acme", "alice", "s1")
		recA, stopA := listener(&e, a)
		defer stopA()
		others := map[string]*httptest.ResponseRecorder{}
		for name, c := range map[string]*pipeline.Call{
			"other session": call("acme", "alice", "s2"), "other caller": call("acme", "bob", "s1"), "other tenant": call("other", "alice", "s1"),
		} {
			rec, stop := listener(&e, c)
			defer stop()
			others[name] = rec
		}
		e.ask(a, "id-a", now)
		if e.complete(done("other", "alice", "id-a"), now) != 0 || e.complete(done("acme", "bob", "id-a"), now) != 0 {
			t.Fatal("a completion of another tenant or caller was sent")
		}
		e.ask(a, "id-a", now) // forgotten by the forged completions: asked again
		if n := e.complete(done("acme", "alice", "id-a"), now); n != 1 || !strings.Contains(recA.Body.String(), `"method":"notifications/elicitation/complete","params":{"elicitationId":"id-a"}`) {
			t.Fatalf("sent on %d streams; session A's stream: %q", n, recA.Body.String())
		}
		if e.complete(done("acme", "alice", "id-a"), now) != 0 {
			t.Fatal("one completion sent twice")
		}
		for name, rec := range others {
			if strings.Contains(rec.Body.String(), "elicitation") {
				t.Fatalf("the %s was told: %q", name, rec.Body.String())
			}
		}
	})

	t.Run("waits for the next stream", func(t *testing.T) {
		var e elicitations
		a := call("acme", "alice", "s1")
		e.ask(a, "id-a", now)
		if e.complete(done("acme", "alice", "id-a"), now) != 0 {
			t.Fatal("sent with no stream open")
		}
		recB, stopB := listener(&e, call("acme", "alice", "s2"))
		defer stopB()
		recA, stopA := listener(&e, a)
		defer stopA()
		if !strings.Contains(recA.Body.String(), `"elicitationId":"id-a"`) || strings.Contains(recB.Body.String(), "elicitation") || len(e.byID) != 0 {
			t.Fatalf("A's next stream %q, another session's %q, held %d", recA.Body.String(), recB.Body.String(), len(e.byID))
		}
	})
}
