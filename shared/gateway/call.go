package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/content"
	"github.com/aegis-gw/aegis/shared/idempotency"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/route"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/sessioncheck"
	"github.com/aegis-gw/aegis/shared/telemetry"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// list answers tools/list, prompts/list, resources/list or
// resources/templates/list from its catalog (route.Catalogs) as the
// servers list them to a client of c's capability set
// (sessioncheck.Caps), one page with every entry, each named as the catalog exposes it (its key member
// edited when that is "server.name"), and filtered by the same decision
// code the decided requests use (pipeline.Visible, with the entry's name
// as route.Named gives it for prompts and resources), so a hidden entry
// cannot be read and a readable one is never hidden.
func (g *Gateway) list(ctx context.Context, w http.ResponseWriter, ep endpoint, c *pipeline.Call, l listKind) {
	view, errs, err := l.cat.ViewFor(ctx, c.Tenant.ID, ep.server, sessioncheck.Caps(c))
	if err != nil {
		g.internal(w, c, err)
		return
	}
	for _, e := range errs {
		g.o.Logger.Warn(c.Method+": server skipped", "correlation_id", c.CorrelationID, "tenant", c.Tenant.ID, "err", e)
	}
	if ep.server != "" && len(errs) > 0 {
		writeRefusal(w, c, refusal.Upstream("could not list the "+l.member+" of "+ep.server), "")
		return
	}
	out := make([]byte, 0, 4096)
	out = append(out, `{"`+l.member+`":[`...)
	n := 0
	for _, e := range view {
		// What pipeline.Filter reads of the listed entry: a tool's
		// definition, or a prompt's, resource's or template's.
		name := e.Tool.Name
		c.ToolDef, c.Listed = e.Tool.Def, pipeline.Listed{}
		if l.kind != "" {
			name, c.ToolDef = route.Named(l.kind, name), nil
			c.Listed = pipeline.Listed{Kind: l.pin, Name: e.Tool.Name, Def: e.Tool.Def}
		}
		if !g.pipe.Visible(ctx, c, e.Server, name) {
			continue
		}
		def := e.Tool.Def
		if e.Name != e.Tool.Name {
			exposed, _ := json.Marshal(e.Name)
			def = jsonrpc.Edit(def, l.key, exposed)
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, def...)
		n++
	}
	out = append(out, "]}"...)
	g.answerChecked(ctx, w, c, jsonrpc.Result(c.ID, complete(c, out))) // INGRESS (issue 26): the lists' text
}

// listKind is one of the lists: its catalog, the result's array member,
// each entry's name member, the route.Named kind of its entries ("":
// tools) and their pin kind (registry.PinKinds).
type listKind struct {
	cat         *route.Catalog
	member, key string
	kind, pin   string
}

// lists are the list methods and what answers each.
func (g *Gateway) listOf(method string) (listKind, bool) {
	switch method {
	case "tools/list":
		return listKind{g.cats.Tools, "tools", "name", "", registry.PinTool}, true
	case "prompts/list":
		return listKind{g.cats.Prompts, "prompts", "name", route.KindPrompt, registry.PinPrompt}, true
	case "resources/list":
		return listKind{g.cats.Resources, "resources", "uri", route.KindResource, registry.PinResource}, true
	case "resources/templates/list":
		return listKind{g.cats.Templates, "resourceTemplates", "uriTemplate", route.KindResource, registry.PinTemplate}, true
	}
	return listKind{}, false
}

