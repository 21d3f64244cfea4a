package route

import (
	"context"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/sessioncheck"
)

// Catalogs are a gateway's catalogs, one per list a server answers: its
// tools (tools/list), prompts (prompts/list), resources (resources/list,
// each named by its uri) and resource templates (resources/templates/list,
// each named by its uriTemplate). Each is a Catalog with the same naming
// rule (expose): a name two servers share, or one that is another
// entry's "server.name", is exposed as "server.name". A nil catalog has
// no entries.
type Catalogs struct {
	Tools, Prompts, Resources, Templates *Catalog
}

// The kinds of target a request other than tools/call names.
const (
	KindPrompt   = "prompt"
	KindResource = "resource"
)

// Named is a target's name with its kind, as Call.Tool and
// Call.UpstreamTool carry it for the reads ("prompt:greet",
// "resource:file:///a.txt"): a kill switch, a rate window or an audit
// record of a prompt is never one of a tool of the same name.
func Named(kind, name string) string { return kind + ":" + name }

// target is what a read or subscription names, read from its params.
type target struct {
	kind, name string
	template   bool // completion/complete of a ref/resource: name is a uriTemplate
}

// targetOf reads the target of c's params; ok is false when the params
// name none (the upstream then answers for itself; -32602 from us would
// be a second validator of the server's own params).
func targetOf(c *pipeline.Call) (target, bool) {
	switch c.Method {
	case "prompts/get":
		n, ok := jsonrpc.StringMember(c.Params, "name")
		return target{kind: KindPrompt, name: n}, ok && n != ""
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		u, ok := jsonrpc.StringMember(c.Params, "uri")
		return target{kind: KindResource, name: u}, ok && u != ""
	case "completion/complete":
		ref := jsonrpc.Member(c.Params, "ref")
		typ, _ := jsonrpc.StringMember(ref, "type")
		switch typ {
		case "ref/prompt":
			n, ok := jsonrpc.StringMember(ref, "name")
			return target{kind: KindPrompt, name: n}, ok && n != ""
		case "ref/resource":
			u, ok := jsonrpc.StringMember(ref, "uri")
			return target{kind: KindResource, name: u, template: true}, ok && u != ""
		}
	}
	return target{}, false
}

// resolveTarget routes a read or subscription to the server that has its
// prompt or resource, and fills in c.Server, c.Target, c.Tool,
// c.UpstreamTool and c.Listed (the prompt, resource or resource template
// it was found by, for the content check). A prompt is found by its exposed name (or
// "server.name") in the prompt catalog; a resource by its uri in the
// resource catalog, else by a resource template of one server that
// matches it (matchTemplate), else by "server.uri" naming a server whose
// template matches the rest. On /mcp/{server} a target that server does
// not list is still sent to it as named (the server answers for itself,
// as it would direct); on /mcp it is -32601, naming the choices when the
// name matches the templates of several servers.
func (k *Check) resolveTarget(ctx context.Context, c *pipeline.Call) error {
	t, ok := targetOf(c)
	if !ok {
		if c.RequestedServer == "" {
			return refusal.Unknown(c.Method + " target (params name no prompt or resource)")
		}
		return k.sendAsNamed(ctx, c, target{kind: KindResource})
	}
	type list struct {
		cat  *Catalog
		kind string // registry.PinKinds
	}
	prompts, resources, templates := list{k.cats.Prompts, registry.PinPrompt}, list{k.cats.Resources, registry.PinResource}, list{k.cats.Templates, registry.PinTemplate}
	var lists []list
	switch {
	case t.kind == KindPrompt:
		lists = []list{prompts}
	case t.template:
		lists = []list{templates, resources}
	default:
		lists = []list{resources, templates}
	}
	for _, l := range lists {
		if l.cat == nil {
			continue
		}
		e, ok, _, err := l.cat.ResolveFor(ctx, c.Tenant.ID, c.RequestedServer, t.name, sessioncheck.Caps(c))
		if err != nil {
			return err
		}
		if ok {
			set(c, t.kind, t.name, e.Server, e.Tool.Name)
			c.Listed = pipeline.Listed{Kind: l.kind, Name: e.Tool.Name, Def: e.Tool.Def}
			return nil
		}
	}
	if t.kind == KindResource && !t.template && k.cats.Templates != nil {
		found, err := k.byTemplate(ctx, c, t)
		if found || err != nil {
			return err
		}
	}
	if c.RequestedServer != "" {
		return k.sendAsNamed(ctx, c, t)
	}
	return unknown(ctx, lists[0].cat, c, t.kind, t.name)
}

