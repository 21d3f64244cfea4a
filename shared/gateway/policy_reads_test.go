package gateway_test

// The reads (prompts/get, resources/read, completion/complete) are decided
// by the tenant's policy, and prompts/list and resources/list are filtered
// by the same decision, in both directions, over several sets.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/mcptest"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// policyRefused reports whether err is the policy's refusal: -32003 (the
// Go SDK reports it as a closed connection with our message, see
// TestPolicyPermitOnlyEcho) or -32005.
func policyRefused(err error) bool {
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code == -32005 {
		return true
	}
	return err != nil && strings.Contains(err.Error(), "Denied by policy")
}

func TestPolicyReadsAndTheirLists(t *testing.T) {
	conf := mcptest.Conformance(t, false)
	sets := []string{
		// Cedar: one prompt and one resource.
		"cedar_policies: |\n" +
			"  permit (principal, action == Action::\"prompts/get\", resource == Prompt::\"conf/test_simple_prompt\");\n" +
			"  permit (principal, action == Action::\"resources/read\", resource == Resource::\"test://static-text\");\n" +
			"  permit (principal, action == Action::\"completion/complete\", resource is Prompt);\n",
		// Cedar: a forbid on the server of a resource's attribute.
		"cedar_policies: |\n" +
			"  permit (principal, action, resource);\n" +
			"  forbid (principal, action == Action::\"resources/read\", resource) when { resource.uri like \"*binary*\" };\n" +
			"  forbid (principal, action == Action::\"prompts/get\", resource) when { resource.name like \"*argument*\" };\n",
		// The manifest's grants.
		`manifest: {grants: {prompts/get: ["conf/*simple*"], resources/read: ["conf/test://static-*"], completion/complete: []}}`,
		// Roles decide tools/call only: the reads are not refused by them.
		`roles: {ops: {allow: ["conf/*"]}}`,
		"",
	}
	for i, src := range sets {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := newPolEnv(t, memstore.New(), registry.Tenant{}, src)
			must(t, e.B.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "conf", URL: conf}))
			// The whole lists, as a tenant without a set sees them.
			e.setPolicy(t, "{}")
			all := connect(t, e.URL+"/mcp/conf", e.Key)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			prompts, err := all.ListPrompts(ctx, nil)
			must(t, err)
			resources, err := all.ListResources(ctx, nil)
			must(t, err)
			if len(prompts.Prompts) < 2 || len(resources.Resources) < 2 {
				t.Fatalf("the conformance server lists %d prompts and %d resources; want several", len(prompts.Prompts), len(resources.Resources))
			}
			e.setPolicy(t, src)
			e.Clock.Advance(time.Minute) // past the policy stage's refresh
			cs := connect(t, e.URL+"/mcp/conf", e.Key)
			lp, err := cs.ListPrompts(ctx, nil)
			must(t, err)
			var listed []string
			for _, p := range lp.Prompts {
				listed = append(listed, p.Name)
			}
			refusedSome := false
			for _, p := range prompts.Prompts {
				args := map[string]string{}
				for _, a := range p.Arguments {
					args[a.Name] = "x"
				}
				_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: p.Name, Arguments: args})
				refused := policyRefused(err)
				refusedSome = refusedSome || refused
				if slices.Contains(listed, p.Name) == refused {
					t.Errorf("prompt %s: listed=%v, prompts/get = %v", p.Name, !refused, err)
				}
			}
			lr, err := cs.ListResources(ctx, nil)
			must(t, err)
			listed = nil
			for _, r := range lr.Resources {
				listed = append(listed, r.URI)
			}
			for _, r := range resources.Resources {
				_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.URI})
				refused := policyRefused(err)
				refusedSome = refusedSome || refused
				if slices.Contains(listed, r.URI) == refused {
					t.Errorf("resource %s: listed=%v, resources/read = %v", r.URI, !refused, err)
				}
			}
			if want := i < 3; refusedSome != want {
				t.Errorf("some read refused = %v, want %v", refusedSome, want)
			}
			// completion/complete of a prompt ref is decided on the prompt.
			_, err = cs.Complete(ctx, &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
				Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "a"},
			})
			if want := i == 2; policyRefused(err) != want {
				t.Errorf("completion/complete = %v; want refused %v", err, want)
			}
			if rec := e.lastRecord(t, "prompt:test_prompt_with_arguments"); rec.PolicyHash != hashOf(t, src) || (i < 3 && rec.PolicyVerdict == "") {
				t.Errorf("completion record = %+v; want the set's hash and a verdict", rec)
			}
		})
	}
}
