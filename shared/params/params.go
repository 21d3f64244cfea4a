// Package params is the pipeline's "params" slot (-32602): it reads what
// the later checks key on from a tools/call's params (the tool's name, the
// optional server) and refuses params that a lenient upstream could read
// otherwise than the gateway does: not an object, a duplicate key, a
// member spelt with other letter case, a name that is not a string,
// arguments that are not an object, a server that disagrees with the path,
// a name or server longer than MaxNameBytes, a string holding a lone
// UTF-16 surrogate escape or bytes that are not UTF-8 (see textual). It
// needs no store, so it cannot fail to decide.
package params

import (
	"context"
	"encoding/json"
	"strconv"
	"unicode/utf8"

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
	if msg := textual(c.Params); msg != "" {
		return refusal.New(refusal.InvalidParams, "Invalid params: "+msg)
	}
	if k, dup := jsonrpc.DuplicateKey(c.Params); dup {
		// The gateway reads the first of two "name"s, an upstream may run the
		// last: a call must not be checked as one thing and run as another.
		return refusal.New(refusal.InvalidParams, "Invalid params: duplicate key "+quoteKey(k)+" (parsers disagree on which one counts)")
	}
	var odd, want string // a member a lenient decoder takes for one we read, spelled otherwise
	jsonrpc.Members(c.Params, func(k string, _ json.RawMessage) {
		if m := callMembers[jsonrpc.Fold(k)]; odd == "" && m != "" && m != k {
			odd, want = k, m
		}
	})
	if odd != "" {
		return refusal.New(refusal.InvalidParams, "Invalid params: "+quoteKey(odd)+" must be spelled "+strconv.Quote(want))
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

// textual reports why params, valid JSON (jsonrpc.Decode checked it), hold
// a string that has no single reading, or "" when every string has one. A
// lone surrogate escape (\uD800–\uDFFF not forming a high+low pair) and a
// byte that is not UTF-8 (json.Valid lets both through) are each decoded
// to U+FFFD by Go, by the canonical params hash and by the idempotency
// ledger, while an upstream may keep them as they are: an approval for
// "acct-\ud800" would let "acct-\udfff" run (issue 16, item 4). Such
// params are refused rather than bound, and the message never echoes the
// value. One pass over the bytes, no allocation. In valid JSON a backslash
// and a byte over 0x7F occur only inside strings, so no string state is
// kept.
func textual(b []byte) string {
	if !utf8.Valid(b) {
		return "a string holds bytes that are not valid UTF-8"
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		i++ // the escaped byte; valid JSON has one
		if i >= len(b) || b[i] != 'u' {
			continue
		}
		r, ok := hex4(b, i+1)
		if !ok {
			continue // not valid JSON; Decode refused it already
		}
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return lone
		case r >= 0xD800 && r <= 0xDBFF:
			if i+2 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
				return lone
			}
			lo, ok := hex4(b, i+3)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return lone
			}
			i += 6
		}
	}
	return ""
}

const lone = `a string holds a lone UTF-16 surrogate escape (\uD800 to \uDFFF not in a high+low pair), which decoders read differently`

// hex4 reads the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// tooLong is the -32602 refusal of a name over MaxNameBytes.
func tooLong(what string) *refusal.Refusal {
	return refusal.New(refusal.InvalidParams, "Invalid params: "+what+" is longer than "+strconv.Itoa(MaxNameBytes)+" bytes")
}

// callMembers are the tools/call params members the gateway reads, by their
// folded spelling. An upstream decoding into structs (Go's encoding/json)
// reads "Name" or "ARGUMENTS" as these; the gateway, reading exactly, would
// not: the call would be checked without them and run with them.
var callMembers = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"name", "arguments", "server", "_meta"} {
		m[jsonrpc.Fold(k)] = k
	}
	return m
}()

// quoteKey quotes a client's key for an error message, cut to 64 runes.
func quoteKey(k string) string {
	if r := []rune(k); len(r) > 64 {
		k = string(r[:64]) + "…"
	}
	return strconv.Quote(k)
}

var _ pipeline.Resolver = Check{}