// decided answers a decided request (tools/call, resources/read,
// prompts/get, completion/complete: pipeline.Decided): it runs the whole
// pipeline, forwards what is allowed, runs the response-side stages over
// the answer, and audits every outcome with its method.
//
// ctx ends when the client leaves or the request's deadline passes
// (ServeHTTP). Until the call is sent, either stops the call: the checks'
// store work gives up and the stages' failure modes decide, and a call
// whose client has left, or whose deadline has passed, is not sent. Once
// it is sent, the client's leaving changes nothing: the exchange, the
// answer's checks and the records run on a context detached from the
// client (still within the request's deadline and the upstream budget),
// so that the audit and the idempotency ledger get the real outcome.
func (g *Gateway) decided(ctx context.Context, w http.ResponseWriter, r *http.Request, ep endpoint, c *pipeline.Call) {
	// One UPSTREAM_TIMEOUT_SECS for all this call sends upstream: a cold
	// catalog's tools/list during routing and the call itself share it.
	ctx = g.up.WithBudget(ctx)
	outcome, code, word, slot, detail := audit.OutcomeAllowed, 0, "", "", ""
	sent, finished, dropped := false, false, false
	// finish gives back what the checks took (a lease, an unused
	// approval) and records a breaker result. A call that reached the
	// upstream finishes as answered, whatever a response stage then said:
	// it may have run, so nothing it used is given back. A call dropped
	// before it was sent finishes as refused: it never ran.
	finish := func() {
		if finished {
			return
		}
		finished = true
		o := outcome
		switch {
		case sent && o == audit.OutcomeRefused:
			o = audit.OutcomeAllowed
		case dropped:
			o = audit.OutcomeRefused
		}
		c.Finish(o)
	}
	st := &settler{parent: ctx, call: c}
	defer st.stop()
	// settle finishes the call and writes its audit record, once. They
	// are independent store writes: overlapped, they cost one round trip,
	// not two. The record is written on the settling context, bounded,
	// whether or not the client is still there.
	settled := false
	settle := func() {
		if settled {
			return
		}
		settled = true
		done := c.Async(finish)
		g.audit(st.ctx(), c, outcome, code, word, slot, detail)
		done()
	}
	defer settle() // an answered call: after its answer
	// The pipeline leaves a refused call's give-backs to finish
	// (pipeline.Call.Settles), so that they overlap the audit write.
	c.Settles = true
	// refuse answers err, refused by the check named at (an audit slot).
	refuse := func(err error, at string) {
		slot = at
		var ref *refusal.Refusal
		if errors.As(err, &ref) {
			outcome, code, word = audit.OutcomeRefused, int(ref.Code), string(ref.Word)
			if ref.Word == refusal.ConnectionRequired {
				code = int(refusal.CodeConnectionRequired) // -32042 on the wire to an eliciting client
			}
			if failed(ref.Word) {
				outcome = audit.OutcomeError
			}
		} else {
			outcome, code, word = audit.OutcomeError, int(refusal.CodeInternal), string(refusal.InternalError)
		}
		// A refused call holds nothing, and is recorded, when its answer
		// is written.
		settle()
		g.refuse(w, ep, c, err)
	}
	err := g.pipe.Run(ctx, c)
	g.sessionHeaders(w, ep, c)
	if err != nil {
		var ref *refusal.Refusal
		if errors.As(err, &ref) && ref.Word == refusal.ConnectionRequired {
			err = g.completeConnection(ctx, c, ref) // routing met a server the caller has no connection to
		}
		refuse(err, c.RefusedBy.String())
		return
	}
	// Allowed. What follows the send runs detached from the client.
	dctx, cancel := detached(ctx)
	defer cancel()
	resp, err := g.forward(ctx, dctx, st, r, ep, c, &sent)
	if err != nil {
		var ref *refusal.Refusal
		if errors.As(err, &ref) { // from the idempotency ledger
			refuse(ref, audit.SlotIdempotency)
			return
		}
		var ns *notSentError
		if errors.As(err, &ns) {
			g.o.Logger.Warn("call not sent", "correlation_id", c.CorrelationID, "tenant", c.Tenant.ID, "server", c.Server.Name, "why", ns.why)
			dropped, detail = true, ns.why
			refuse(refusal.Internal(c.CorrelationID), audit.SlotSend)
			return
		}
		if ref, ok := g.connectionRefusal(dctx, c, err); ok {
			var te *upstream.TokenError
			if errors.As(err, &te) {
				sent = false // no token: nothing left
			}
			refuse(ref, audit.SlotUpstream)
			return
		}
		ref, o := g.upstreamRefusal(dctx, c, err)
		g.o.Logger.Warn("upstream failed", "correlation_id", c.CorrelationID, "tenant", c.Tenant.ID, "server", c.Server.Name, "err", err)
		outcome, code, word, slot = o, int(ref.Code), string(ref.Word), audit.SlotUpstream
		writeRefusal(w, c, ref, c.Tenant.RefusalShape)
		return
	}
	if err := g.pipe.RunResults(dctx, c, resp); err != nil {
		refuse(err, c.RefusedBy.String())
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

// detached returns a context with ctx's values and deadline that the
// client's leaving does not cancel: the upstream exchange of a call that
// was allowed, and the checks of its answer, run on it.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	d := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadlineCause(d, dl, errRequestDeadline)
	}
	return d, func() {}
}

