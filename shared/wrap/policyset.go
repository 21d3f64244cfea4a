package wrap

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/policy"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// The names a policy set sees at this boundary: the wrapped stdio server is
// server "local", so a role or grant pattern names its tools "local/<tool>"
// and Cedar its resource Tool::"local/<tool>"; the caller is
// Caller::"local" with the roles of --roles.
const (
	LocalServer = "local"
	LocalCaller = "local"
)

// setKeys are the top-level keys of the gateway's policy format
// (policy.Set): a --policy file holding any of them is read as a set.
var setKeys = map[string]bool{"roles": true, "cedar_policies": true, "policy_mode": true, "manifest": true}

// isSetFormat reports whether the YAML mapping root is written in the
// gateway's policy format, and refuses a mix of both formats.
func isSetFormat(root *yaml.Node) (bool, error) {
	set, globs := false, false
	for i := 0; i+1 < len(root.Content); i += 2 {
		if setKeys[root.Content[i].Value] {
			set = true
		} else {
			globs = true
		}
	}
	if set && globs {
		return false, fmt.Errorf("line %d: a policy is either deny/approval/allow globs or a policy set (roles, cedar_policies, policy_mode, manifest), not both", root.Line)
	}
	return set, nil
}

// setPolicy is a --policy file in the gateway's format, decided by the same
// policy.Decider as the gateway's. The session it bounds is wrap's run: it
// starts when the policy is loaded, and every tools/call the decider
// allows is counted at once (a call allowed and then refused because the
// audit is down has spent its budget all the same: fail closed).
type setPolicy struct {
	decider policy.Decider
	now     func() time.Time

	mu      sync.Mutex
	roles   []string
	session policy.Session
}

// parseSet reads src as a policy.Set.
func parseSet(src []byte) (*Policy, error) {
	set, err := policy.ParseSet(src)
	if err != nil {
		return nil, err
	}
	if set.Manifest != nil {
		for method := range set.Manifest.Grants {
			if method != policy.MethodToolsCall {
				// wrap authors a refusal only for a tools/call (seed 000):
				// a grant it could not enforce must not look enforced.
				return nil, fmt.Errorf("manifest: grants: %q: wrap decides tools/call only; resources/read, prompts/get and completion/complete are relayed to the child undecided", method)
			}
		}
	}
	d, err := policy.Build(set)
	if err != nil {
		return nil, err
	}
	h, err := policy.Hash(set)
	if err != nil {
		return nil, err
	}
	sp := &setPolicy{decider: d, now: time.Now, roles: []string{}}
	sp.session.Started = sp.now()
	return &Policy{set: sp, hash: h}, nil
}

// SetRoles gives the local caller roles (the --roles flag): the roles a
// policy set's roles layer and Cedar's principal.roles see. It returns an
// error for a glob policy, which has no roles. Call it before the relay
// starts.
func (p *Policy) SetRoles(roles []string) error {
	if p.set == nil {
		return fmt.Errorf("--roles needs a policy set (roles:, cedar_policies:), not a glob policy")
	}
	p.set.mu.Lock()
	defer p.set.mu.Unlock()
	p.set.roles = append([]string{}, roles...)
	return nil
}

// decide puts a tools/call of tool with params to the decider, under the
// name as sent and under its folded spelling (foldName). A verdict
// held for approval is refused with PENDING_APPROVAL (wrap does not park
// calls, as for a glob policy); an audit-mode verdict is forwarded, its
// rule recorded prefixed "audit:".
func (s *setPolicy) decide(tool string, params []byte) Decision {
	step, err := policy.ParseStep(params)
	if err != nil {
		return Decision{Refused: true, Word: refusal.InvalidParams, Rule: "step:invalid"}
	}
	// The exact member, as the params hash reads it: never a struct
	// decoding, which takes "ARGUMENTS" for it and keeps the last twin.
	args := jsonrpc.Member(params, "arguments")
	s.mu.Lock()
	defer s.mu.Unlock()
	req := &policy.Request{
		Method: policy.MethodToolsCall,
		Caller: policy.Caller{ID: LocalCaller, Roles: s.roles},
		Server: LocalServer, Tool: tool, Arguments: args,
		Session: s.session, Now: s.now(),
	}
	req.Session.Step = step
	v := s.decider.Decide(context.Background(), req)
	if f := foldName(tool); f != tool {
		// The folded spelling is put to the decider too, and the stricter
		// verdict stands, as deny and approval globs match either spelling
		// (names.go): WRITE_FILE and ｗｒｉｔｅ_file pass no forbid on
		// write_file, while an allow rule still matches only the name as
		// sent (a spelling can only add refusals).
		folded := *req
		folded.Tool = f
		if fv := s.decider.Decide(context.Background(), &folded); strictness(fv) > strictness(v) {
			v = fv
		}
	}
	switch {
	case v.Refused():
		return Decision{Refused: true, Word: v.Word, Rule: v.Rule}
	case v.Held():
		return Decision{Refused: true, Word: refusal.PendingApproval, Rule: v.Rule}
	}
	s.session.Count(req)
	if v.Audit && !v.Allow {
		return Decision{Rule: "audit:" + v.Rule}
	}
	return Decision{Rule: v.Rule}
}

// strictness orders verdicts by what they would do, audit mode aside:
// refused 2, held for approval 1, allowed 0.
func strictness(v policy.Verdict) int {
	switch {
	case !v.Allow:
		return 2
	case v.RequireApproval:
		return 1
	}
	return 0
}
