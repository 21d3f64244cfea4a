package policy

import (
	"context"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/refusal"
)

// fixed is a Decider that returns one verdict, a fake for composition tests.
type fixed Verdict

func (f fixed) Decide(context.Context, *Request) Verdict { return Verdict(f) }

// t0 is the injected clock of every test.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func toolCall(server, tool string) *Request {
	return &Request{
		Method: MethodToolsCall, Tenant: "t1", Server: server, Tool: tool,
		Caller:  Caller{ID: "alice", KeyID: "k1", Roles: []string{"ops"}},
		Session: Session{ID: "s1", Started: t0},
		Now:     t0,
	}
}

func TestVerdictActions(t *testing.T) {
	tests := []struct {
		name                   string
		v                      Verdict
		forward, held, refused bool
		code                   refusal.Code
	}{
		{"allow", allow("r"), true, false, false, 0},
		{"approval", approval("r"), false, true, false, 0},
		{"deny", denied(ReasonForbid, "r"), false, false, true, refusal.CodePolicyDenied},
		{"capability", capability(ReasonIdle, "manifest:idle"), false, false, true, refusal.CodeCapabilityDenied},
		{"audit deny forwards", Verdict{Code: refusal.CodePolicyDenied, Word: refusal.PolicyDenied, Audit: true}, true, false, false, 0},
		{"audit approval forwards", Verdict{Allow: true, RequireApproval: true, Audit: true}, true, false, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.v.Forward(); got != tt.forward {
				t.Errorf("Forward() = %v, want %v", got, tt.forward)
			}
			if got := tt.v.Held(); got != tt.held {
				t.Errorf("Held() = %v, want %v", got, tt.held)
			}
			if got := tt.v.Refused(); got != tt.refused {
				t.Errorf("Refused() = %v, want %v", got, tt.refused)
			}
			r := tt.v.Refusal()
			if (r != nil) != tt.refused {
				t.Fatalf("Refusal() = %v, want one: %v", r, tt.refused)
			}
			if r != nil && r.Code != tt.code {
				t.Errorf("Refusal().Code = %d, want %d", r.Code, tt.code)
			}
		})
	}
	if got := capability(ReasonToolCalls, "x").Refusal().Message; got != "Outside the session's grant: tool_calls" {
		t.Errorf("-32005 message = %q", got)
	}
}

func TestDenyAllIsNotARuleDenial(t *testing.T) {
	v := DenyAll{}.Decide(context.Background(), toolCall("mock", "echo"))
	want := Verdict{Code: refusal.CodePolicyDenied, Word: refusal.PolicyDenied, Reason: ReasonNotLoaded, Rule: RuleNotLoaded}
	if v != want {
		t.Fatalf("DenyAll = %+v, want %+v", v, want)
	}
	if v := (DenyAll{Reason: "tenant store unreachable"}).Decide(context.Background(), toolCall("m", "t")); v.Reason != "tenant store unreachable" || v.Rule != RuleNotLoaded {
		t.Fatalf("DenyAll with reason = %+v", v)
	}
	if v := (AllowAll{}).Decide(context.Background(), toolCall("m", "t")); !v.Allow || v.RequireApproval {
		t.Fatalf("AllowAll = %+v", v)
	}
}

func TestPolicyDeciderStrictest(t *testing.T) {
	a, ap, d := fixed(allow("A")), fixed(approval("AP")), fixed(denied(ReasonForbid, "D"))
	abstain := fixed(allow(""))
	tests := []struct {
		name   string
		layers []Decider
		want   Verdict
	}{
		{"no layers allows", nil, allow("")},
		{"allow", []Decider{a}, allow("A")},
		{"deny beats allow", []Decider{a, d}, denied(ReasonForbid, "D")},
		{"deny beats approval", []Decider{ap, d}, denied(ReasonForbid, "D")},
		{"approval beats allow", []Decider{a, ap}, approval("AP")},
		{"approval beats allow, either order", []Decider{ap, a}, approval("AP")},
		{"first deny wins", []Decider{d, fixed(denied(ReasonNoPermit, "D2"))}, denied(ReasonForbid, "D")},
		{"an abstaining layer names no rule", []Decider{abstain, a}, allow("A")},
		{"nil layers skipped", []Decider{nil, d}, denied(ReasonForbid, "D")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewPolicyDecider(tt.layers...).Decide(context.Background(), toolCall("m", "t")); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestUndecidableMethodsRefused(t *testing.T) {
	for _, m := range []string{"tools/list", "initialize", "", "resources/subscribe"} {
		req := toolCall("m", "t")
		req.Method = m
		for name, d := range map[string]Decider{"policy": NewPolicyDecider(), "gate": NewManifestGate(nil, nil)} {
			if v := d.Decide(context.Background(), req); !v.Refused() || v.Rule != RuleUndecidable {
				t.Errorf("%s.Decide(%q) = %+v, want refused %s", name, m, v, RuleUndecidable)
			}
		}
	}
	for _, m := range []string{MethodToolsCall, MethodResource, MethodPrompt, MethodCompletion} {
		if !Decidable(m) {
			t.Errorf("Decidable(%q) = false", m)
		}
	}
}
