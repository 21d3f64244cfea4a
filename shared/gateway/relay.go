package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/route"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// relay sends c, a request of the session that is not decided per call
// (resources/subscribe and unsubscribe to the server that has the
// resource; logging/setLevel to every server of the endpoint), to each of
// servers on the gateway session's upstream sessions, at once. The
// answer is the first server's result when every server answered with
// one; else the first upstream error (a server that does not know the
// method, -32601, is left out when another one answered). Nothing is
// answered until every server has.
func (g *Gateway) relay(ctx context.Context, w http.ResponseWriter, ep endpoint, c *pipeline.Call, servers []registry.Server) {
	if len(servers) == 0 || servers[0].Name == "" {
		writeRefusal(w, c.ID, refusal.Unknown("server for "+c.Method), "", c.Method)
		return
	}
	ctx = g.up.WithBudget(ctx)
	params := route.UpstreamParams(c)
	type answer struct {
		resp *jsonrpc.Response
		err  error
	}
	answers := make([]answer, len(servers))
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ex, settle := g.exchange(c, &servers[i], ep, params)
			resp, used, err := g.up.Call(ctx, ex)
			g.endTransient(c, &servers[i], used)
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), SettleTimeout)
			settle(sctx, used)
			cancel()
			answers[i] = answer{resp, err}
		}()
	}
	wg.Wait()
	var (
		ok      *jsonrpc.Response
		upErr   *jsonrpc.Response
		failure error
	)
	for i, a := range answers {
		switch {
		case a.err != nil:
			g.o.Logger.Warn(c.Method+": upstream failed", "correlation_id", c.CorrelationID, "tenant", c.Tenant.ID, "server", servers[i].Name, "err", a.err)
			if failure == nil {
				failure = a.err
			}
		case a.resp.Error != nil:
			if upErr == nil || errorCode(upErr.Error) == jsonrpc.CodeMethodNotFound {
				upErr = a.resp
			}
		case ok == nil:
			ok = a.resp
		}
	}
	switch {
	case failure != nil:
		ref, _ := upstreamRefusal(failure, g.o.Settings.UpstreamTimeout)
		writeRefusal(w, c.ID, ref, "", c.Method)
	case upErr != nil && (ok == nil || errorCode(upErr.Error) != jsonrpc.CodeMethodNotFound):
		g.answerChecked(ctx, w, c, jsonrpc.RawError(c.ID, upErr.Error)) // INGRESS (issue 26)
	default:
		g.answerChecked(ctx, w, c, jsonrpc.Result(c.ID, ok.Result)) // INGRESS (issue 26)
	}
}

// clientAnswer carries a client's answer to a request an upstream sent it
// during a call (sampling/createMessage, elicitation/create, roots/list)
// back to that upstream: the answer's id names the server (relayID), the
// upstream session is the gateway session's (Mcp-Session-Id), and the
// upstream gets the answer with its own id. It is answered 202, as the
// transport answers a response; an answer whose id names no server of the
// tenant's is 400, and one whose session is unknown 404, each with an
// {"error": ...} body. The answer is a relayed message
// (pipeline.Relayed): it runs the stages of that scope (session, rate
// limit, route), counted in the session's and key's windows and in the
// "client:response" window of its server. Over the limit it is 429 and
// not carried: the upstream gets the -32004 in its place, so it stops
// waiting. It is audited with the method "response" and the server.
func (g *Gateway) clientAnswer(ctx context.Context, w http.ResponseWriter, r *http.Request, ep endpoint, key registry.Key, tenant registry.Tenant, corr string, body []byte, resp jsonrpc.Response) {
	c := &pipeline.Call{
		Tenant: tenant, Caller: key.Caller, KeyID: key.ID, CorrelationID: corr,
		Method: "response", ID: resp.ID, Start: g.o.Now(), PolicyHash: audit.PolicyHashNone,
		Inline: g.b.InProcess(), MCP: true, SessionID: r.Header.Get("Mcp-Session-Id"),
		Relayed: true, Tool: clientTarget("response"), UpstreamTool: clientTarget("response"),
	}
	name, upID, ok := unrelayID(resp.ID)
	if !ok || (ep.server != "" && name != ep.server) {
		writeJSON(w, http.StatusBadRequest, `{"error":"this response answers no request the gateway relayed"}`)
		return
	}
	servers, err := g.cat.Servers(ctx, tenant.ID, name)
	if err != nil || len(servers) == 0 {
		writeJSON(w, http.StatusBadRequest, `{"error":"this response answers no request the gateway relayed"}`)
		return
	}
	c.Server = &servers[0]
	st := &settler{parent: ctx, call: c}
	defer st.stop()
	err = g.pipe.Run(ctx, c)
	var ref *refusal.Refusal
	switch {
	case errors.As(err, &ref) && ref.Word == refusal.SessionError:
		writeJSON(w, http.StatusNotFound, `{"error":"unknown session"}`)
		return
	case errors.As(err, &ref) && ref.Code == refusal.CodeInvalidRequest:
		writeJSON(w, http.StatusBadRequest, `{"error":"Mcp-Session-Id header is required"}`)
		return
	}
	sess, ok := upstream.DecodeSession(c.Session.Upstream[name])
	if !ok {
		writeJSON(w, http.StatusNotFound, `{"error":"no upstream session of this session for the server the response names"}`)
		return
	}
	if err != nil {
		// Refused (the rate limit): the upstream gets the refusal instead
		// of the answer.
		if ref == nil {
			ref = refusal.Internal(corr)
		}
		g.answerUpstream(context.WithoutCancel(ctx), c, sess, upID, ref)
		outcome, status := audit.OutcomeRefused, http.StatusTooManyRequests
		if ref.Code != refusal.CodeRateLimited {
			outcome, status = audit.OutcomeError, http.StatusServiceUnavailable
		}
		g.audit(st.ctx(), c, outcome, int(ref.Code), string(ref.Word), refusedSlot(c), "client answer not carried")
		b, _ := json.Marshal(map[string]string{"error": ref.Message})
		writeFrame(w, status, b)
		return
	}
	msg := jsonrpc.Edit(json.RawMessage(body), "id", upID)
	_, _, err = g.up.Send(context.WithoutCancel(ctx), &upstream.Exchange{Server: c.Server, Session: sess, Body: msg})
	outcome, code := audit.OutcomeAllowed, 0
	if err != nil {
		g.o.Logger.Warn("client answer not delivered upstream", "correlation_id", corr, "tenant", tenant.ID, "server", name, "err", err)
		outcome, code = audit.OutcomeError, int(refusal.CodeUpstream)
	}
	g.audit(st.ctx(), c, outcome, code, "", "", "")
	w.WriteHeader(http.StatusAccepted)
}
