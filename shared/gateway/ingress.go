package gateway

import (
	"context"
	"net/http"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/content"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// Ingress over what a server sends that is not carried by the message
// table's ingress slot: the gateway's answers built from a server's
// answer outside the results slot (the lists). The ingress slot itself is
// content.Results.CheckMessage (stages.go); both are content.Results.Ingress
// (docs/design/ingress.md).

// checkAnswer runs Ingress over frame, an answer to c built from what a
// server sent, recording its findings on c. It returns what to forward,
// or the refusal to answer with. A frame that cannot be read is refused as
// an internal error: it cannot be checked.
func (g *Gateway) checkAnswer(ctx context.Context, c *pipeline.Call, kind content.MessageKind, frame []byte) ([]byte, *refusal.Refusal) {
	m := content.Message{Kind: kind, Method: c.Method, CorrelationID: c.CorrelationID, Raw: frame}
	if c.Server != nil {
		m.Server = c.Server.Name
	}
	v, err := g.content.results.Ingress(ctx, c.Tenant, m)
	if err != nil {
		g.o.Logger.WarnContext(ctx, "server answer not forwarded", "correlation_id", c.CorrelationID, "tenant", c.Tenant.ID, "server", m.Server, "err", err)
		return nil, refusal.Internal(c.CorrelationID)
	}
	for _, f := range v.Findings {
		c.Found(f)
	}
	return v.Out, v.Refusal
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
	out, ref := g.checkAnswer(ctx, c, kind, frame)
	if ref != nil {
		g.auditRefusal(ctx, c, ref, pipeline.Results.String())
		writeRefusal(w, c, ref, "")
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
