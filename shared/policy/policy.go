// Package policy is aegis's one decision seam (design §7, seed 002): every
// decidable request (tools/call, resources/read, prompts/get,
// completion/complete) is put to a Decider, at the gateway and in
// `aegis wrap`, and tools/list is filtered by the same decision (Visible).
//
// The pieces compose; Build assembles them for a tenant from its Set:
//
//	ManifestGate            session bounds: clocks, grants, budgets (-32005); never in audit mode
//	  └ audit (Mode Audit)  the intended verdict, marked Audit: the caller forwards and records it
//	      └ PolicyDecider   the strictest verdict of the rule layers (-32003):
//	          ├ roles       the tenant's roles (absent when it defines none)
//	          └ Cedar       the tenant's cedar_policies (absent when it has none)
//
// DenyAll is installed while a tenant's set is not loaded (fail closed);
// AllowAll is the inner decider when there are no rule layers.
//
// Every error is found when a Set is validated or built; Decide cannot
// fail. A Decider built here is immutable and safe for concurrent use.
// docs/policy.md is the user's description of the rules and the Cedar
// entity model.
package policy

import (
	"context"
	"encoding/json"
	"time"

	"github.com/aegis-gw/aegis/shared/refusal"
)

// The decidable methods: the only ones a Decider is asked about.
const (
	MethodToolsCall  = "tools/call"
	MethodResource   = "resources/read"
	MethodPrompt     = "prompts/get"
	MethodCompletion = "completion/complete"
)

// Decidable reports whether method is one a Decider decides. Every other
// method (initialize, the lists, notifications) is not put to it; the
// deciders of this package except AllowAll refuse one that is, with -32003
// and Rule RuleUndecidable.
func Decidable(method string) bool {
	switch method {
	case MethodToolsCall, MethodResource, MethodPrompt, MethodCompletion:
		return true
	}
	return false
}

// Decider reaches a verdict on one decidable request. Decide must not
// fail: a decider whose rules could fail is built so that every failure is
// found at load time, and what remains is decided (fail closed).
// Implementations are safe for concurrent use.
type Decider interface {
	Decide(ctx context.Context, req *Request) Verdict
}

// Request is one decidable request, as the deciders see it. The caller
// fills it in from the routed call; the deciders only read it.
type Request struct {
	Method string // one of the decidable methods
	Tenant string
	Caller Caller

	// Server is the upstream server's name. Tool (tools/call), Prompt
	// (prompts/get) and ResourceURI (resources/read) name the object on
	// it, upstream names; completion/complete sets Prompt or ResourceURI
	// from its ref.
	Server      string
	Tool        string
	Prompt      string
	ResourceURI string

	// Annotations are the tool's annotations as its server lists them
	// (readOnlyHint, destructiveHint, ...): a JSON object, or nil.
	Annotations json.RawMessage

	// Arguments are the call's arguments, exact bytes (a JSON object, or
	// nil). Cedar sees them bounded (MaxArgumentBytes, MaxArgumentDepth).
	Arguments json.RawMessage

	Session Session

	// Bounds narrow the tenant's manifest for this call: Merge of the
	// API key's and the session's manifests (nil: none). They can only
	// narrow, never widen.
	Bounds *Bounds

	// Now is the decision's clock, injected by the caller: the session
	// clocks are measured to it and Cedar sees it as context.now.
	Now time.Time

	// Listing asks whether the request could be allowed, for a list
	// (Visible sets it): what a call alone carries (its arguments, its
	// declared step) is unknown, and every decider here answers allowed
	// when some value of it would be. A decider that ignores Listing
	// decides the request as if it had no arguments and no step.
	Listing bool
}

// Caller is who is calling: the authenticated caller, its API key and the
// roles the key carries, or, for a caller with an OAuth token, the roles
// and the claims (a JSON object; nil with an API key) the token carries.
type Caller struct {
	ID     string
	KeyID  string
	Roles  []string
	Claims json.RawMessage
}

