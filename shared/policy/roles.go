package policy

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// Role is what one of a tenant's roles may do with tools, as "server/tool"
// patterns ("*" globs, see Manifest.Grants):
//
//	roles:
//	  ops:
//	    allow:   ["mock/*"]
//	    approve: ["payments/refund"]
//	    deny:    ["payments/transfer"]
//
// Approve allows a tool with a human's approval: a pattern there allows
// the tool too. Roles decide tools/call only.
type Role struct {
	Allow   []string `json:"allow,omitempty" yaml:"allow,omitempty"`
	Approve []string `json:"approve,omitempty" yaml:"approve,omitempty"`
	Deny    []string `json:"deny,omitempty" yaml:"deny,omitempty"`
}

// compiledRole is a Role with its patterns compiled.
type compiledRole struct {
	name                 string
	allow, approve, deny []pattern
}

// rolesLayer is the roles rule layer. The rule, for a tools/call of tool
// on server by a caller whose roles (those the tenant defines; others are
// ignored) are R:
//
//  1. a deny pattern of a role in R matches    → denied, "role:<r> deny <p>"
//  2. an approve pattern of a role in R matches → allowed with approval, "role:<r> approve <p>"
//  3. an allow pattern of a role in R matches  → allowed, "role:<r> allow <p>"
//  4. otherwise (R empty included)             → denied, RuleNoRole
//
// Roles are tried in name order, so the rule named is deterministic. A
// tenant that defines no roles has no roles layer at all. The other
// decidable methods are not the roles layer's to decide: it allows them
// with no rule, and the other layers decide.
type rolesLayer struct {
	roles map[string]*compiledRole
}

// compileRoles checks and compiles roles; nil when there are none.
func compileRoles(roles map[string]Role) (*rolesLayer, error) {
	if len(roles) == 0 {
		return nil, nil
	}
	l := &rolesLayer{roles: make(map[string]*compiledRole, len(roles))}
	for _, name := range sortedKeys(roles) {
		if err := checkName(name); err != nil {
			return nil, fmt.Errorf("roles: %w", err)
		}
		r := roles[name]
		c := &compiledRole{name: name}
		var err error
		for _, f := range []struct {
			field string
			src   []string
			dst   *[]pattern
		}{{"allow", r.Allow, &c.allow}, {"approve", r.Approve, &c.approve}, {"deny", r.Deny, &c.deny}} {
			if *f.dst, err = compilePatterns(f.src); err != nil {
				return nil, fmt.Errorf("roles: %s: %s: %w", name, f.field, err)
			}
		}
		l.roles[name] = c
	}
	return l, nil
}

// checkName checks a role name: non-empty, letters, digits and _ . : - only.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("a role has an empty name")
	}
	for _, r := range name {
		ok := r == '_' || r == '.' || r == ':' || r == '-' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return fmt.Errorf("role name %q: use letters, digits, _ . : - only", name)
		}
	}
	return nil
}

// Decide applies the rule above.
func (l *rolesLayer) Decide(_ context.Context, req *Request) Verdict {
	if req.Method != MethodToolsCall {
		return allow("")
	}
	mine := l.callerRoles(req.Caller.Roles)
	for _, r := range mine {
		if p, ok := firstMatch(r.deny, req.Server, req.Tool); ok {
			return denied(ReasonForbid, "role:"+r.name+" deny "+p.src)
		}
	}
	for _, r := range mine {
		if p, ok := firstMatch(r.approve, req.Server, req.Tool); ok {
			return approval("role:" + r.name + " approve " + p.src)
		}
	}
	for _, r := range mine {
		if p, ok := firstMatch(r.allow, req.Server, req.Tool); ok {
			return allow("role:" + r.name + " allow " + p.src)
		}
	}
	return denied(ReasonNoPermit, RuleNoRole)
}

// callerRoles are the defined roles among names, in name order, once each.
func (l *rolesLayer) callerRoles(names []string) []*compiledRole {
	out := make([]*compiledRole, 0, len(names))
	for _, n := range names {
		if r, ok := l.roles[n]; ok && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *compiledRole) int { return cmp.Compare(a.name, b.name) })
	return out
}

// canonicalRoles is roles' form in the policy hash: each list sorted and
// deduplicated (order and repeats do not change a decision).
func canonicalRoles(roles map[string]Role) map[string]Role {
	if len(roles) == 0 {
		return nil
	}
	out := make(map[string]Role, len(roles))
	for k, r := range roles {
		out[k] = Role{Allow: sortedSet(r.Allow), Approve: sortedSet(r.Approve), Deny: sortedSet(r.Deny)}
	}
	return out
}

// sortedSet is a sorted, deduplicated copy of s, never nil.
func sortedSet(s []string) []string {
	out := slices.Clone(s)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// sortedKeys are m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

var _ Decider = (*rolesLayer)(nil)