// settler is a call's settling context: the one context of the writes
// once the upstream has answered, or the call ended without it (the
// upstream session, the idempotency ledger, the audit record). It has the
// request's values, not its cancellation, and SettleTimeout from its first
// use, shared by all of them.
type settler struct {
	parent context.Context
	call   *pipeline.Call // its SettleContext
	c      context.Context
	cancel context.CancelFunc
}

func (s *settler) ctx() context.Context {
	if s.c == nil {
		s.c, s.cancel = s.call.SettleContext(s.parent, SettleTimeout)
	}
	return s.c
}

func (s *settler) stop() {
	if s.cancel != nil {
		s.cancel()
	}
}

// notSentError: an allowed call was dropped before it was sent, because
// its client left or its request's deadline passed. Nothing ran upstream.
type notSentError struct{ why string }

func (e *notSentError) Error() string { return "call not sent: " + e.why }

// notSent reports why a call that was allowed must not be sent (ctx is the
// request's context), or nil.
func notSent(ctx context.Context) *notSentError {
	if ctx.Err() == nil {
		return nil
	}
	if errors.Is(context.Cause(ctx), errRequestDeadline) {
		return &notSentError{why: "the request's deadline passed before the call was sent"}
	}
	return &notSentError{why: "the client left before the call was sent"}
}

