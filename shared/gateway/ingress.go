package gateway

import (
	"context"
	"net/http"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/content"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
)

// Ingress (issue 26): what a server sends toward the client outside the
// decided requests' results slot passes content.Results.Ingress here
// (docs/design/ingress.md). The call sites are marked "INGRESS" so that
// the message table can take them over.

// ingress checks msg, one whole message a server sends toward rec's
// client, recording its findings on rec. It returns what to forward, or
// why nothing is: the refusal to answer with (a result or an error), to
// send the server in the client's place (a request), or to record (a
// dropped notification). A message that cannot be read is refused as an
// internal error: it cannot be checked.
func (g *Gateway) ingress(ctx context.Context, rec *pipeline.Call, kind content.MessageKind, method string, msg []byte) ([]byte, *refusal.Refusal) {
	m := content.Message{Kind: kind, Method: method, CorrelationID: rec.CorrelationID, Raw: msg}
	if rec.Server != nil {
		m.Server = rec.Server.Name
	}
	v, err := g.content.results.Ingress(ctx, rec.Tenant, m)
	if err != nil {
		g.o.Logger.WarnContext(ctx, "server message not forwarded", "correlation_id", rec.CorrelationID, "tenant", rec.Tenant.ID, "server", m.Server, "err", err)
		return nil, refusal.Internal(rec.CorrelationID)
	}
	for _, f := range v.Findings {
		rec.Found(f)
	}
	return v.Out, v.Refusal
}

// serverMessage tells what msg, a message of a server's event stream that
// is not a request, is: a notification (it has a method), or a response
// (a result, or an error).
func serverMessage(msg []byte) (content.MessageKind, string) {
	if method, _ := jsonrpc.StringMember(msg, "method"); method != "" {
		return content.NotificationMessage, method
	}
	if jsonrpc.Member(msg, "error") != nil {
		return content.ErrorMessage, ""
	}
	return content.ResultMessage, ""
}

// relayNotification sends out msg, a message of srv's stream to c's
// client that is not a request (a notification, or a stray response),
// once ingress has checked it. Refused, it is dropped (a notification
// carries no error) and audited as refused; masked or monitored, it is
// forwarded and audited with its findings. A clean one is not audited:
// a record per progress tick would cost a store write each.
func (g *Gateway) relayNotification(c *pipeline.Call, srv *registry.Server, out *stream, msg []byte) {
	kind, method := serverMessage(msg)
	name := method
	if name == "" {
		name = kind.String() // a response to no request of the client's
	}
	rec := g.relayedCall(c, srv, name)
	msg, ref := g.ingress(context.Background(), rec, kind, method, msg)
	if ref == nil && len(rec.Findings) == 0 {
		out.Event(msg)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), SettleTimeout)
	defer cancel()
	if ref != nil {
		g.audit(ctx, rec, refusedOutcome(ref), int(ref.Code), string(ref.Word), pipeline.Results.String(), "server notification dropped")
		return
	}
	outcome, code := audit.OutcomeAllowed, 0
	if !out.Event(msg) {
		outcome, code = audit.OutcomeError, int(refusal.CodeInternal)
	}
	g.audit(ctx, rec, outcome, code, "", "", "server notification")
}

// relayedCall is the record of a message srv sends c's client outside
// c's own answer (a request or a notification, method): audited with
// its method, srv, and "client:METHOD" as its tool.
func (g *Gateway) relayedCall(c *pipeline.Call, srv *registry.Server, method string) *pipeline.Call {
	return &pipeline.Call{
		Tenant: c.Tenant, Caller: c.Caller, KeyID: c.KeyID, CorrelationID: c.CorrelationID,
		Method: method, Start: g.o.Now(), SessionID: c.SessionID,
		PolicyHash: c.PolicyHash, Inline: c.Inline, MCP: true, Stateless: c.Stateless,
		Relayed: true, Server: srv, Tool: clientTarget(method), UpstreamTool: clientTarget(method),
	}
}

// answerChecked writes frame, the gateway's answer to c built from what
// a server sent (a relayed result or error, a list), once ingress has
// checked it: masked, or refused with its -32050 or -32052. An answer
// with findings, or refused, is audited.
func (g *Gateway) answerChecked(ctx context.Context, w http.ResponseWriter, c *pipeline.Call, frame []byte) {
	kind := content.ResultMessage
	if jsonrpc.Member(frame, "error") != nil {
		kind = content.ErrorMessage
	}
	out, ref := g.ingress(ctx, c, kind, c.Method, frame)
	if ref != nil {
		g.auditRefusal(ctx, c, ref, pipeline.Results.String())
		writeRefusal(w, c.ID, ref, "", c.Method)
		return
	}
	writeFrame(w, http.StatusOK, out)
	if len(c.Findings) > 0 {
		st := &settler{parent: ctx, call: c}
		defer st.stop()
		outcome := audit.OutcomeAllowed
		if kind == content.ErrorMessage {
			outcome = audit.OutcomeError
		}
		g.audit(st.ctx(), c, outcome, 0, "", "", "")
	}
}

// refusedOutcome is the outcome of a message refused with ref.
func refusedOutcome(ref *refusal.Refusal) audit.Outcome {
	if failed(ref.Word) {
		return audit.OutcomeError
	}
	return audit.OutcomeRefused
}
