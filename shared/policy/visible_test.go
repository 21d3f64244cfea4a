package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The universe the property test draws from.
var (
	genServers = []string{"mock", "files", "payments"}
	genTools   = []string{"echo", "read_file", "delete_all", "transfer"}
	genRoles   = []string{"ops", "dev", "finance"}
	genArgs    = []string{
		``, `{}`, `{"amount":0}`, `{"amount":50}`, `{"amount":5000}`, `{"amount":"lots"}`,
		`{"to":"bob","amount":10}`, `{"to":"eve"}`, `[1,2]`,
		`{"blob":"` + strings.Repeat("x", MaxArgumentBytes) + `"}`,
	}
	// Conditions that read only what a list knows.
	genFixedConds = []string{
		`resource.annotations has readOnlyHint && resource.annotations.readOnlyHint`,
		`principal.roles.contains("ops")`,
		`principal in Role::"finance"`,
		`resource.server == "payments"`,
		`resource.name like "read_*"`,
		`context.session.tool_calls < 3`,
		`principal.tenant == "t1"`,
	}
	// Conditions on what only a call carries.
	genArgConds = []string{
		`context.arguments.amount > 100`,
		`context.arguments has amount`,
		`context.arguments.to == "bob"`,
		`context.arguments_truncated`,
		`context.arguments.amount < 20`,
	}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func genPattern(r *rand.Rand) string {
	s, t := "*", "*"
	if r.IntN(3) > 0 {
		s = pick(r, genServers)
	}
	if r.IntN(2) > 0 {
		t = pick(r, genTools)
	} else if r.IntN(2) > 0 {
		t = strings.SplitN(pick(r, genTools), "_", 2)[0] + "*"
	}
	return s + "/" + t
}

func genPatterns(r *rand.Rand, n int) []string {
	out := make([]string, r.IntN(n+1))
	for i := range out {
		out[i] = genPattern(r)
	}
	return out
}

// genSet draws a tenant set; withArgs lets Cedar conditions read arguments.
func genSet(r *rand.Rand, withArgs bool) *Set {
	s := &Set{}
	if r.IntN(2) == 0 {
		s.Roles = map[string]Role{}
		for _, name := range genRoles[:1+r.IntN(len(genRoles))] {
			s.Roles[name] = Role{Allow: genPatterns(r, 3), Approve: genPatterns(r, 1), Deny: genPatterns(r, 1)}
		}
	}
	if r.IntN(3) > 0 {
		var b strings.Builder
		for i := range 1 + r.IntN(5) {
			effect := "permit"
			if r.IntN(3) == 0 {
				effect = "forbid"
			} else if r.IntN(4) == 0 {
				b.WriteString(`@approval("required") `)
			}
			fmt.Fprintf(&b, "@id(\"p%d\") %s (principal, action == Action::\"tools/call\", resource)", i, effect)
			var conds []string
			for range r.IntN(3) {
				if withArgs && r.IntN(2) == 0 {
					conds = append(conds, pick(r, genArgConds))
				} else {
					conds = append(conds, pick(r, genFixedConds))
				}
			}
			if len(conds) > 0 {
				fmt.Fprintf(&b, " when { %s }", strings.Join(conds, " && "))
			}
			b.WriteString(";\n")
		}
		s.Cedar = b.String()
	}
	if r.IntN(4) == 0 {
		s.Mode = ModeAudit
	}
	if r.IntN(3) == 0 {
		s.Manifest = &Manifest{MaxToolCalls: r.IntN(4)}
		if r.IntN(2) == 0 {
			s.Manifest.Grants = map[string][]string{MethodToolsCall: genPatterns(r, 3)}
		}
	}
	return s
}

func genRequest(r *rand.Rand) *Request {
	req := toolCall("", "")
	req.Caller.Roles = nil
	for _, role := range genRoles {
		if r.IntN(2) == 0 {
			req.Caller.Roles = append(req.Caller.Roles, role)
		}
	}
	req.Session.ToolCalls = r.IntN(5)
	return req
}

func genAnnotations(r *rand.Rand) json.RawMessage {
	return json.RawMessage(pick(r, []string{``, `{"readOnlyHint":true}`, `{"readOnlyHint":false}`, `{"destructiveHint":true}`}))
}

// TestVisibleMatchesCalls is the list/call property over generated
// policies, callers and tools: a tool hidden from the list is refused
// with every argument of the domain, and a tool some call may use is
// listed. With policies that do not read arguments, the list is exact:
// listed exactly when a call is not refused.
func TestVisibleMatchesCalls(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 2026))
	ctx := context.Background()
	var hidden, listed, exact int
	for i := range 400 {
		withArgs := i%2 == 0
		set := genSet(r, withArgs)
		d, err := Build(set)
		if err != nil {
			t.Fatalf("generated set %d does not build: %v\n%+v", i, err, set)
		}
		tmpl := genRequest(r)
		for _, server := range genServers {
			for _, tool := range genTools {
				ann := genAnnotations(r)
				vis := Visible(ctx, d, tmpl, server, tool, ann)
				callable := false
				for _, args := range genArgs {
					req := *tmpl
					req.Server, req.Tool, req.Annotations, req.Arguments = server, tool, ann, json.RawMessage(args)
					v := d.Decide(ctx, &req)
					if !v.Refused() {
						callable = true
						// A tool that may be called is listed.
						if !vis {
							t.Fatalf("set %d: %s/%s hidden but a call with %.40s is %+v\nroles %+v\ncedar:\n%s\nmanifest %+v caller %+v",
								i, server, tool, args, v, set.Roles, set.Cedar, set.Manifest, tmpl.Caller)
						}
					}
				}
				// A tool hidden from the list cannot be called.
				if !vis && callable {
					t.Fatalf("set %d: %s/%s hidden yet callable", i, server, tool)
				}
				if !vis {
					hidden++
				} else {
					listed++
				}
				if !withArgs {
					exact++
					if vis != callable {
						t.Fatalf("set %d (no argument conditions): %s/%s listed %v, callable %v\nroles %+v\ncedar:\n%s\nmanifest %+v caller %+v",
							i, server, tool, vis, callable, set.Roles, set.Cedar, set.Manifest, tmpl.Caller)
					}
				}
			}
		}
	}
	// The generator must exercise both sides, or the property says nothing.
	if hidden < 500 || listed < 500 {
		t.Fatalf("generator is lopsided: %d hidden, %d listed", hidden, listed)
	}
	t.Logf("%d hidden, %d listed, %d checked for exactness", hidden, listed, exact)
}

func TestVisibleLeavesTemplate(t *testing.T) {
	d, err := Build(&Set{Cedar: `permit (principal, action, resource) when { context.arguments.amount < 10 };`})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := toolCall("x", "y")
	tmpl.Arguments = json.RawMessage(`{"amount":99}`)
	if !Visible(context.Background(), d, tmpl, "mock", "echo", nil) {
		t.Fatal("a tool callable with small amounts is hidden")
	}
	if tmpl.Listing || tmpl.Server != "x" || string(tmpl.Arguments) != `{"amount":99}` {
		t.Fatalf("template changed: %+v", tmpl)
	}
	if Visible(context.Background(), DenyAll{}, tmpl, "mock", "echo", nil) {
		t.Fatal("DenyAll shows a tool")
	}
}