// unknown is the -32601 for a kind's name that the tenant's view does not
// expose. When servers share the name (so the view exposes it only as
// "server.name"), the message names those choices.
func unknown(ctx context.Context, cat *Catalog, c *pipeline.Call, kind, name string) error {
	var choices []string
	if cat != nil {
		if view, _, err := cat.ViewFor(ctx, c.Tenant.ID, c.RequestedServer, sessioncheck.Caps(c)); err == nil {
			for _, e := range view {
				if e.Tool.Name == name && e.Name != name {
					choices = append(choices, e.Name)
				}
			}
		}
	}
	if len(choices) == 0 {
		return refusal.Unknown(kind + " " + name)
	}
	sort.Strings(choices)
	return refusal.Unknown(kind + " " + name + " (several servers have it: call one of " + strings.Join(choices, ", ") + ")")
}

// byTemplate routes a resource URI by the resource templates that match
// it: of one server, there; of several, -32601 naming the "server.uri"
// choices. A URI "server.rest" whose server has a template matching rest
// goes to that server as rest.
func (k *Check) byTemplate(ctx context.Context, c *pipeline.Call, t target) (bool, error) {
	view, _, err := k.cats.Templates.ViewFor(ctx, c.Tenant.ID, c.RequestedServer, sessioncheck.Caps(c))
	if err != nil {
		return false, err
	}
	var hits []Entry
	seen := map[string]bool{}
	for _, e := range view {
		if !seen[e.Server.Name] && matchTemplate(e.Tool.Name, t.name) {
			seen[e.Server.Name] = true
			hits = append(hits, e)
		}
	}
	switch {
	case len(hits) == 1:
		set(c, t.kind, t.name, hits[0].Server, t.name)
		c.Listed = pipeline.Listed{Kind: registry.PinTemplate, Name: hits[0].Tool.Name, Def: hits[0].Tool.Def}
		return true, nil
	case len(hits) > 1:
		choices := make([]string, len(hits))
		for i, e := range hits {
			choices[i] = e.Server.Name + "." + t.name
		}
		sort.Strings(choices)
		return true, refusal.Unknown(t.kind + " " + t.name + " (several servers have it: call one of " + strings.Join(choices, ", ") + ")")
	}
	if srv, rest, ok := strings.Cut(t.name, "."); ok {
		for _, e := range view {
			if e.Server.Name == srv && matchTemplate(e.Tool.Name, rest) {
				set(c, t.kind, t.name, e.Server, rest)
				c.Listed = pipeline.Listed{Kind: registry.PinTemplate, Name: e.Tool.Name, Def: e.Tool.Def}
				return true, nil
			}
		}
	}
	return false, nil
}

// sendAsNamed sends c to the server of /mcp/{server} with its target as
// named.
func (k *Check) sendAsNamed(ctx context.Context, c *pipeline.Call, t target) error {
	srv, err := k.cat.server(ctx, c.Tenant.ID, c.RequestedServer)
	if err != nil || srv == nil {
		return err
	}
	set(c, t.kind, t.name, srv, t.name)
	return nil
}

func set(c *pipeline.Call, kind, asked string, srv *registry.Server, upstreamName string) {
	c.Server = srv
	c.Target = upstreamName
	c.Tool = Named(kind, asked)
	c.UpstreamTool = Named(kind, upstreamName)
}

