package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cedar "github.com/cedar-policy/cedar-go"
)

func mustCedar(t *testing.T, text string) *cedarLayer {
	t.Helper()
	l, err := compileCedar(text)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestCedarEntityModel pins every name of docs/policy.md's entity model:
// each policy reads one of them and must permit the request.
func TestCedarEntityModel(t *testing.T) {
	tool := toolCall("mock", "echo")
	tool.Caller.Roles = []string{"ops", "dev"}
	tool.Annotations = json.RawMessage(`{"readOnlyHint":true,"title":"Echo"}`)
	tool.Arguments = json.RawMessage(`{"amount":42,"to":"bob","tags":["a","b"],"ratio":0.5,"deep":{"x":null,"y":1}}`)
	tool.Session.ToolCalls = 3
	tool.Now = t0.Add(90 * time.Second)
	prompt := toolCall("mock", "")
	prompt.Method, prompt.Prompt = MethodPrompt, "greet"
	res := toolCall("files", "")
	res.Method, res.ResourceURI = MethodResource, "file:///docs/a"
	compl := toolCall("mock", "")
	compl.Method, compl.Prompt = MethodCompletion, "greet"
	complRes := toolCall("files", "")
	complRes.Method, complRes.ResourceURI = MethodCompletion, "file:///docs/{name}"

	tests := []struct {
		name string
		req  *Request
		when string
	}{
		{"principal uid", tool, `principal == Caller::"alice"`},
		{"principal tenant", tool, `principal.tenant == "t1"`},
		{"principal key_id", tool, `principal.key_id == "k1"`},
		{"principal roles", tool, `principal.roles.contains("dev")`},
		{"principal in role", tool, `principal in Role::"ops"`},
		{"action", tool, `action == Action::"tools/call"`},
		{"tool uid", tool, `resource == Tool::"mock/echo"`},
		{"tool server and name", tool, `resource.server == "mock" && resource.name == "echo"`},
		{"tool in server", tool, `resource in Server::"mock"`},
		{"tool is Tool", tool, `resource is Tool`},
		{"annotations", tool, `resource.annotations.readOnlyHint && resource.annotations.title == "Echo"`},
		{"arguments long", tool, `context.arguments.amount == 42`},
		{"arguments set", tool, `context.arguments.tags.contains("b")`},
		{"arguments decimal", tool, `context.arguments.ratio == decimal("0.5")`},
		{"arguments null left out", tool, `!(context.arguments.deep has x) && context.arguments.deep.y == 1`},
		{"arguments not truncated", tool, `context.arguments_truncated == false`},
		{"session", tool, `context.session.tool_calls == 3 && context.session.age_secs == 90 && context.session.id == "s1"`},
		{"now", tool, `context.now == ` + strconv.FormatInt(t0.Add(90*time.Second).Unix(), 10)},
		{"prompt", prompt, `action == Action::"prompts/get" && resource == Prompt::"mock/greet" && resource.name == "greet" && resource in Server::"mock"`},
		{"resource", res, `action == Action::"resources/read" && resource == Resource::"file:///docs/a" && resource.uri like "file:///docs/*" && resource.server == "files"`},
		{"completion of a prompt", compl, `action == Action::"completion/complete" && resource is Prompt`},
		{"completion of a resource", complRes, `resource is Resource && resource.uri == "file:///docs/{name}"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustCedar(t, `@id("p") permit (principal, action, resource) when { `+tt.when+` };`)
			if v := l.Decide(context.Background(), tt.req); !v.Allow || v.Rule != "cedar:p" {
				t.Fatalf("got %+v, want allowed by cedar:p", v)
			}
		})
	}
}

func TestCedarDecisions(t *testing.T) {
	text := `
@id("read-only")
permit (principal, action == Action::"tools/call", resource is Tool)
when { resource.annotations has readOnlyHint && resource.annotations.readOnlyHint };

@id("payments") @approval("required")
permit (principal in Role::"finance", action == Action::"tools/call", resource in Server::"payments");

@id("big-transfer")
forbid (principal, action, resource == Tool::"payments/transfer")
when { context.arguments.amount > 1000 };

@id("truncated")
forbid (principal, action, resource) when { context.arguments_truncated };

permit (principal, action == Action::"prompts/get", resource);
`
	l := mustCedar(t, text)
	tests := []struct {
		name        string
		server, tl  string
		roles       []string
		annotations string
		args        string
		method      string
		allow, appr bool
		rule        string
		reason      string
	}{
		{name: "read-only allowed", server: "mock", tl: "echo", annotations: `{"readOnlyHint":true}`, allow: true, rule: "cedar:read-only"},
		{name: "no permit", server: "mock", tl: "echo", annotations: `{"readOnlyHint":false}`, rule: RuleNoPermit, reason: ReasonNoPermit},
		{name: "no annotations: condition false, no error", server: "mock", tl: "echo", rule: RuleNoPermit, reason: ReasonNoPermit},
		{name: "approval annotation", server: "payments", tl: "refund", roles: []string{"finance"}, allow: true, appr: true, rule: "cedar:payments"},
		{name: "forbid beats permit", server: "payments", tl: "transfer", roles: []string{"finance"}, args: `{"amount":5000}`, rule: "cedar:big-transfer", reason: ReasonForbid},
		{name: "forbid condition false", server: "payments", tl: "transfer", roles: []string{"finance"}, args: `{"amount":5}`, allow: true, appr: true, rule: "cedar:payments"},
		// amount missing: the forbid errors, and an erroring forbid denies.
		{name: "erroring forbid denies", server: "payments", tl: "transfer", roles: []string{"finance"}, args: `{}`, rule: "cedar:big-transfer", reason: ReasonEvalError},
		{name: "oversized arguments withheld", server: "mock", tl: "echo", annotations: `{"readOnlyHint":true}`, args: `{"x":"` + strings.Repeat("a", MaxArgumentBytes) + `"}`, rule: "cedar:truncated", reason: ReasonForbid},
		{name: "deep arguments withheld", server: "mock", tl: "echo", annotations: `{"readOnlyHint":true}`, args: strings.Repeat(`{"a":`, MaxArgumentDepth+1) + "1" + strings.Repeat("}", MaxArgumentDepth+1), rule: "cedar:truncated", reason: ReasonForbid},
		{name: "deep at the bound is kept", server: "mock", tl: "echo", annotations: `{"readOnlyHint":true}`, args: strings.Repeat(`{"a":`, MaxArgumentDepth) + "1" + strings.Repeat("}", MaxArgumentDepth), allow: true, rule: "cedar:read-only"},
		{name: "non-object arguments withheld", server: "mock", tl: "echo", annotations: `{"readOnlyHint":true}`, args: `[1]`, rule: "cedar:truncated", reason: ReasonForbid},
		{name: "unnamed policy id", method: MethodPrompt, server: "mock", allow: true, rule: "cedar:policy4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := toolCall(tt.server, tt.tl)
			if tt.method != "" {
				req.Method, req.Prompt = tt.method, "p"
			}
			req.Caller.Roles = tt.roles
			req.Annotations = json.RawMessage(tt.annotations)
			req.Arguments = json.RawMessage(tt.args)
			v := l.Decide(context.Background(), req)
			if v.Allow != tt.allow || v.RequireApproval != tt.appr || v.Rule != tt.rule || v.Reason != tt.reason {
				t.Fatalf("got %+v, want allow %v approval %v rule %q reason %q", v, tt.allow, tt.appr, tt.rule, tt.reason)
			}
		})
	}
}

func TestCedarLoadErrors(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		line, col int
		msg       string
	}{
		{"syntax", "permit (principal, action, resource);\n\npermit (principal action, resource);", 3, 0, "want ,"},
		{"unterminated string", "permit (principal, action, resource)\n  when { \"abc };", 2, 10, "literal not terminated"},
		{"duplicate id", "@id(\"a\") permit (principal, action, resource);\n  @id(\"a\") forbid (principal, action, resource);", 2, 3, `"a" is used twice`},
		{"approval value", "\n@approval(\"maybe\") permit (principal, action, resource);", 2, 1, `only value is "required"`},
		{"approval on forbid", "@approval(\"required\") forbid (principal, action, resource);", 1, 1, "on a forbid"},
		{"empty id", "@id(\"\") permit (principal, action, resource);", 1, 1, "@id is empty"},
		{"comments only", "// nothing\n", 0, 0, "holds no policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := compileCedar(tt.text)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *ParseError", err)
			}
			if pe.Line != tt.line || (tt.col != 0 && pe.Column != tt.col) || !strings.Contains(pe.Msg, tt.msg) {
				t.Fatalf("got %d:%d %q, want %d:%d containing %q", pe.Line, pe.Column, pe.Msg, tt.line, tt.col, tt.msg)
			}
			if pe.Line != 0 && !strings.HasPrefix(pe.Error(), "cedar_policies:") {
				t.Fatalf("Error() = %q", pe.Error())
			}
		})
	}
	if l, err := compileCedar("  \n"); l != nil || err != nil {
		t.Fatalf("blank text = %v, %v; want no layer", l, err)
	}
}

func TestNumberConversion(t *testing.T) {
	tests := []struct{ in, want string }{
		{"42", "42"},
		{"-7", "-7"},
		{"1e3", "1000"},
		{"0.25", `decimal("0.25")`},
		{"1.23456", `"1.23456"`},
		{"1e400", `"1e400"`},
	}
	for _, tt := range tests {
		got := number(json.Number(tt.in))
		if s := got.String(); s != tt.want && string(got.MarshalCedar()) != tt.want {
			t.Errorf("number(%s) = %s (%s), want %s", tt.in, s, got.MarshalCedar(), tt.want)
		}
	}
}

// TestCedarIndexIsExact checks that evaluating only the indexed candidates
// decides as Cedar does over the whole set, with the same policies named.
func TestCedarIndexIsExact(t *testing.T) {
	text := cedar100() + `
permit (principal, action in [Action::"prompts/get", Action::"completion/complete"], resource in Server::"srv1");
permit (principal, action, resource is Resource in Server::"srv2");
forbid (principal, action == Action::"resources/read", resource == Resource::"file:///secret");
permit (principal, action in Action::"tools/call", resource in Tool::"srv3/tool3");
forbid (principal, action == Action::"tools/call", resource == Tool::"srv4/tool4") when { context.session.tool_calls > 3 };
permit (principal, action == Action::"tools/call", resource == Tool::"srv5/tool5") when { context.now > 0 && context.session.age_secs >= 60 };
forbid (principal, action == Action::"tools/call", resource == Tool::"srv6/tool6") when { context has session };
permit (principal, action == Action::"tools/call", resource == Tool::"srv7/tool7") when { context == principal.claims };
permit (principal, action == Action::"tools/call", resource == Tool::"srv7/tool8") when { context["now"] > 0 };
`
	l := mustCedar(t, text)
	list, err := cedar.NewPolicyListFromBytes("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	full := cedar.NewPolicySet()
	for _, p := range l.meta {
		full.Add(cedar.PolicyID(p.id), list[p.index])
	}
	ids := func(d cedar.Diagnostic) []string {
		var out []string
		for _, r := range d.Reasons {
			out = append(out, string(r.PolicyID))
		}
		for _, e := range d.Errors {
			out = append(out, "err:"+string(e.PolicyID))
		}
		slices.Sort(out)
		return out
	}
	n := 0
	for _, method := range []string{MethodToolsCall, MethodResource, MethodPrompt, MethodCompletion} {
		for s := range 8 {
			for tl := range 12 {
				for _, roles := range [][]string{nil, {"team1"}, {"team3", "team0"}} {
					req := toolCall(fmt.Sprintf("srv%d", s), fmt.Sprintf("tool%d", tl))
					req.Method, req.Caller.Roles = method, roles
					req.Annotations = json.RawMessage(`{"readOnlyHint":true}`)
					req.Arguments = json.RawMessage(`{"amount":5000}`)
					req.Session.ToolCalls, req.Now = tl, req.Session.Started.Add(time.Duration(s)*time.Minute)
					// The context without what no policy names, whole: only a
					// policy that reads context whole can tell it from the full one.
					req.Caller.Claims = json.RawMessage(`{"arguments":{},"arguments_truncated":false}`)
					switch method {
					case MethodResource:
						req.ResourceURI = pick(rand.New(rand.NewPCG(uint64(s), uint64(tl))), []string{"file:///secret", "file:///a"})
					case MethodPrompt, MethodCompletion:
						req.Prompt = req.Tool
					}
					principal, action, resource, entities := entitiesOf(req, readsAll)
					r := cedar.Request{Principal: principal, Action: action, Resource: resource, Context: contextOf(req, false, readsAll)}
					gotD, gotDiag := cedar.Authorize(l.candidates(req, resource), entities, r)
					wantD, wantDiag := cedar.Authorize(full, entities, r)
					if gotD != wantD || !slices.Equal(ids(gotDiag), ids(wantDiag)) {
						t.Fatalf("%s %s/%s %v: indexed %v %v, full %v %v", method, req.Server, req.Tool, roles, gotD, ids(gotDiag), wantD, ids(wantDiag))
					}
					// Decide evaluates the candidates on only the data
					// they can read (reads): the same verdict.
					// Twice: the second may be the verdict kept for a
					// request whose candidates read no context.
					for range 2 {
						if got, want := l.Decide(context.Background(), req), l.verdict(wantD, wantDiag); got != want {
							t.Fatalf("%s %s/%s %v: Decide %+v, full data %+v", method, req.Server, req.Tool, roles, got, want)
						}
					}
					if wantD == cedar.Allow {
						n++
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no request was allowed: the comparison says nothing")
	}
}

// TestCedarEntityCache: a decision through the entity cache follows what
// keys it (roles, annotations), and a request whose key is too large is
// decided, not cached.
func TestCedarEntityCache(t *testing.T) {
	l := mustCedar(t, `permit (principal in Role::"ops", action, resource) when { resource.annotations has readOnlyHint && resource.annotations.readOnlyHint };`)
	ctx := context.Background()
	req := func(roles []string, ann string) *Request {
		r := toolCall("mock", "echo")
		r.Caller.Roles = roles
		r.Annotations = json.RawMessage(ann)
		return r
	}
	big := `{"readOnlyHint":true,"title":"` + strings.Repeat("x", maxCachedKeyBytes) + `"}`
	for i := range 3 { // the second and third rounds are served from the cache
		for _, tc := range []struct {
			name  string
			req   *Request
			allow bool
		}{
			{"ops, read-only", req([]string{"ops"}, `{"readOnlyHint":true}`), true},
			{"ops, not read-only", req([]string{"ops"}, `{"readOnlyHint":false}`), false},
			{"dev, read-only", req([]string{"dev"}, `{"readOnlyHint":true}`), false},
			{"ops, large annotations", req([]string{"ops"}, big), true},
		} {
			if got := l.Decide(ctx, tc.req); got.Allow != tc.allow {
				t.Fatalf("round %d, %s: allow %v, want %v (%+v)", i, tc.name, got.Allow, tc.allow, got)
			}
		}
	}
	l.ents.mu.Lock()
	n := len(l.ents.m)
	l.ents.mu.Unlock()
	if n != 3 {
		t.Fatalf("%d cached entries, want 3 (the large request is not cached)", n)
	}
}

// TestCedarReadsLeaveNothingOut: a request is evaluated on only the
// context its candidate policies name (reads); a policy that names one
// member, or reads context whole, decides as it does on the full context.
func TestCedarReadsLeaveNothingOut(t *testing.T) {
	for _, text := range []string{
		`permit (principal, action, resource) when { context == principal.claims };`,
		`permit (principal, action, resource) when { principal.claims == context };`,
		`permit (principal, action, resource) when { [context].contains(principal.claims) };`,
		`permit (principal, action, resource) when { context.now > 1000 };`,
		`permit (principal, action, resource) when { context.session.tool_calls == 3 };`,
		`permit (principal, action, resource) when { context.session.age_secs >= 60 };`,
		`permit (principal, action, resource) when { context has session };`,
		`forbid (principal, action, resource) when { context has now }; permit (principal, action, resource);`,
		`permit (principal, action, resource) when { context.arguments_truncated == false && !(context has session) };`,
	} {
		l := mustCedar(t, text)
		list, err := cedar.NewPolicyListFromBytes("", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		full := cedar.NewPolicySet()
		for i, p := range list {
			full.Add(cedar.PolicyID(fmt.Sprint(i)), p)
		}
		req := toolCall("srv", "tool")
		req.Session.ToolCalls, req.Now = 3, req.Session.Started.Add(2*time.Minute)
		// What the context would be without the members no policy names.
		req.Caller.Claims = json.RawMessage(`{"arguments":{},"arguments_truncated":false}`)
		principal, action, resource, entities := entitiesOf(req, readsAll)
		wantD, _ := cedar.Authorize(full, entities, cedar.Request{Principal: principal, Action: action, Resource: resource, Context: contextOf(req, false, readsAll)})
		for range 2 { // the second may be a kept verdict
			if got := l.Decide(context.Background(), req); got.Refused() != (wantD != cedar.Allow) {
				t.Errorf("%s\n Decide %+v; on the full context Cedar says %v", text, got, wantD)
			}
		}
	}
}

// A kept verdict is the verdict of the request it was decided for, not of
// another that shares its entities but whose candidates read the context:
// the same caller and tool, a policy on the session's count, two counts.
func TestCedarKeptVerdictNeedsNoContext(t *testing.T) {
	l := mustCedar(t, `permit (principal, action, resource) when { context.session.tool_calls < 3 };`)
	req := toolCall("srv", "tool")
	for _, c := range []struct {
		calls int
		allow bool
	}{{1, true}, {5, false}, {1, true}, {5, false}} {
		req.Session.ToolCalls = c.calls
		if got := l.Decide(context.Background(), req); got.Refused() == c.allow {
			t.Fatalf("tool_calls %d: %+v, want allow %v", c.calls, got, c.allow)
		}
	}
}