// forward sends the call to its upstream on the gateway session's upstream
// session, storing the upstream session when it was (re)opened. A call with
// an Idempotency-Key goes through the ledger first: a completed key is
// answered from it without an upstream call, and a refusal (-32602 other
// params, -32063 in flight) comes back as a *refusal.Refusal error. The
// client's own headers are never forwarded (its Authorization least of
// all): only traceparent and Idempotency-Key travel upstream.
//
// ctx is the request's context: the ledger's claim is made on it, and a
// call whose ctx has ended by the send is not sent (a *notSentError).
// The exchange runs on dctx (detached), so a client that leaves after the
// send does not abort it; the ledger is settled with the real answer and
// the upstream session stored on the settling context.
func (g *Gateway) forward(ctx, dctx context.Context, st *settler, r *http.Request, ep endpoint, c *pipeline.Call, sent *bool) (*jsonrpc.Response, error) {
	params := route.UpstreamParams(c)
	hdr := http.Header{}
	if tp := r.Header.Get("Traceparent"); tp != "" {
		hdr.Set("Traceparent", tp)
	}
	var claim *idempotency.Claim
	if key := c.IdempotencyKey; key != "" {
		hdr.Set("Idempotency-Key", key)
		k, _ := json.Marshal(key)
		params = upstream.SetMeta(params, idempotency.MetaKey, k)
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
	if ns := notSent(ctx); ns != nil {
		if claim != nil {
			if err := claim.Release(st.ctx()); err != nil {
				g.o.Logger.Warn("idempotency ledger not updated", "correlation_id", c.CorrelationID, "err", err)
			}
		}
		return nil, ns
	}
	ex, settle := g.exchange(c, c.Server, ep, params)
	ex.Header, ex.ToolDef = hdr, c.ToolDef
	uctx := dctx
	var span trace.Span
	if g.o.Tracer != nil {
		uctx, span = g.o.Tracer.StartUpstream(dctx, c.Server.Name, c.UpstreamTool)
	}
	*sent = true // from here on the call may reach the upstream
	var upDone func(string)
	if g.o.Metrics != nil {
		upDone = g.o.Metrics.UpstreamCall(c.Tenant.ID, c.Server.Name)
	}
	resp, used, err := g.up.Call(uctx, ex)
	if upDone != nil {
		upDone(telemetry.UpstreamOutcome(resp, err))
	}
	g.endTransient(c, c.Server, used)
	if span != nil {
		g.o.Tracer.EndUpstream(span, resp, err)
	}
	sctx := st.ctx()
	settle(sctx, used)
	if claim != nil {
		var lerr error
		if err != nil {
			lerr = claim.Release(sctx)
		} else {
			lerr = claim.Complete(sctx, resp.Result, resp.Error)
		}
		if lerr != nil {
			g.o.Logger.Warn("idempotency ledger not updated", "correlation_id", c.CorrelationID, "err", lerr)
		}
	}
	return resp, err
}

// callObject names what c calls, for a message: "TOOL on SERVER" for a
// tools/call, "METHOD on SERVER" for another request to one server, the
// method alone for one sent to several.
func callObject(c *pipeline.Call) string {
	what := c.Method
	if c.Method == "tools/call" && c.Tool != "" {
		what = c.Tool
	}
	if c.Server != nil {
		return what + " on " + c.Server.Name
	}
	return what
}

// failed reports whether a refusal with word w is a failure (outcome
// error), not a check's decision: an internal error, or an upstream that
// could not be reached or listed (-32000), wherever it was found (the
// route check listing a server's tools, or the call itself).
func failed(w refusal.Word) bool {
	return w == refusal.InternalError || w == refusal.UpstreamError
}

// upstreamRefusal maps an upstream failure of c to the seed's contract.
// A -32000's detail may quote what the upstream sent (the start of an
// answer that is not JSON-RPC, an HTTP error's body): it is a message of
// the server toward the client like any other, so the ingress check runs
// over it as an error (content.ErrorMessage), its findings go on c, and
// the detail is the masked text, or says it was withheld when the check
// refuses it (a threat, or PII_ACTION=block).
func (g *Gateway) upstreamRefusal(ctx context.Context, c *pipeline.Call, err error) (*refusal.Refusal, audit.Outcome) {
	if upstream.CallSent(err) {
		return refusal.Timeout(int(g.o.Settings.UpstreamTimeout.Seconds()), callObject(c)), audit.OutcomeIndeterminate
	}
	ref := refusal.Upstream(err.Error())
	m := content.Message{Kind: content.ErrorMessage, Method: c.Method, CorrelationID: c.CorrelationID,
		Raw: jsonrpc.Error(json.RawMessage("0"), &jsonrpc.WireError{Code: int64(ref.Code), Message: ref.Message})}
	if c.Server != nil {
		m.Server = c.Server.Name
	}
	v, verr := g.content.results.Ingress(ctx, c.Tenant, m)
	for _, f := range v.Findings {
		c.Found(f)
	}
	switch {
	case verr != nil:
		return refusal.Upstream("the upstream's answer could not be checked"), audit.OutcomeError
	case v.Refusal != nil:
		return refusal.Upstream("the upstream's text was withheld (" + string(v.Refusal.Word) + ")"), audit.OutcomeError
	case len(v.Findings) > 0:
		var out struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(v.Out, &out) != nil {
			return refusal.Upstream("the upstream's answer could not be checked"), audit.OutcomeError
		}
		ref.Message = out.Error.Message
	}
	return ref, audit.OutcomeError
}

// audit records the call's outcome. ctx is the settling context (see
// settler): the write neither dies with the client nor hangs.
func (g *Gateway) audit(ctx context.Context, c *pipeline.Call, o audit.Outcome, code int, word, slot, detail string) {
	rec := audit.Record{
		Time:          c.Start.UTC(),
		Tenant:        c.Tenant.ID,
		Caller:        c.Caller,
		Session:       c.SessionID,
		CorrelationID: c.CorrelationID,
		Layer:         string(refusal.LayerGateway),
		Method:        c.Method,
		Tool:          c.Tool,
		ParamsHash:    g.key.Hash(jsonrpc.Member(c.Params, "arguments")),
		Code:          code,
		Word:          word,
		Slot:          slot,
		Outcome:       o,
		LatencyMs:     float64(g.o.Now().Sub(c.Start).Microseconds()) / 1000,
		PolicyHash:    c.PolicyHash,
		Degraded:      c.DegradedNames(),
		Findings:      c.Findings,
		FindingsCut:   c.FindingsCut,
		Detail:        detail,
		PolicyVerdict: c.PolicyVerdict,
		PolicyRule:    c.PolicyRule,
		PolicyAudit:   c.PolicyAudit,
	}
	if c.Server != nil {
		rec.Server = c.Server.Name
		rec.Tool = c.UpstreamTool
		if t, _ := ctx.Value(callerTokensKey{}).(*callerTokens); t != nil {
			rec.Connection = t.connection(c.Server.Name)
		}
	}
	rec = rec.Bounded()             // metrics, spans and the log line get the cut fields too
	telemetry.NoteOf(ctx).Call(rec) // the access log's line
	if g.o.Metrics != nil {
		g.o.Metrics.RecordCall(rec)
	}
	if g.o.Tracer != nil {
		g.o.Tracer.AnnotateCall(ctx, rec)
	}
	if err := g.b.Write(ctx, rec); err != nil {
		g.o.Logger.ErrorContext(ctx, "audit write failed; record kept in this log line", "record", rec, "err", err)
	}
}

// exchange is c's request to srv on the gateway session's upstream
// session (opened by the upstream client when there is none, announcing
// the client's capability set, sessioncheck.Caps: the set the call was
// routed by). Messages of the
// upstream's event stream before its response go to the client's stream
// on /mcp (relayMessage), and are dropped on /v1/invoke, which answers
// with one JSON body.
//
// settle stores the upstream session the exchange used when it changed;
// the caller calls it after the exchange with a context for the write.
// When the client announced it can be asked something (sampling,
// elicitation, roots), an opened session is stored at once instead, before
// the request is sent on it: the upstream may ask during the call, and the
// client's answer, which may reach any instance, is sent on that session.
func (g *Gateway) exchange(c *pipeline.Call, srv *registry.Server, ep endpoint, params json.RawMessage) (ex *upstream.Exchange, settle func(ctx context.Context, used upstream.Session)) {
	prev, _ := upstream.DecodeSession(c.Session.Upstream[srv.Name])
	ex = &upstream.Exchange{Server: srv, Session: prev, ID: c.ID, Method: c.Method, Params: params}
	caps := sessioncheck.Caps(c)
	ex.Capabilities = caps.JSON()
	settle = func(context.Context, upstream.Session) {}
	if c.SessionID != "" && c.Session.ID != "" {
		tenant, id, name, corr := c.Tenant.ID, c.SessionID, srv.Name, c.CorrelationID
		store := func(ctx context.Context, s upstream.Session) {
			if err := g.b.SetUpstream(ctx, tenant, id, name, s.Encode()); err != nil {
				g.o.Logger.Warn("could not store upstream session", "correlation_id", corr, "err", err)
			}
		}
		stored := prev
		if caps.AsksClient() {
			ex.OnSession = func(s upstream.Session) {
				ctx, cancel := context.WithTimeout(context.Background(), SettleTimeout)
				defer cancel()
				store(ctx, s)
				stored = s
			}
		}
		settle = func(ctx context.Context, used upstream.Session) {
			if used != stored && used.Protocol != "" {
				store(ctx, used)
			}
		}
	}
	if ep.out != nil {
		out := ep.out
		// ex.Session is the upstream session the exchange is on when the
		// event comes (Call sets it before it sends).
		ex.OnEvent = func(msg []byte) { g.relayEvent(c, srv, ex.Session, out, msg) }
	}
	return ex, settle
}

// relayEvent sends one message of srv's event stream (on the upstream
// session sess) to the client's stream, as its row of the message table
// says (serverMessage); a message without a row is not relayed (audited;
// a request's server gets -32601 as the answer). A request of the server
// to the client (it has a method and an id: sampling/createMessage,
// elicitation/create, roots/list, ping) is a relayed message
// (pipeline.Relayed): it runs the stages of that scope first (session,
// rate limit, route), counted in the session's and key's windows and in
// its own "client:METHOD" window of srv; then, in a session, it is
// recorded as outstanding (session.Outstanding: the one request the
// client's answer may answer, at most session.MaxAsked at once); then
// the ingress stage runs over it. Refused at any step, it is not relayed:
// srv gets the refusal as the client's answer, so a server that floods
// the client is held to the rate limit and told so. It is audited with
// its method, the server and "client:METHOD" as its tool: refused,
// allowed when it reached the client's stream, or error when the answer
// had already been sent. The client's answer is counted and audited too
// (clientAnswer, method "response").
func (g *Gateway) relayEvent(c *pipeline.Call, srv *registry.Server, sess upstream.Session, out *stream, msg []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), SettleTimeout)
	defer cancel()
	rec, row, ok := g.serverMessage(ctx, c, srv, msg)
	if !ok {
		if rec.Method != "" && row.Kind == pipeline.ServerRequest {
			g.answerUpstream(ctx, rec, sess, jsonrpc.Member(msg, "id"), refusal.Unknown(rec.Method+" (the gateway relays no such request to the client)"))
		}
		return
	}
	if row.Kind != pipeline.ServerRequest {
		msg, ok = g.ingress(ctx, rec, msg)
		if ok {
			out.Event(msg)
		}
		return
	}
	upID := jsonrpc.Member(msg, "id")
	refuse := func(err error, slot string) {
		ref := refusal.Internal(c.CorrelationID)
		_ = errors.As(err, &ref)
		g.answerUpstream(ctx, rec, sess, upID, ref)
		outcome := audit.OutcomeRefused
		if ref.Word == refusal.InternalError {
			outcome = audit.OutcomeError
		}
		g.audit(ctx, rec, outcome, int(ref.Code), string(ref.Word), slot, "server-to-client request not relayed")
	}
	if err := g.pipe.Run(ctx, rec); err != nil {
		refuse(err, refusedSlot(rec))
		return
	}
	relayed := relayMessage(srv.Name, msg)
	rec.ID = jsonrpc.Member(relayed, "id")
	if rec.SessionID != "" {
		key := string(rec.ID)
		if len(key) > session.MaxAskedKeyBytes || len(rec.Method) > session.MaxAskedMethodBytes {
			refuse(refusal.New(refusal.InvalidRequest, "Invalid request: the request's id or method is too long to be relayed"), audit.SlotAsked)
			return
		}
		err := g.b.Ask(ctx, rec.Tenant.ID, rec.SessionID, key, session.Asked{Server: srv.Name, Method: rec.Method, Expires: g.o.Now().Add(session.AskedTTL)}, g.o.Now())
		switch {
		case errors.Is(err, session.ErrTooManyAsked):
			refuse(refusal.RateLimit("outstanding", session.MaxAsked, session.AskedTTL.Milliseconds()), audit.SlotAsked)
			return
		case err != nil:
			g.o.Logger.Warn("outstanding server request not recorded; not relayed", "correlation_id", c.CorrelationID, "server", srv.Name, "err", err)
			refuse(refusal.Internal(c.CorrelationID), audit.SlotAsked)
			return
		}
	}
	m := json.RawMessage(relayed)
	if err := g.pipe.RunMessage(ctx, rec, &m); err != nil {
		if rec.SessionID != "" {
			_, _ = g.b.Answer(ctx, rec.Tenant.ID, rec.SessionID, string(rec.ID), g.o.Now())
		}
		refuse(err, refusedSlot(rec))
		return
	}
	outcome, code := audit.OutcomeAllowed, 0
	if !out.Event(m) {
		outcome, code = audit.OutcomeError, int(refusal.CodeInternal)
	}
	g.audit(ctx, rec, outcome, code, "", "", "server-to-client request")
}

