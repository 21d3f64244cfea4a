package wrap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// Policy is the set of rules wrap enforces on tools/call. It is built once
// by LoadPolicy or ParsePolicy, never changes, and is safe for concurrent
// use. Every error is found at load time: Decide cannot fail.
//
// Precedence, first match wins (a tool name holding a hidden character is
// refused before any of them, see Decide):
//
//  1. a deny glob matches the tool          → refused, POLICY_DENIED
//  2. an allow list exists and no glob of it matches → refused, POLICY_DENIED
//  3. an approval glob matches              → refused, PENDING_APPROVAL
//  4. otherwise                             → allowed
//
// The order of globs inside a list does not matter, so the canonical form
// sorts them and two files that differ only in order, comments, quoting or
// duplicates have the same Hash.
type Policy struct {
	deny, approval, allow []*glob
	hasAllow              bool
	hash                  string
	// set is a policy in the gateway's format (policyset.go), decided by
	// shared/policy; nil for a glob policy.
	set *setPolicy
}

// Decision is the verdict on one tools/call.
type Decision struct {
	Refused bool
	Word    refusal.Word // POLICY_DENIED or PENDING_APPROVAL when refused
	Rule    string       // what decided, e.g. "deny:shell_*", "allow:(no match)"
}

// Rules that do not come from a glob.
const (
	ruleNoAllow     = "allow:(no match)"
	ruleUnparseable = "unparseable"
	ruleAmbiguous   = "ambiguous"
	ruleUnreadable  = "unreadable"
	ruleAuditFailed = "audit-write-failed"
)

// policyFile is the canonical form: its JSON encoding is what Hash covers.
type policyFile struct {
	Version  int       `json:"version"`
	Allow    *[]string `json:"allow"` // nil: no allow list; empty: allow nothing
	Approval []string  `json:"approval"`
	Deny     []string  `json:"deny"`
}

// emptyPolicy is the policy in force without --policy: the empty policy
// set, no rules, every call allowed, nothing enforced. Its hash is
// audit.PolicyHashNone, the one hash of the empty set, which the gateway
// records too. A --policy file is never the empty set, even one without
// globs (deny: []): under it wrap refuses every call it cannot read.
var emptyPolicy = &Policy{hash: audit.PolicyHashNone}

// LoadPolicy reads and parses the YAML policy file at path.
func LoadPolicy(path string) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePolicy(b)
}

// ParsePolicy parses a YAML policy:
//
//	deny:     [glob, ...]   # refused with POLICY_DENIED
//	approval: [glob, ...]   # refused with PENDING_APPROVAL (wrap does not park calls)
//	allow:    [glob, ...]   # optional; when present, every tool it does not match is denied
//
// Every key is optional but the document must hold at least one. An
// unknown key, a value that is not a list of strings, a bad glob, a
// duplicated key, an empty document or a second document is an error that
// names the field and its line.
//
// A document whose keys are those of the gateway's policy format (roles,
// cedar_policies, policy_mode, manifest; docs/policy.md) is read as a
// policy set instead (policyset.go) and decided by the gateway's Decider;
// a document mixing both formats is an error.
func ParsePolicy(src []byte) (*Policy, error) {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("policy is empty: write at least one of deny, approval, allow")
		}
		return nil, fmt.Errorf("policy is not valid YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("policy holds more than one YAML document")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: policy must be a mapping with keys deny, approval, allow", root.Line)
	}
	if len(root.Content) == 0 {
		return nil, errors.New("policy is empty: write at least one of deny, approval, allow")
	}
	if set, err := isSetFormat(root); err != nil {
		return nil, err
	} else if set {
		return parseSet(src)
	}
	f := policyFile{Version: 1, Approval: []string{}, Deny: []string{}}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		key := k.Value
		if seen[key] {
			return nil, fmt.Errorf("line %d: field %q appears twice", k.Line, key)
		}
		seen[key] = true
		var dst *[]string
		switch key {
		case "deny":
			dst = &f.Deny
		case "approval":
			dst = &f.Approval
		case "allow":
			list := []string{}
			f.Allow = &list
			dst = f.Allow
		default:
			return nil, fmt.Errorf("line %d: unknown field %q (known fields: deny, approval, allow)", k.Line, key)
		}
		if v.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("line %d: field %q must be a list of tool-name globs (write [] for an empty list)", v.Line, key)
		}
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode || item.Tag != "!!str" {
				return nil, fmt.Errorf("line %d: field %q: every entry must be a string glob", item.Line, key)
			}
			if _, err := compileGlob(item.Value); err != nil {
				return nil, fmt.Errorf("line %d: field %q: %v", item.Line, key, err)
			}
			*dst = append(*dst, item.Value)
		}
	}
	return build(f)
}

