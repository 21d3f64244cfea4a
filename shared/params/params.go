// Package params is the pipeline's "params" slot (-32602): it reads what
// the later checks key on from a tools/call's params (the tool's name, the
// optional server) and refuses params that a lenient upstream could read
// otherwise than the gateway does: not an object, a duplicate key, a
// member spelt with other letter case, a string holding a lone UTF-16
// surrogate escape or bytes that are not UTF-8 (jsonrpc.StrictCall, the
// reading `aegis wrap` decides on too), a name that is not a string,
// arguments that are not an object, a server that disagrees with the path,
// a name or server longer than MaxNameBytes. It
// needs no store, so it cannot fail to decide.
package params

import (
	"context"
	"strconv"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// MaxNameBytes caps the tool name and the server a tools/call names (in
// params or in /mcp/{server}). MCP tool names are short (the specification
// asks for 1 to 128 characters; server names are at most 63, see
// docs/design/names.md), and what this check fills in keys the rate
// windows and is kept in the audit record: a longer name is refused with
// -32602, and the call carries it cut to this many bytes with a marker
// (audit.Cut), so that no later check, store key or record holds it whole.
const MaxNameBytes = 256

// Check is the params check; the zero value is ready to use.
type Check struct{}

// Check implements pipeline.Check.
func (k Check) Check(ctx context.Context, c *pipeline.Call) error {
	decide, _ := k.Prefetch(ctx, c)
	return decide()
}

// Prefetch implements pipeline.Prefetcher: the params are read at once, so
// that routing and the rate windows key on the tool's name; the verdict is
// still reported in the params slot's place, after the session's.
func (Check) Prefetch(_ context.Context, c *pipeline.Call) (func() error, func()) {
	ref := read(c)
	return func() error {
		if ref != nil {
			return ref
		}
		return nil
	}, nil
}

// Resolves implements pipeline.Resolver.
func (Check) Resolves() {}

// read sets c.Tool and c.RequestedServer from c.Params, or refuses.
func read(c *pipeline.Call) *refusal.Refusal {
	if len(c.RequestedServer) > MaxNameBytes { // from /mcp/{server}
		c.RequestedServer = audit.Cut(c.RequestedServer, MaxNameBytes)
		return tooLong("server in the path")
	}
	if len(c.Params) == 0 || c.Params[0] != '{' {
		return refusal.New(refusal.InvalidParams, "Invalid params: tools/call needs an object with a name")
	}
	if err := jsonrpc.StrictCall(c.Params); err != nil {
		// Duplicate or misspelt members, lone surrogates, bytes that are not
		// UTF-8: a call must not be checked as one thing and run as another
		// (issue 16, item 4). `aegis wrap` refuses the same params by the
		// same function.
		return refusal.New(refusal.InvalidParams, "Invalid params: "+err.Error())
	}
	name, ok := jsonrpc.StringMember(c.Params, "name")
	if !ok || name == "" {
		return refusal.New(refusal.InvalidParams, `Invalid params: "name" must be a non-empty string`)
	}
	if len(name) > MaxNameBytes {
		c.Tool = audit.Cut(name, MaxNameBytes)
		return tooLong(`"name"`)
	}
	c.Tool = name
	if args := jsonrpc.Member(c.Params, "arguments"); args != nil && args[0] != '{' && string(args) != "null" {
		return refusal.New(refusal.InvalidParams, `Invalid params: "arguments" must be an object`)
	}
	if raw := jsonrpc.Member(c.Params, "server"); raw != nil {
		srv, ok := jsonrpc.StringMember(c.Params, "server")
		if !ok {
			return refusal.New(refusal.InvalidParams, `Invalid params: "server" must be a string`)
		}
		if len(srv) > MaxNameBytes {
			if c.RequestedServer == "" {
				c.RequestedServer = audit.Cut(srv, MaxNameBytes)
			}
			return tooLong(`"server"`)
		}
		if c.RequestedServer != "" && srv != c.RequestedServer {
			return refusal.New(refusal.InvalidParams, `Invalid params: "server" differs from the server in the path`)
		}
		c.RequestedServer = srv
	}
	return nil
}

// tooLong is the -32602 refusal of a name over MaxNameBytes.
func tooLong(what string) *refusal.Refusal {
	return refusal.New(refusal.InvalidParams, "Invalid params: "+what+" is longer than "+strconv.Itoa(MaxNameBytes)+" bytes")
}

var _ pipeline.Resolver = Check{}