// serverMessage reads msg, a message srv sent outside its answer (on a
// call's event stream or a stream of the session) during c, as a relayed
// call of its own (rec: its method, srv, "client:METHOD") and finds its
// row of the message table: a request (a method and an id) or a
// notification (a method, no id). ok is false when it has no row, or a
// row whose message is not carried (Consume): such a message is not
// relayed, and one without a row is audited (refused, slot "method").
// Anything else srv sends there (a response: the gateway sent it no
// request on that stream) is dropped.
func (g *Gateway) serverMessage(ctx context.Context, c *pipeline.Call, srv *registry.Server, msg []byte) (rec *pipeline.Call, row pipeline.Message, ok bool) {
	method, _ := jsonrpc.StringMember(msg, "method")
	kind := pipeline.ServerNotification
	if id := jsonrpc.Member(msg, "id"); id != nil && string(id) != "null" {
		kind = pipeline.ServerRequest
	}
	rec = &pipeline.Call{
		Tenant: c.Tenant, Caller: c.Caller, KeyID: c.KeyID, CorrelationID: c.CorrelationID,
		Method: method, Start: g.o.Now(), SessionID: c.SessionID, Roles: c.Roles, Claims: c.Claims,
		PolicyHash: c.PolicyHash, Inline: c.Inline, MCP: true, Stateless: c.Stateless,
		Relayed: true, Server: srv, Tool: clientTarget(method), UpstreamTool: clientTarget(method),
	}
	if method == "" {
		return rec, row, false
	}
	row, ok = pipeline.Lookup(kind, method)
	if !ok {
		row.Kind = kind
		g.auditRefusal(ctx, rec, refusal.Unknown(kind.String()+" "+method+" (not relayed)"), audit.SlotMethod)
		return rec, row, false
	}
	return rec, row, row.Carry == pipeline.Relay
}