// build canonicalises f (sorted, deduplicated lists) and compiles it.
func build(f policyFile) (*Policy, error) {
	canon := func(in []string) []string {
		out := slices.Clone(in)
		slices.Sort(out)
		return slices.Compact(out)
	}
	f.Deny, f.Approval = canon(f.Deny), canon(f.Approval)
	p := &Policy{}
	if f.Allow != nil {
		a := canon(*f.Allow)
		f.Allow = &a
		p.hasAllow = true
	}
	compile := func(src []string) ([]*glob, error) {
		gs := make([]*glob, 0, len(src))
		for _, s := range src {
			g, err := compileGlob(s)
			if err != nil {
				return nil, err
			}
			gs = append(gs, g)
		}
		return gs, nil
	}
	var err error
	if p.deny, err = compile(f.Deny); err != nil {
		return nil, err
	}
	if p.approval, err = compile(f.Approval); err != nil {
		return nil, err
	}
	if f.Allow != nil {
		if p.allow, err = compile(*f.Allow); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	p.hash = audit.PolicyHash(b)
	return p, nil
}

// Hash is the record's policy_hash: audit.PolicyHash (the hex SHA-256,
// the format of every hash in an audit record) of the policy's canonical
// form {"version":1,"allow":[...]|null,"approval":[...],"deny":[...]}
// with each list sorted and deduplicated; audit.PolicyHashNone without
// --policy.
func (p *Policy) Hash() string { return p.hash }

// Decide returns the verdict for a tools/call of tool. A deny or approval
// glob matches the name as sent or its folded spelling (foldName: NFKC
// and case), so that no spelling of a denied name is let through; an
// allow glob matches only the name as sent, so that a spelling never
// widens what is allowed. A name holding a hidden character
// (hiddenInName) is refused whatever the rules, as ambiguous: the gate
// never asks about one (findCalls marks it), and no caller can.
func (p *Policy) Decide(tool string) Decision { return p.DecideCall(tool, nil) }

// DecideCall is Decide for a tools/call whose params member is params
// (nil: none): a policy set (policyset.go) reads its arguments and its
// declared step (_meta["aegis/step"]); a glob policy decides on the name
// alone. params must have passed jsonrpc.StrictCall (the gate refuses
// those that do not, see findCalls), so that the arguments read here are
// the ones the child reads.
func (p *Policy) DecideCall(tool string, params []byte) Decision {
	if hasHidden(tool, hiddenInName) {
		return Decision{Refused: true, Word: refusal.PolicyDenied, Rule: ruleAmbiguous}
	}
	if p.set != nil {
		return p.set.decide(tool, params)
	}
	folded := foldName(tool)
	for _, g := range p.deny {
		if g.match(tool) || g.matchFolded(folded) {
			return Decision{Refused: true, Word: refusal.PolicyDenied, Rule: "deny:" + g.src}
		}
	}
	allowRule := ""
	if p.hasAllow {
		for _, g := range p.allow {
			if g.match(tool) {
				allowRule = "allow:" + g.src
				break
			}
		}
		if allowRule == "" {
			return Decision{Refused: true, Word: refusal.PolicyDenied, Rule: ruleNoAllow}
		}
	}
	for _, g := range p.approval {
		if g.match(tool) || g.matchFolded(folded) {
			return Decision{Refused: true, Word: refusal.PendingApproval, Rule: "approval:" + g.src}
		}
	}
	return Decision{Rule: allowRule}
}