// server returns tenant's server called name (nil: none).
func (c *Catalog) server(ctx context.Context, tenant, name string) (*registry.Server, error) {
	servers, err := c.reg.Servers(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for i := range servers {
		if servers[i].Name == name {
			return &servers[i], nil
		}
	}
	return nil, nil
}

// Servers lists tenant's servers, or only the one called only.
func (c *Catalog) Servers(ctx context.Context, tenant, only string) ([]registry.Server, error) {
	servers, err := c.reg.Servers(ctx, tenant)
	if err != nil || only == "" {
		return servers, err
	}
	for i := range servers {
		if servers[i].Name == only {
			return servers[i : i+1], nil
		}
	}
	return nil, nil
}

// matchTemplate reports whether uri is an expansion of the RFC 6570 URI
// template tmpl. Literal text must match exactly; a simple expression
// {var} matches a non-empty run without '/', '?' or '#'; {+var} and
// {#var} match anything; {/var}, {.var}, {;var}, {?var} and {&var} match
// their operator's prefix and what follows up to the next delimiter, or
// nothing. It is a routing aid, not a validator: the server still reads
// the URI itself.
func matchTemplate(tmpl, uri string) bool {
	if !strings.Contains(tmpl, "{") {
		return tmpl == uri
	}
	re, ok := templateRE(tmpl)
	return ok && re.MatchString(uri)
}

var templates sync.Map // template → *regexp.Regexp (nil when it does not parse)

func templateRE(tmpl string) (*regexp.Regexp, bool) {
	if v, ok := templates.Load(tmpl); ok {
		re, _ := v.(*regexp.Regexp)
		return re, re != nil
	}
	var b strings.Builder
	b.WriteString("^")
	rest := tmpl
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:i]))
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			templates.Store(tmpl, (*regexp.Regexp)(nil))
			return nil, false
		}
		expr := rest[i+1 : i+j]
		rest = rest[i+j+1:]
		op := byte(0)
		if expr != "" {
			op = expr[0]
		}
		switch op {
		case '+', '#':
			b.WriteString(`.*`)
		case '/':
			b.WriteString(`(?:/[^?#]*)?`)
		case '.':
			b.WriteString(`(?:\.[^/?#]*)?`)
		case ';':
			b.WriteString(`(?:;[^/?#]*)?`)
		case '?', '&':
			b.WriteString(`(?:[?&][^#]*)?`)
		default:
			b.WriteString(`[^/?#]+`)
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		templates.Store(tmpl, (*regexp.Regexp)(nil))
		return nil, false
	}
	templates.Store(tmpl, re)
	return re, true
}

// UpstreamParams returns c's params as its server is to get them: the
// target named as the server knows it (c.Target for the reads and
// subscriptions; c.UpstreamTool for tools/call), the gateway's own
// "server" member of tools/call removed, and the answer to the gateway's
// connection elicitation removed from inputResponses (the member too when
// nothing else is in it). The input is never modified.
func UpstreamParams(c *pipeline.Call) json.RawMessage {
	params := c.Params
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	switch c.Method {
	case "tools/call":
		if c.UpstreamTool != c.Tool {
			params = jsonrpc.Edit(params, "name", str(c.UpstreamTool))
		}
		if jsonrpc.Member(params, "server") != nil {
			params = jsonrpc.Edit(params, "server", nil)
		}
	case "prompts/get":
		if n, _ := jsonrpc.StringMember(params, "name"); c.Target != "" && n != c.Target {
			params = jsonrpc.Edit(params, "name", str(c.Target))
		}
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		if u, _ := jsonrpc.StringMember(params, "uri"); c.Target != "" && u != c.Target {
			params = jsonrpc.Edit(params, "uri", str(c.Target))
		}
	case "completion/complete":
		ref := jsonrpc.Member(params, "ref")
		member := "name"
		if typ, _ := jsonrpc.StringMember(ref, "type"); typ == "ref/resource" {
			member = "uri"
		}
		if v, _ := jsonrpc.StringMember(ref, member); c.Target != "" && v != c.Target {
			params = jsonrpc.Edit(params, "ref", jsonrpc.Edit(ref, member, str(c.Target)))
		}
	}
	// A 2026-07-28 client's answer to the gateway's own connection
	// elicitation (refusal.InputRequired) is the gateway's, not the server's.
	if in := jsonrpc.Member(params, "inputResponses"); jsonrpc.Member(in, refusal.ConnectionInputKey) != nil {
		if in = jsonrpc.Edit(in, refusal.ConnectionInputKey, nil); string(in) == "{}" {
			in = nil
		}
		params = jsonrpc.Edit(params, "inputResponses", in)
	}
	return params
}

// Forget drops srv's cached lists, of every capability set, so that the
// next request lists it again (its server said the list changed).
func (c *Catalog) Forget(srv *registry.Server) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if k.tenant == srv.Tenant && k.name == srv.Name && k.url == srv.URL {
			c.drop(k)
		}
	}
}
