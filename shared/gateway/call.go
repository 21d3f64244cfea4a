package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/idempotency"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// toolsList answers from the tool catalog, filtered by the same decision
// code tools/call uses (pipeline.Visible), so a hidden tool cannot be
// called and a callable tool is never hidden.
func (g *Gateway) toolsList(ctx context.Context, w http.ResponseWriter, ep endpoint, c *pipeline.Call) {
	view, errs, err := g.cat.View(ctx, c.Tenant.ID, ep.server)
	if err != nil {
		g.internal(w, c, err)
		return
	}
	for _, e := range errs {
		g.o.Logger.Warn("tools/list: server skipped", "correlation_id", c.CorrelationID, "tenant", c.Tenant.ID, "err", e)
	}
	if ep.server != "" && len(errs) > 0 {
		writeRefusal(w, c.ID, refusal.Upstream("could not list the tools of "+ep.server), "", c.Method)
		return
	}
	out := make([]byte, 0, 4096)
	out = append(out, `{"tools":[`...)
	n := 0
	for _, e := range view {
		if !g.pipe.Visible(ctx, c, e.Server, e.Tool.Name) {
			continue
		}
		def := e.Tool.Def
		if e.Name != e.Tool.Name {
			name, _ := json.Marshal(e.Name)
			def = jsonrpc.Edit(def, "name", name)
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, def...)
		n++
	}
	out = append(out, "]}"...)
	writeFrame(w, http.StatusOK, jsonrpc.Result(c.ID, out))
}

// toolsCall runs the whole pipeline, forwards what is allowed, runs the
// response-side stages over the answer, and audits every outcome.
func (g *Gateway) toolsCall(ctx context.Context, w http.ResponseWriter, r *http.Request, ep endpoint, c *pipeline.Call) {
	// One UPSTREAM_TIMEOUT_SECS for all this call sends upstream: a cold
	// catalog's tools/list during routing and the call itself share it.
	ctx = g.up.WithBudget(ctx)
	outcome, code, word := audit.OutcomeAllowed, 0, ""
	sent, finished := false, false
	// finish gives back what the checks took (a lease, an unused
	// approval) and records a breaker result. A call that reached the
	// upstream finishes as answered, whatever a response stage then said:
	// it may have run, so nothing it used is given back.
	finish := func() {
		if finished {
			return
		}
		finished = true
		o := outcome
		if sent && o == audit.OutcomeRefused {
			o = audit.OutcomeAllowed
		}
		c.Finish(o)
	}
	defer func() {
		// Finishing and writing the audit record are independent store
		// writes: overlap them so they cost one round trip, not two.
		done := c.Async(finish)
		g.audit(ctx, c, outcome, code, word)
		done()
	}()
	refuse := func(err error) {
		var ref *refusal.Refusal
		if errors.As(err, &ref) {
			outcome, code, word = audit.OutcomeRefused, int(ref.Code), string(ref.Word)
			if ref.Word == refusal.InternalError {
				outcome = audit.OutcomeError
			}
		} else {
			outcome, code, word = audit.OutcomeError, int(refusal.CodeInternal), string(refusal.InternalError)
		}
		finish() // a refused call holds nothing when its answer is written
		g.refuse(w, ep, c, err)
	}
	err := g.pipe.Run(ctx, c)
	g.sessionHeaders(w, ep, c)
	if err != nil {
		refuse(err)
		return
	}
	resp, err := g.forward(ctx, r, c, &sent)
	if err != nil {
		var ref *refusal.Refusal
		if errors.As(err, &ref) { // from the idempotency ledger
			refuse(ref)
			return
		}
		ref, o := upstreamRefusal(err, g.o.Settings.UpstreamTimeout)
		g.o.Logger.Warn("upstream failed", "correlation_id", c.CorrelationID, "tenant", c.Tenant.ID, "server", c.Server.Name, "err", err)
		outcome, code, word = o, int(ref.Code), string(ref.Word)
		writeRefusal(w, c.ID, ref, c.Tenant.RefusalShape, c.Method)
		return
	}
	if err := g.pipe.RunResults(ctx, c, resp); err != nil {
		refuse(err)
		return
	}
	if resp.Error != nil {
		// The upstream's own JSON-RPC error: passed through with its code.
		outcome = audit.OutcomeError
		var e struct {
			Code int `json:"code"`
		}
		_ = json.Unmarshal(resp.Error, &e)
		code = e.Code
		writeFrame(w, http.StatusOK, jsonrpc.RawError(c.ID, resp.Error))
		return
	}
	writeFrame(w, http.StatusOK, jsonrpc.Result(c.ID, resp.Result))
}

