package policy

import (
	"context"
	"encoding/json"
)

// Visible reports whether tools/list shows the tool named tool on server,
// with the annotations its server lists, to the caller and session of
// tmpl: whether d, asked about a tools/call of it with Listing set, does
// not refuse it. Allowed, allowed with approval and audit-only verdicts
// show the tool; a refusal hides it.
//
// The list and the call use the same decision, so that a tool hidden from
// the list cannot be called, and a tool that may be called (with some
// arguments, declaring no step) is listed. What a call alone carries is
// unknown to a list: the deciders of this package answer for the most
// permissive arguments (a Cedar condition on context.arguments is assumed
// satisfiable by a permit and not met by a forbid). So a listed tool may
// still be refused for its arguments; it is never hidden while callable.
// tmpl is not changed.
func Visible(ctx context.Context, d Decider, tmpl *Request, server, tool string, annotations json.RawMessage) bool {
	return VisibleAs(ctx, d, tmpl, MethodToolsCall, server, tool, annotations)
}

// VisibleAs is Visible for the entry of a list whose read is method:
// tools/call (tools/list: name is the tool), prompts/get (prompts/list:
// the prompt's name) or resources/read (resources/list: the resource's
// URI). The same decision as the read decides the entry, so an entry
// hidden from the list cannot be read, and one that can be is listed.
// annotations are a tool's; nil for the others.
func VisibleAs(ctx context.Context, d Decider, tmpl *Request, method, server, name string, annotations json.RawMessage) bool {
	req := *tmpl
	req.Method = method
	req.Server, req.Annotations = server, annotations
	req.Tool, req.Prompt, req.ResourceURI = "", "", ""
	switch method {
	case MethodToolsCall:
		req.Tool = name
	case MethodPrompt:
		req.Prompt = name
	case MethodResource:
		req.ResourceURI = name
	}
	req.Arguments = nil
	req.Session.Step = Step{}
	req.Listing = true
	return !d.Decide(ctx, &req).Refused()
}
