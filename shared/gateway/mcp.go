package gateway

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// ProtocolVersions are the MCP versions /mcp speaks in initialize, newest
// first. A client asking for another version in initialize is offered the
// newest.
var ProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// SupportedVersions are every version /mcp speaks: the stateless
// 2026-07-28 (SEP-2575: no initialize, no session; each request carries
// its version, client info and capabilities in _meta) and
// ProtocolVersions. A request carrying another MCP-Protocol-Version is
// refused with 400 and -32022 naming them, which is also how a client
// that probes with server/discover learns which to speak.
var SupportedVersions = append([]string{upstream.ModernProtocol}, ProtocolVersions...)

// mcpHeaders applies the Streamable HTTP transport's header rules to a POST
// on /mcp. It answers the client itself and returns ok false on a
// violation. modern reports a 2026-07-28 request, which must also carry
// Mcp-Method (the body's method), Mcp-Name for tools/call, prompts/get
// and resources/read (the body's name or uri), and the version in _meta
// (the header's).
func (g *Gateway) mcpHeaders(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request) (modern, ok bool) {
	fail := func(status int, ref *refusal.Refusal) (bool, bool) {
		if req.IsNotification() {
			// Seed 004: a notification never produces a JSON-RPC error;
			// the transport status alone says what was wrong.
			w.WriteHeader(status)
			return modern, false
		}
		writeFrame(w, status, refusal.Frame(req.ReplyID(), ref, refusal.LayerGateway, requestNumbering(r, endpoint{mcp: true})))
		return modern, false
	}
	if !acceptsBoth(r.Header.Values("Accept")) {
		return fail(http.StatusNotAcceptable, refusal.New(refusal.InvalidRequest, "Invalid request: Accept must list application/json and text/event-stream"))
	}
	v := r.Header.Get("Mcp-Protocol-Version")
	if v != "" && req.Method != "initialize" && !slices.Contains(SupportedVersions, v) {
		ref := refusal.New(refusal.UnsupportedProtocol, "Unsupported protocol version: MCP-Protocol-Version "+v+"; supported: "+strings.Join(SupportedVersions, ", ")).
			With("supported", SupportedVersions).With("requested", v)
		return fail(http.StatusBadRequest, ref)
	}
	if !upstream.IsModern(v) {
		return false, true
	}
	modern = true
	mismatch := func(msg string) (bool, bool) {
		return fail(http.StatusBadRequest, refusal.New(refusal.HeaderMismatch, "Header mismatch: "+msg))
	}
	if m := r.Header.Get("Mcp-Method"); m == "" {
		return mismatch("the Mcp-Method header is required")
	} else if m != req.Method {
		return mismatch("the Mcp-Method header " + strconv.Quote(m) + " is not the body's method " + strconv.Quote(req.Method))
	}
	if member := nameMember(req.Method); member != "" {
		body, _ := jsonrpc.StringMember(req.Params, member)
		switch n := r.Header.Get("Mcp-Name"); {
		case n == "":
			return mismatch("the Mcp-Name header is required for " + req.Method)
		case n != body:
			return mismatch("the Mcp-Name header " + strconv.Quote(n) + " is not the body's " + member + " " + strconv.Quote(body))
		}
	}
	if req.IsNotification() {
		return modern, true
	}
	mv, _ := jsonrpc.StringMember(jsonrpc.Member(req.Params, "_meta"), upstream.MetaProtocolVersion)
	switch {
	case mv == "":
		return fail(http.StatusBadRequest, refusal.New(refusal.InvalidParams, "Invalid params: _meta \""+upstream.MetaProtocolVersion+"\" is required with MCP-Protocol-Version "+v))
	case mv != v:
		return mismatch("MCP-Protocol-Version " + strconv.Quote(v) + " is not the body's _meta protocol version " + strconv.Quote(mv))
	}
	return modern, true
}

// nameMember is the params member the Mcp-Name header carries for method
// ("" for methods without one).
func nameMember(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read":
		return "uri"
	}
	return ""
}

func acceptsBoth(values []string) bool {
	var js, sse bool
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "*/*":
				js, sse = true, true
			case "application/json", "application/*":
				js = true
			case "text/event-stream", "text/*":
				sse = true
			}
		}
	}
	return js && sse
}

// initialize answers an MCP client's initialize; the session stage has
// opened its gateway session, whose id is both Mcp-Session-Id and
// X-Session-ID.
func (g *Gateway) initialize(w http.ResponseWriter, c *pipeline.Call) {
	asked, _ := jsonrpc.StringMember(c.Params, "protocolVersion")
	version := ProtocolVersions[0]
	if slices.Contains(ProtocolVersions, asked) {
		version = asked
	}
	res, _ := json.Marshal(map[string]any{
		"protocolVersion": version,
		"capabilities":    serverCapabilities,
		"serverInfo":      map[string]string{"name": "aegis", "version": g.o.Version},
		"instructions":    instructions,
	})
	writeFrame(w, http.StatusOK, jsonrpc.Result(c.ID, res))
}

// serverCapabilities are what the gateway announces in initialize, on /mcp
// and /mcp/{server} alike: everything it carries (docs/protocol.md). A
// method that an upstream does not serve gets that upstream's own answer
// (or, for a list, that server contributes nothing).
var serverCapabilities = map[string]any{
	"tools":       map[string]any{"listChanged": true},
	"prompts":     map[string]any{"listChanged": true},
	"resources":   map[string]any{"subscribe": true, "listChanged": true},
	"completions": map[string]any{},
	"logging":     map[string]any{},
}

// discover answers server/discover (SEP-2575): the versions /mcp speaks,
// the capabilities it announces, and who it is, as a cacheable result.
func (g *Gateway) discover(w http.ResponseWriter, c *pipeline.Call) {
	res, _ := json.Marshal(map[string]any{
		"supportedVersions": SupportedVersions,
		"capabilities":      serverCapabilities,
		"instructions":      instructions,
		"_meta":             map[string]any{"io.modelcontextprotocol/serverInfo": map[string]string{"name": "aegis", "version": g.o.Version}},
		"resultType":        "complete",
		"ttlMs":             0,
		"cacheScope":        "private",
	})
	writeFrame(w, http.StatusOK, jsonrpc.Result(c.ID, res))
}

// instructions are the gateway's own, in initialize and server/discover.
const instructions = "aegis gateway: the tools, prompts and resources of your tenant's MCP servers, checked and audited."

// complete marks a result the gateway built itself as complete for a
// 2026-07-28 client (SEP-2575's resultType; a result the upstream built
// carries its own), with the cache hints a list must carry (ttlMs 0 and
// cacheScope private: a list is the caller's view, filtered for it, and
// may change with any kill switch), and leaves it unchanged for the
// others.
func complete(c *pipeline.Call, res json.RawMessage) json.RawMessage {
	if !c.Stateless {
		return res
	}
	if jsonrpc.Member(res, "resultType") == nil {
		res = jsonrpc.Edit(res, "resultType", json.RawMessage(`"complete"`))
	}
	if strings.HasSuffix(c.Method, "/list") {
		if jsonrpc.Member(res, "ttlMs") == nil {
			res = jsonrpc.Edit(res, "ttlMs", json.RawMessage(`0`))
		}
		if jsonrpc.Member(res, "cacheScope") == nil {
			res = jsonrpc.Edit(res, "cacheScope", json.RawMessage(`"private"`))
		}
	}
	return res
}