// forward sends the call to its upstream on the gateway session's upstream
// session, storing the upstream session when it was (re)opened. A call with
// an Idempotency-Key goes through the ledger first: a completed key is
// answered from it without an upstream call, and a refusal (-32602 other
// params, -32063 in flight) comes back as a *refusal.Refusal error. The
// client's own headers are never forwarded (its Authorization least of
// all): only traceparent and Idempotency-Key travel upstream.
func (g *Gateway) forward(ctx context.Context, r *http.Request, c *pipeline.Call, sent *bool) (*jsonrpc.Response, error) {
	params := c.Params
	if c.UpstreamTool != c.Tool {
		name, _ := json.Marshal(c.UpstreamTool)
		params = jsonrpc.Edit(params, "name", name)
	}
	if jsonrpc.Member(params, "server") != nil {
		params = jsonrpc.Edit(params, "server", nil)
	}
	hdr := http.Header{}
	if tp := r.Header.Get("traceparent"); tp != "" {
		hdr.Set("traceparent", tp)
	}
	var claim *idempotency.Claim
	if key := c.IdempotencyKey; key != "" {
		hdr.Set("Idempotency-Key", key)
		k, _ := json.Marshal(key)
		params = upstream.SetMeta(params, idempotency.MetaKey, k)
		{
			cl, ref, err := g.ledger.Begin(ctx, c.Tenant.ID, key, idempotency.Hash(c.Server.Name, c.UpstreamTool, params), idempotency.NewHolder())
			switch {
			case ref != nil:
				return nil, ref
			case err != nil:
				g.o.Logger.Warn("idempotency ledger unavailable; call forwarded without it", "correlation_id", c.CorrelationID, "err", err)
			case cl.Replay:
				return &jsonrpc.Response{ID: c.ID, Result: cl.Result, Error: cl.ErrObj}, nil
			default:
				claim = cl
			}
		}
	}
	prev, _ := upstream.DecodeSession(c.Session.Upstream[c.Server.Name])
	ex := &upstream.Exchange{Server: c.Server, Session: prev, ID: c.ID, Method: "tools/call", Params: params, Header: hdr, ToolDef: c.ToolDef}
	uctx := ctx
	var span trace.Span
	if g.o.Tracer != nil {
		uctx, span = g.o.Tracer.StartUpstream(ctx, c.Server.Name, c.UpstreamTool)
	}
	*sent = true // from here on the call may reach the upstream
	resp, used, err := g.up.Call(uctx, ex)
	if span != nil {
		g.o.Tracer.EndUpstream(span, resp, err)
	}
	if used != prev && used.Protocol != "" {
		if serr := g.b.SetUpstream(ctx, c.Tenant.ID, c.SessionID, c.Server.Name, used.Encode()); serr != nil {
			g.o.Logger.Warn("could not store upstream session", "correlation_id", c.CorrelationID, "err", serr)
		}
	}
	if claim != nil {
		bg := context.WithoutCancel(ctx)
		var lerr error
		if err != nil {
			lerr = claim.Release(bg)
		} else {
			lerr = claim.Complete(bg, resp.Result, resp.Error)
		}
		if lerr != nil {
			g.o.Logger.Warn("idempotency ledger not updated", "correlation_id", c.CorrelationID, "err", lerr)
		}
	}
	return resp, err
}

// upstreamRefusal maps an upstream failure to the seed's contract.
func upstreamRefusal(err error, timeout time.Duration) (*refusal.Refusal, audit.Outcome) {
	if upstream.CallSent(err) {
		return refusal.Timeout(int(timeout.Seconds())), audit.OutcomeIndeterminate
	}
	return refusal.Upstream(err.Error()), audit.OutcomeError
}

func (g *Gateway) audit(ctx context.Context, c *pipeline.Call, o audit.Outcome, code int, word string) {
	rec := audit.Record{
		Time:          c.Start.UTC(),
		Tenant:        c.Tenant.ID,
		Caller:        c.Caller,
		Session:       c.SessionID,
		CorrelationID: c.CorrelationID,
		Layer:         "gateway",
		Method:        c.Method,
		Tool:          c.Tool,
		ParamsHash:    audit.HashParams(jsonrpc.Member(c.Params, "arguments")),
		Code:          code,
		Word:          word,
		Outcome:       o,
		LatencyMs:     float64(g.o.Now().Sub(c.Start).Microseconds()) / 1000,
		PolicyHash:    c.PolicyHash,
		Degraded:      c.DegradedNames(),
	}
	if c.Server != nil {
		rec.Server = c.Server.Name
		rec.Tool = c.UpstreamTool
	}
	if g.o.Metrics != nil {
		g.o.Metrics.RecordCall(rec)
	}
	if g.o.Tracer != nil {
		g.o.Tracer.AnnotateCall(ctx, rec)
	}
	if err := g.b.Write(context.WithoutCancel(ctx), rec); err != nil {
		g.o.Logger.ErrorContext(ctx, "audit write failed; record kept in this log line", "record", rec, "err", err)
	}
}
