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
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
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
		writeRefusal(w, c, refusal.Unknown("server for "+c.Method), "")
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
	st := &settler{parent: ctx, call: c}
	defer st.stop()
	var (
		ok      *jsonrpc.Response
		upErr   *jsonrpc.Response
		failure error
	)
	for i, a := range answers {
		if a.err == nil {
			// The answer's checks (the results slot), one answer at a
			// time: they record their findings on c.
			c.Server = &servers[i]
			if err := g.pipe.RunResults(ctx, c, a.resp); err != nil {
				ref := refusal.Internal(c.CorrelationID)
				_ = errors.As(err, &ref)
				g.auditRefusal(ctx, c, ref, refusedSlot(c))
				writeRefusal(w, c, ref, "")
				return
			}
		}
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
	if len(servers) > 1 {
		c.Server = nil // the record names no one server
	}
	switch {
	case failure != nil:
		ref, o := g.upstreamRefusal(st.ctx(), c, failure)
		g.audit(st.ctx(), c, o, int(ref.Code), string(ref.Word), audit.SlotUpstream, "")
		writeRefusal(w, c, ref, "")
	case upErr != nil && (ok == nil || errorCode(upErr.Error) != jsonrpc.CodeMethodNotFound):
		g.audit(st.ctx(), c, audit.OutcomeError, int(errorCode(upErr.Error)), "", "", "")
		writeFrame(w, http.StatusOK, jsonrpc.RawError(c.ID, upErr.Error))
	default:
		g.audit(st.ctx(), c, audit.OutcomeAllowed, 0, "", "", "")
		writeFrame(w, http.StatusOK, jsonrpc.Result(c.ID, ok.Result))
	}
}

// clientAnswer carries a client's answer to a request a server sent it
// (sampling/createMessage, elicitation/create, roots/list, ping) back to
// that server, when, and only when, it answers a request of that session
// that is outstanding (session.Outstanding, recorded when the request was
// relayed: the id the client was given, the server, the method), once:
// the entry is taken by the first answer. Anything else (an id no server
// of the session asked about, an answer sent twice or after
// session.AskedTTL, another session's) is refused with HTTP 400 and
// audited (-32600, slot "asked"), and reaches no server. The upstream
// session is the gateway session's (Mcp-Session-Id), and the upstream
// gets the answer with its own id. It is answered 202, as the transport
// answers a response; an answer without a session is 400, and one whose
// session is unknown 404, each with an {"error": ...} body.
//
// The answer is a relayed message (pipeline.Answered): it runs the
// stages of that scope (session, rate limit, route, kill switch, policy:
// the manifests, by the method of the request it answers, and content:
// the egress scan of its result or error), counted in the session's and
// key's windows and in the "client:response" window of its server.
// Refused, it is not carried, and the server gets the refusal as the
// answer in its place (-32053, -32005, -32004 ...), since the request it
// sent must be answered (its tool call waits on it) -- except a stopped
// server, which receives nothing. The POST is answered 202 all the same
// (the client learns of the refusal from the server's answer to its
// call: clients such as the Go SDK's abort their call when the POST of
// an answer fails), except over a rate limit (429 with the message, as
// before) and when a check could not decide (503). It is audited with the
// method "response" and the server.
func (g *Gateway) clientAnswer(ctx context.Context, w http.ResponseWriter, r *http.Request, ep endpoint, key registry.Key, tenant registry.Tenant, corr string, body []byte, resp jsonrpc.Response) {
	c := &pipeline.Call{
		Tenant: tenant, Caller: key.Caller, KeyID: key.ID, CorrelationID: corr,
		Method: pipeline.ResponseMethod, ID: resp.ID, Params: json.RawMessage(body), Start: g.o.Now(), PolicyHash: audit.PolicyHashNone,
		Inline: g.b.InProcess(), MCP: true, SessionID: r.Header.Get("Mcp-Session-Id"),
		Relayed: true, Tool: clientTarget(pipeline.ResponseMethod), UpstreamTool: clientTarget(pipeline.ResponseMethod),
	}
	ctx = g.withConnections(ctx, c) // the answer goes to the server with this caller's token
	st := &settler{parent: ctx, call: c}
	defer st.stop()
	notAsked := func() {
		ref := refusal.New(refusal.InvalidRequest, "Invalid request: this response answers no outstanding request of this session")
		g.audit(st.ctx(), c, audit.OutcomeRefused, int(ref.Code), string(ref.Word), audit.SlotAsked, "client answer not carried")
		writeJSON(w, http.StatusBadRequest, `{"error":"this response answers no request the gateway relayed to this session"}`)
	}
	if c.SessionID == "" {
		writeJSON(w, http.StatusBadRequest, `{"error":"Mcp-Session-Id header is required"}`)
		return
	}
	name, upID, ok := unrelayID(resp.ID)
	if !ok || (ep.server != "" && name != ep.server) || len(resp.ID) > session.MaxAskedKeyBytes {
		notAsked()
		return
	}
	asked, err := g.b.Answer(ctx, tenant.ID, c.SessionID, string(resp.ID), g.o.Now())
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && asked.Server != name):
		notAsked()
		return
	case err != nil:
		g.o.Logger.Error("outstanding server requests unreadable; client answer not carried", "correlation_id", corr, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, `{"error":"unavailable; correlation id `+corr+`"}`)
		return
	}
	c.Target = asked.Method
	servers, err := g.cat.Servers(ctx, tenant.ID, name)
	if err != nil || len(servers) == 0 {
		notAsked()
		return
	}
	c.Server = &servers[0]
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
		if ref == nil {
			ref = refusal.Internal(corr)
		}
		if c.RefusedBy != pipeline.KillSwitch {
			// The server waits for an answer: it gets the refusal.
			g.answerUpstream(context.WithoutCancel(ctx), c, sess, upID, ref)
		}
		outcome, status := audit.OutcomeRefused, http.StatusAccepted
		switch {
		case ref.Code == refusal.CodeRateLimited:
			status = http.StatusTooManyRequests
		case failed(ref.Word):
			outcome, status = audit.OutcomeError, http.StatusServiceUnavailable
		}
		g.audit(st.ctx(), c, outcome, int(ref.Code), string(ref.Word), refusedSlot(c), "client answer not carried")
		if status == http.StatusAccepted {
			w.WriteHeader(status)
			return
		}
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