// ingress runs the ingress stage over msg, a notification of rec.Server
// (serverMessage), and returns it as the client is to get it; ok is false
// when the stage refused it: it is then dropped (a notification has no
// answer to carry a refusal) and audited. One with findings is audited
// too.
func (g *Gateway) ingress(ctx context.Context, rec *pipeline.Call, msg []byte) ([]byte, bool) {
	m := json.RawMessage(msg)
	if err := g.pipe.RunMessage(ctx, rec, &m); err != nil {
		g.auditRefusal(ctx, rec, err, refusedSlot(rec))
		return nil, false
	}
	if len(rec.Findings) > 0 {
		// Masked or monitored: forwarded, and its findings recorded. A
		// clean notification is not audited: a record per progress tick
		// would cost a store write each.
		g.audit(ctx, rec, audit.OutcomeAllowed, 0, "", "", "server notification")
	}
	return m, true
}

// clientTarget is what a relayed message is called in rate windows and
// in the audit trail: "client:" and the method of a server's request to
// the client, or "client:response" for the client's answer.
func clientTarget(method string) string { return route.Named("client", method) }

// sessionNumbering is the numbering of refusal codes for an upstream on
// sess: MCP 2026-07-28's when that is the version it speaks.
func sessionNumbering(sess upstream.Session) refusal.Numbering {
	if upstream.IsModern(sess.Protocol) {
		return refusal.MCP20260728
	}
	return refusal.Seed
}