// Session holds the facts of the call's session that the gate bounds.
// The session store keeps them; Count updates them for a forwarded call.
type Session struct {
	ID string
	// Started is when the session was minted; the lifetime clock runs
	// from it.
	Started time.Time
	// LastAllowed is when the last call the whole chain allowed was
	// forwarded (zero: none yet, the idle clock runs from Started).
	LastAllowed time.Time
	// ToolCalls counts the tools/call requests forwarded so far.
	ToolCalls int
	// Steps are the distinct steps declared by forwarded calls so far.
	Steps []int64
	// Step is this request's declared step (_meta["aegis/step"], see
	// ParseStep).
	Step Step
}

// Step is a declared step: N when Declared. A client that declares none
// is bounded by max_tool_calls only (seed 003: a count of calls is not a
// count of steps).
type Step struct {
	N        int64
	Declared bool
}

// Age is how long the session has lived at now.
func (s *Session) Age(now time.Time) time.Duration { return now.Sub(s.Started) }

// Idle is how long the session has been idle at now: since the last
// allowed call, or since Started when there was none.
func (s *Session) Idle(now time.Time) time.Duration {
	if s.LastAllowed.IsZero() {
		return now.Sub(s.Started)
	}
	return now.Sub(s.LastAllowed)
}

// Count records req, a call the whole chain allowed and the caller
// forwarded: it touches the idle clock (LastAllowed = req.Now), counts a
// tools/call and adds its declared step to Steps. Calling it is the
// caller's job, and only for such calls: a refused call, or one held for
// approval and not yet forwarded, must neither keep the session alive nor
// spend its budgets. A store shared between processes applies the same
// three updates in one conditional write.
func (s *Session) Count(req *Request) {
	s.LastAllowed = req.Now
	if req.Method == MethodToolsCall {
		s.ToolCalls++
	}
	if st := req.Session.Step; st.Declared && !s.seen(st.N) {
		s.Steps = append(s.Steps, st.N)
	}
}

func (s *Session) seen(n int64) bool {
	for _, x := range s.Steps {
		if x == n {
			return true
		}
	}
	return false
}

// Verdict is a decider's answer for one request.
//
// Allow with RequireApproval means the call may go on once a human
// approves it (the approval stage holds it, -32061). A refusal carries its
// Code and Word from the refusal table: -32003 POLICY_DENIED from a rule,
// -32005 CAPABILITY_DENIED from the session manifest (Reason is then one
// of the Reason constants). Rule names what decided, in the attribution
// space of its layer ("manifest:...", "role:...", "cedar:...").
//
// Audit marks a verdict that is not enforced: the tenant's policy is in
// audit mode, the verdict is what it would have been, and the caller
// forwards the call and records the verdict. Forward, Held and Refused
// say what the caller does.
type Verdict struct {
	Allow           bool
	RequireApproval bool
	Audit           bool
	Code            refusal.Code // 0 when Allow
	Word            refusal.Word // "" when Allow
	Reason          string
	Rule            string
}

// Reasons of a refusal. The first five are the -32005 causes; the others
// qualify a -32003.
const (
	ReasonLifetime  = "lifetime"   // the session outlived max_lifetime_secs
	ReasonIdle      = "idle"       // the session was idle max_idle_secs
	ReasonGrant     = "grant"      // outside the manifest's grant list for the method
	ReasonToolCalls = "tool_calls" // max_tool_calls calls already forwarded
	ReasonSteps     = "steps"      // the declared step is at or past max_steps, or a new step past the count

	ReasonNotLoaded   = "policy not loaded" // DenyAll: the tenant's set is not loaded yet
	ReasonForbid      = "forbid"            // a Cedar forbid matched, or a role denies the tool
	ReasonNoPermit    = "no permit"         // no Cedar permit matched, or no role allows the tool
	ReasonEvalError   = "evaluation error"  // a Cedar forbid could not be evaluated (fails closed)
	ReasonUndecidable = "not decidable"     // the method is not one a Decider decides
)

// Rules that are not a configured rule.
const (
	RuleNotLoaded   = "policy:not-loaded"
	RuleUndecidable = "policy:undecidable"
	RuleNoPermit    = "cedar:(no permit)"
	RuleNoRole      = "roles:(no role allows)"
)

// Forward reports whether the caller sends the call on now: allowed and
// not held, or audit-only.
func (v Verdict) Forward() bool { return v.Audit || (v.Allow && !v.RequireApproval) }

// Held reports whether the call waits for a human's approval.
func (v Verdict) Held() bool { return !v.Audit && v.Allow && v.RequireApproval }

