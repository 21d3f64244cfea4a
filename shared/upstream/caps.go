package upstream

import (
	"encoding/json"
	"strconv"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
)

// Caps is a client's capabilities as the gateway announces them to
// upstream servers: the canonical set of what it can relay (one bit per
// capability), read from what the client declared by ParseCaps. An
// upstream is told Caps.JSON, never the client's own object, and the tool
// catalogs are listed once per Caps (route.Catalog), so that what a client
// is listed, what it can call and what the upstream believes of it are
// one set. The zero Caps declares nothing.
//
// Carried: sampling (with its context and tools members), elicitation
// (its form and url modes; an empty elicitation object is form, as MCP
// 2025-11-25 says) and roots, whose requests the gateway relays to the
// client during a call or on its stream. Not carried: roots.listChanged
// (the gateway does not relay a client's notifications upstream, so an
// upstream waiting for notifications/roots/list_changed would wait for
// nothing), experimental, extensions and tasks (requests and notifications
// the gateway has no row for). There are 40 sets.
type Caps uint8

// The capabilities of a Caps.
const (
	CapSampling        Caps = 1 << iota // sampling
	CapSamplingContext                  // sampling.context
	CapSamplingTools                    // sampling.tools
	CapElicitForm                       // elicitation.form (or an empty elicitation)
	CapElicitURL                        // elicitation.url
	CapRoots                            // roots

	capAll = CapRoots<<1 - 1
)

// ParseCaps reads the capabilities object a client declared (initialize's
// params.capabilities, or a 2026-07-28 request's _meta member
// MetaClientCapabilities). A capability counts when its member is an
// object; anything else (absent, null, a string) does not. Unknown members
// are dropped (see Caps).
func ParseCaps(raw json.RawMessage) Caps {
	var c Caps
	if len(raw) == 0 || raw[0] != '{' {
		return 0
	}
	if s := object(raw, "sampling"); s != nil {
		c |= CapSampling
		if object(s, "context") != nil {
			c |= CapSamplingContext
		}
		if object(s, "tools") != nil {
			c |= CapSamplingTools
		}
	}
	if e := object(raw, "elicitation"); e != nil {
		form, url := object(e, "form") != nil, object(e, "url") != nil
		if form || !url {
			c |= CapElicitForm
		}
		if url {
			c |= CapElicitURL
		}
	}
	if object(raw, "roots") != nil {
		c |= CapRoots
	}
	return c
}

// object is obj's member key when it is a JSON object, else nil.
func object(obj json.RawMessage, key string) json.RawMessage {
	v := jsonrpc.Member(obj, key)
	if len(v) == 0 || v[0] != '{' {
		return nil
	}
	return v
}

// AsksClient reports whether c lets a server send the client requests
// (sampling, elicitation, roots).
func (c Caps) AsksClient() bool { return c != 0 }

// JSON is c as the capabilities object an upstream is told: members in a
// fixed order, each an empty object but for its carried modes
// (`{"elicitation":{"form":{}},"roots":{}}`); nil for the zero Caps (the
// upstream is told {}).
func (c Caps) JSON() json.RawMessage {
	c &= capAll
	if c == 0 {
		return nil
	}
	b := make([]byte, 0, 96)
	b = append(b, '{')
	member := func(name string) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":{`...)
	}
	if c&(CapElicitForm|CapElicitURL) != 0 {
		member("elicitation")
		if c&CapElicitForm != 0 {
			b = append(b, `"form":{}`...)
		}
		if c&CapElicitURL != 0 {
			if c&CapElicitForm != 0 {
				b = append(b, ',')
			}
			b = append(b, `"url":{}`...)
		}
		b = append(b, '}')
	}
	if c&CapRoots != 0 {
		member("roots")
		b = append(b, '}')
	}
	if c&CapSampling != 0 {
		member("sampling")
		if c&CapSamplingContext != 0 {
			b = append(b, `"context":{}`...)
		}
		if c&CapSamplingTools != 0 {
			if c&CapSamplingContext != 0 {
				b = append(b, ',')
			}
			b = append(b, `"tools":{}`...)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// Tag is c as two lowercase hex digits (a session id's suffix, see
// sessioncheck.Caps).
func (c Caps) Tag() string {
	const hex = "0123456789abcdef"
	return string([]byte{hex[c>>4], hex[c&0xf]})
}

// ParseCapsTag reads what Tag wrote; ok is false for anything else (two
// hex digits naming a capability Caps does not have included).
func ParseCapsTag(s string) (Caps, bool) {
	if len(s) != 2 || s[0] < '0' || s[0] > 'f' || s[1] < '0' || s[1] > 'f' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 16, 8)
	if err != nil || !Caps(n).valid() || Caps(n).Tag() != s {
		return 0, false
	}
	return Caps(n), true
}

// valid reports whether ParseCaps can return c: no bit besides the six,
// and sampling's members only with sampling. There are 40 such sets.
func (c Caps) valid() bool {
	return c&^capAll == 0 && (c&(CapSamplingContext|CapSamplingTools) == 0 || c&CapSampling != 0)
}
