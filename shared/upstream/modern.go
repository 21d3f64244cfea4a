package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/registry"
)

// ModernProtocol is the stateless MCP protocol (SEP-2575): no initialize,
// no Mcp-Session-Id; every request carries the protocol version, client
// info and capabilities in params._meta, and the Mcp-Protocol-Version,
// Mcp-Method and Mcp-Name headers. aegis speaks it to upstreams that offer
// it in server/discover (the Go SDK v1.8.0 serves it when stateless).
const ModernProtocol = "2026-07-28"

// The SEP-2575 _meta keys, as the Go SDK v1.8.0 names them.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// IsModern reports whether protocol is the stateless protocol or newer.
// Protocol versions are dates, so they compare as strings.
func IsModern(protocol string) bool { return protocol >= ModernProtocol }

// legacyHintTTL is how long a server that answered server/discover as a
// legacy server is not asked again by this process. The hint only saves a
// round trip; correctness never depends on it.
const legacyHintTTL = 10 * time.Minute

type legacyHints struct{ m sync.Map } // URL → time.Time the hint expires

func (l *legacyHints) known(url string) bool {
	v, ok := l.m.Load(url)
	return ok && time.Now().Before(v.(time.Time))
}

func (l *legacyHints) mark(url string) { l.m.Store(url, time.Now().Add(legacyHintTTL)) }

// discover asks srv whether it speaks ModernProtocol. ok is false (and err
// nil) when it answers as a legacy server would: an HTTP 4xx, a JSON-RPC
// error, or a list of versions without ModernProtocol. A timeout or an
// unreachable server is an error: falling back would only wait twice.
func (c *Client) discover(ctx context.Context, srv *registry.Server) (Session, bool, error) {
	s := Session{Protocol: ModernProtocol}
	resp, _, err := c.Send(ctx, &Exchange{Server: srv, Session: s, ID: json.RawMessage(`0`), Method: "server/discover", Params: json.RawMessage(`{}`)})
	var he *HTTPError
	switch {
	case errors.As(err, &he) && he.Status >= 400 && he.Status < 500:
		return Session{}, false, nil
	case err != nil:
		return Session{}, false, err
	case resp.Error != nil:
		return Session{}, false, nil
	}
	var res struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if json.Unmarshal(resp.Result, &res) != nil || !slices.Contains(res.SupportedVersions, ModernProtocol) {
		return Session{}, false, nil
	}
	return s, true, nil
}

// modernMeta adds the SEP-2575 _meta members to params: the protocol
// version and client info when the client set none, and the capabilities
// caps whatever the client set (the upstream is told the set the gateway
// relays, the one its tools were listed for: Caps).
func (c *Client) modernMeta(params json.RawMessage, protocol string, caps json.RawMessage) json.RawMessage {
	v, _ := json.Marshal(protocol)
	params = SetMeta(params, MetaProtocolVersion, v)
	info, _ := json.Marshal(map[string]string{"name": c.name(), "version": "1"})
	params = SetMeta(params, MetaClientInfo, info)
	if len(caps) == 0 || caps[0] != '{' {
		caps = json.RawMessage(`{}`)
	}
	return setMeta(params, MetaClientCapabilities, caps, true)
}

// SetMeta returns params with params._meta[key] = val, unless _meta already
// has key. params that are absent or null become an object; params that are
// not an object are returned unchanged. The input is never modified.
func SetMeta(params json.RawMessage, key string, val json.RawMessage) json.RawMessage {
	return setMeta(params, key, val, false)
}

// setMeta is SetMeta, replacing a value _meta has for key when replace.
func setMeta(params json.RawMessage, key string, val json.RawMessage, replace bool) json.RawMessage {
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	if params[0] != '{' {
		return params
	}
	meta := jsonrpc.Member(params, "_meta")
	switch {
	case meta == nil || string(meta) == "null":
		meta = json.RawMessage(`{}`)
	case meta[0] != '{':
		return params
	}
	if old := jsonrpc.Member(meta, key); old != nil && (!replace || string(old) == string(val)) {
		return params
	}
	return jsonrpc.Edit(params, "_meta", jsonrpc.Edit(meta, key, val))
}

// standardHeaders sets the SEP-2575 request headers: Mcp-Method, Mcp-Name
// for the methods that name a tool, prompt or resource, and for a
// tools/call the Mcp-Param-* headers of SEP-2243 (from toolDef's
// x-mcp-header annotations).
func standardHeaders(h http.Header, method string, params, toolDef json.RawMessage) {
	h.Set("Mcp-Method", method)
	if method == "tools/call" {
		for k, v := range paramHeaders(toolDef, params) {
			h.Set(k, v)
		}
	}
	var member string
	switch method {
	case "tools/call", "prompts/get":
		member = "name"
	case "resources/read":
		member = "uri"
	default:
		return
	}
	if v, ok := jsonrpc.StringMember(params, member); ok {
		h.Set("Mcp-Name", v)
	}
}

// stripModernMeta returns params without the SEP-2575 _meta members
// (protocol version, client info, capabilities) that a 2026-07-28 client
// sent: a server of an earlier version that sees them takes the request
// for a 2026-07-28 one (the Go SDK's stateful server refuses it with
// -32022). Other _meta members (progressToken, ...) are kept; a _meta
// left empty is removed. The input is never modified.
func stripModernMeta(params json.RawMessage) json.RawMessage {
	meta := jsonrpc.Member(params, "_meta")
	if len(meta) == 0 || meta[0] != '{' {
		return params
	}
	out := meta
	for _, k := range []string{MetaProtocolVersion, MetaClientInfo, MetaClientCapabilities} {
		if jsonrpc.Member(out, k) != nil {
			out = jsonrpc.Edit(out, k, nil)
		}
	}
	if len(out) == len(meta) {
		return params
	}
	empty := true
	jsonrpc.Members(out, func(string, json.RawMessage) { empty = false })
	if empty {
		return jsonrpc.Edit(params, "_meta", nil)
	}
	return jsonrpc.Edit(params, "_meta", out)
}