// Refused reports whether the call is refused with v.Code.
func (v Verdict) Refused() bool { return !v.Audit && !v.Allow }

// Refusal is the refusal a refused verdict is answered with, at both
// boundaries: -32005 with data.reason (refusal.Capability), or -32003
// (refusal.Policy), whose message and data.reason say "policy not loaded"
// for DenyAll and nothing more for a rule's denial. It returns nil unless
// v.Refused(). The rule is never put in it: it is for the audit record,
// not for the client.
func (v Verdict) Refusal() *refusal.Refusal {
	if !v.Refused() {
		return nil
	}
	if v.Word == refusal.CapabilityDenied && v.Reason != "" {
		return refusal.Capability(v.Reason)
	}
	if v.Rule == RuleNotLoaded {
		return refusal.Policy(v.Reason)
	}
	return refusal.New(v.Word, "")
}

func allow(rule string) Verdict { return Verdict{Allow: true, Rule: rule} }

func approval(rule string) Verdict { return Verdict{Allow: true, RequireApproval: true, Rule: rule} }

func denied(reason, rule string) Verdict {
	return Verdict{Code: refusal.CodePolicyDenied, Word: refusal.PolicyDenied, Reason: reason, Rule: rule}
}

func capability(reason, rule string) Verdict {
	return Verdict{Code: refusal.CodeCapabilityDenied, Word: refusal.CapabilityDenied, Reason: reason, Rule: rule}
}

func undecidable() Verdict { return denied(ReasonUndecidable, RuleUndecidable) }

// severity orders verdicts: deny beats require-approval beats allow.
func severity(v Verdict) int {
	switch {
	case !v.Allow:
		return 2
	case v.RequireApproval:
		return 1
	}
	return 0
}

// AllowAll allows every request. It is the inner decider behind a
// manifest gate when there are no rule layers: the manifest bounds the
// session while the policy has nothing to say.
type AllowAll struct{}

// Decide allows req.
func (AllowAll) Decide(context.Context, *Request) Verdict { return allow("") }

// DenyAll refuses every decidable request with -32003, Reason
// ReasonNotLoaded (or its own Reason when set) and Rule RuleNotLoaded, so
// that a record tells it from a rule's denial. It is installed while a
// tenant's policy set is not loaded: a tenant that configured a policy must
// not get an unadjudicated window. It is never audit-only.
type DenyAll struct{ Reason string }

// Decide refuses req.
func (d DenyAll) Decide(context.Context, *Request) Verdict {
	r := d.Reason
	if r == "" {
		r = ReasonNotLoaded
	}
	return denied(r, RuleNotLoaded)
}

// PolicyDecider is the rule layers, in order, taking the strictest of
// their verdicts: deny beats require-approval beats allow; among verdicts
// as strict, the first layer's that names a rule. Layers are never merged
// into one attribution space: the verdict's Rule is one layer's rule. With
// no layers every decidable request is allowed.
type PolicyDecider struct {
	layers []Decider
}

// NewPolicyDecider returns the decider over layers, in composition order.
// Nil layers are skipped.
func NewPolicyDecider(layers ...Decider) *PolicyDecider {
	d := &PolicyDecider{}
	for _, l := range layers {
		if l != nil {
			d.layers = append(d.layers, l)
		}
	}
	return d
}

// Decide evaluates req against every layer and returns the strictest
// verdict. A method that is not decidable is refused.
func (d *PolicyDecider) Decide(ctx context.Context, req *Request) Verdict {
	if !Decidable(req.Method) {
		return undecidable()
	}
	best := allow("")
	for i, l := range d.layers {
		v := l.Decide(ctx, req)
		if i == 0 || severity(v) > severity(best) || (severity(v) == severity(best) && best.Rule == "") {
			best = v
		}
	}
	return best
}

// auditDecider is the inner decider of a tenant in audit mode: its
// verdict is the intended one, marked Audit.
type auditDecider struct{ inner Decider }

func (a auditDecider) Decide(ctx context.Context, req *Request) Verdict {
	v := a.inner.Decide(ctx, req)
	v.Audit = true
	return v
}

var (
	_ Decider = AllowAll{}
	_ Decider = DenyAll{}
	_ Decider = (*PolicyDecider)(nil)
	_ Decider = auditDecider{}
)
