package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/refusal"
)

type msgCheck struct {
	err error
}

func (m msgCheck) CheckMessage(_ context.Context, _ *Call, msg *json.RawMessage) error {
	*msg = json.RawMessage(`{"masked":true}`)
	return m.err
}

// TestRunMessage: the ingress slot's check runs over a relayed call's
// message (it may rewrite it), not over a request's; a refusal stops it;
// a check that cannot decide fails closed; a stage with both a result and
// a message check is refused by New.
func TestRunMessage(t *testing.T) {
	st := table(nil, nil)
	st[len(st)-1].Scope = Relayed
	st[len(st)-1].Message = msgCheck{}
	p, err := New(st, quiet)
	if err != nil {
		t.Fatal(err)
	}
	msg := json.RawMessage(`{"jsonrpc":"2.0","method":"notifications/message"}`)
	if err := p.RunMessage(context.Background(), &Call{Method: "tools/call"}, &msg); err != nil || string(msg) != `{"jsonrpc":"2.0","method":"notifications/message"}` {
		t.Fatalf("a request's scope ran the ingress check: %v %s", err, msg)
	}
	if err := p.RunMessage(context.Background(), &Call{Method: "notifications/message", Relayed: true}, &msg); err != nil || string(msg) != `{"masked":true}` {
		t.Fatalf("RunMessage = %v %s, want the rewritten message", err, msg)
	}
	st[len(st)-1].Message = msgCheck{err: refusal.Injection("result", []string{"x"})}
	p, _ = New(st, quiet)
	c := &Call{Method: "sampling/createMessage", Relayed: true}
	var ref *refusal.Refusal
	if err := p.RunMessage(context.Background(), c, &msg); !errors.As(err, &ref) || c.RefusedBy != Ingress {
		t.Fatalf("RunMessage = %v (by %v), want the refusal by ingress", err, c.RefusedBy)
	}
	st[len(st)-1].Message = msgCheck{err: errors.New("cannot decide")}
	p, _ = New(st, quiet)
	if err := p.RunMessage(context.Background(), &Call{Method: "x", Relayed: true}, &msg); !errors.As(err, &ref) || ref.Code != refusal.CodeInternal {
		t.Fatalf("RunMessage = %v, want -32603 (fails closed)", err)
	}
	st[len(st)-1].Result = resultCheckNop{}
	if _, err := New(st, quiet); err == nil {
		t.Fatal("New took a stage with a result and a message check")
	}
}

type resultCheckNop struct{}

func (resultCheckNop) CheckResult(context.Context, *Call, *jsonrpc.Response) error { return nil }

// TestScopeOfFollowsTheTable: every client request row's scope is
// ScopeOf's; a method without a row runs under InSession; relayed calls
// run under Relayed, a client's answer under Answered.
func TestScopeOfFollowsTheTable(t *testing.T) {
	for _, m := range Messages {
		if m.Kind == ClientRequest && ScopeOf(m.Method) != m.Scope {
			t.Errorf("ScopeOf(%s) = %v, row says %v", m.Method, ScopeOf(m.Method), m.Scope)
		}
	}
	if ScopeOf("no/such") != InSession {
		t.Error("a method without a row does not run under InSession")
	}
	if s := (&Call{Method: ResponseMethod, Relayed: true}).scope(); s != Answered {
		t.Errorf("a client's answer runs under %v", s)
	}
	if s := (&Call{Method: "elicitation/create", Relayed: true}).scope(); s != Relayed {
		t.Errorf("a server's request runs under %v", s)
	}
}
