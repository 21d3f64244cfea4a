package gateway

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// ProtocolVersions are the MCP versions /mcp speaks, newest first. A client
// asking for another version in initialize is offered the newest; a request
// carrying an unsupported MCP-Protocol-Version header is refused with 400,
// which is also how a 2026-07-28 client's server/discover probe learns to
// fall back to initialize.
var ProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// mcpHeaders applies the Streamable HTTP transport's header rules to a POST
// on /mcp. It answers the client itself and returns false on a violation.
func (g *Gateway) mcpHeaders(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request) bool {
	fail := func(status int, msg string) bool {
		if req.IsNotification() {
			// Seed 004: a notification never produces a JSON-RPC error;
			// the transport status alone says what was wrong.
			w.WriteHeader(status)
			return false
		}
		ref := refusal.New(refusal.InvalidRequest, msg)
		writeFrame(w, status, refusal.Frame(req.ReplyID(), ref, refusal.LayerGateway))
		return false
	}
	if !acceptsBoth(r.Header.Values("Accept")) {
		return fail(http.StatusNotAcceptable, "Invalid request: Accept must list application/json and text/event-stream")
	}
	if v := r.Header.Get("MCP-Protocol-Version"); v != "" && req.Method != "initialize" && !slices.Contains(ProtocolVersions, v) {
		return fail(http.StatusBadRequest, "Invalid request: unsupported MCP-Protocol-Version "+v+"; supported: "+strings.Join(ProtocolVersions, ", "))
	}
	return true
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
		"instructions":    "aegis gateway: the tools, prompts and resources of your tenant's MCP servers, checked and audited.",
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