// answerUpstream answers the request upID of rec.Server, on its upstream
// session sess, with ref in the client's place.
func (g *Gateway) answerUpstream(ctx context.Context, rec *pipeline.Call, sess upstream.Session, upID json.RawMessage, ref *refusal.Refusal) {
	_, _, err := g.up.Send(ctx, &upstream.Exchange{Server: rec.Server, Session: sess, Body: refusal.Frame(upID, ref, refusal.LayerGateway, sessionNumbering(sess))})
	if err != nil {
		g.o.Logger.Warn("refusal of a server-to-client request not delivered upstream", "correlation_id", rec.CorrelationID, "tenant", rec.Tenant.ID, "server", rec.Server.Name, "err", err)
	}
}

// refusedSlot names the check that refused c for its audit record: the
// stage that refused it, or, when no stage did (the call could not be
// decided), the send that was dropped.
func refusedSlot(c *pipeline.Call) string {
	if c.RefusedBy.Valid() {
		return c.RefusedBy.String()
	}
	return audit.SlotSend
}

// endTransient ends, in the background, an upstream session opened for a
// request that belongs to no gateway session (a 2026-07-28 client in front
// of a 2025 upstream): nobody could continue it, so the upstream need not
// keep it.
func (g *Gateway) endTransient(c *pipeline.Call, srv *registry.Server, used upstream.Session) {
	if c.SessionID != "" || used.ID == "" {
		return
	}
	go func() {
		if err := g.up.End(context.Background(), srv, used); err != nil {
			g.o.Logger.Warn("transient upstream session not ended; left to its idle expiry", "correlation_id", c.CorrelationID, "server", srv.Name, "err", err)
		}
	}()
}
