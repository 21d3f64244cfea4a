package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// ListenTimeout bounds a GET stream on /mcp (listen). The transport lets
// a server end the stream at any time; clients open another.
const ListenTimeout = 5 * time.Minute

// canStream reports whether w can hold an event stream open: a host
// whose answer is buffered (the Lambda adapter, shared/apigw) cannot, and
// GET /mcp is then 405 as it always was there. The probe is the write
// deadline, which a streaming net/http connection supports and which
// listen needs anyway (the server's WriteTimeout is sized for a call).
func (g *Gateway) canStream(w http.ResponseWriter) bool {
	err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(g.listenTimeout() + time.Minute))
	return err == nil
}

// listen serves GET /mcp and /mcp/{server} with Mcp-Session-Id: the
// session's standalone event stream. It holds each upstream's own stream
// for that gateway session (upstream.Client.Listen, on the upstream
// session the record holds: follow) and relays every message to the client as an SSE event: list_changed
// notifications (which also make the gateway list that server again),
// notifications/resources/updated of the session's subscriptions, log
// messages, and requests to the client (relayMessage; the client's answer
// is carried back by clientAnswer). The stream ends after ListenTimeout,
// when the client leaves, when the session is gone, or when the gateway
// stops (CloseStreams; a stream asked for after that is 503). A 2026-07-28
// client has no such stream (405).
func (g *Gateway) listen(w http.ResponseWriter, r *http.Request, ep endpoint, corr string) {
	ctx := r.Context()
	who, tenant, err := g.authenticate(ctx, r, ep)
	if err != nil {
		g.refuseAuth(w, r, ep, corr, err)
		return
	}
	ctx = withSubject(ctx, who)
	key := who.key
	if !acceptsSSE(r.Header.Values("Accept")) {
		writeJSON(w, http.StatusNotAcceptable, `{"error":"Accept must list text/event-stream"}`)
		return
	}
	if upstream.IsModern(r.Header.Get("Mcp-Protocol-Version")) {
		w.Header().Set("Allow", "POST")
		writeJSON(w, http.StatusMethodNotAllowed, `{"error":"MCP 2026-07-28 has no GET stream"}`)
		return
	}
	c := &pipeline.Call{
		Tenant: tenant, Caller: key.Caller, KeyID: key.ID, CorrelationID: corr,
		Method: "GET", Start: g.o.Now(), PolicyHash: audit.PolicyHashNone,
		Inline: g.b.InProcess(), MCP: true, SessionID: r.Header.Get("Mcp-Session-Id"), RequestedServer: ep.server,
	}
	if who.token {
		c.Roles, c.Claims = who.roles, who.claims
	}
	ctx = g.withConnections(ctx, c) // streams of servers with auth: oauth carry this caller's token
	if c.SessionID == "" {
		writeJSON(w, http.StatusBadRequest, `{"error":"Mcp-Session-Id header is required"}`)
		return
	}
	if err := g.pipe.RunUntil(ctx, c, pipeline.Params); err != nil {
		var ref *refusal.Refusal
		if errors.As(err, &ref) && ref.Word == refusal.SessionError {
			writeJSON(w, http.StatusNotFound, `{"error":"unknown session"}`)
			return
		}
		g.o.Logger.Warn("GET stream: session not checked; streaming without it", "correlation_id", corr, "err", err)
	}
	servers, err := g.cat.Servers(ctx, tenant.ID, ep.server)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, `{"error":"unavailable; correlation id `+corr+`"}`)
		return
	}
	if ep.server != "" && len(servers) == 0 {
		writeJSON(w, http.StatusNotFound, `{"error":"unknown server"}`)
		return
	}
	if g.closing.Err() != nil {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, `{"error":"this gateway is stopping; open the stream again in a moment"}`)
		return
	}
	release, ok := g.streams.take(streamOwner(c))
	if !ok {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, `{"error":"too many open streams: at most `+strconv.Itoa(MaxStreamsPerKey)+` per API key on this instance; close one first"}`)
		return
	}
	defer release()
	ctx, stopStream := g.streamContext(ctx) // CloseStreams ends it too
	defer stopStream()
	out := newStream(w)
	out.Begin()
	defer g.elicits.listen(c, out, g.o.Now())() // notifications/elicitation/complete (elicit.go)
	kctx, stopKeepAlive := context.WithCancel(ctx)
	kdone := make(chan struct{})
	go func() {
		defer close(kdone)
		g.keepAlive(kctx, out, g.listenTimeout())
	}()
	defer func() { // nothing writes once the handler has returned
		stopKeepAlive()
		<-kdone
	}()
	var wg sync.WaitGroup
	for i := range servers {
		srv := &servers[i]
		sess, _ := upstream.DecodeSession(c.Session.Upstream[srv.Name])
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.follow(ctx, c, srv, sess, out)
		}()
	}
	wg.Wait()
}

// ListenRecheck is how often a GET stream reads its gateway session again
// (which also keeps it from idling out). The stream never opens an
// upstream session itself: requests do (one writer, as without a
// stream), and the stream follows the upstream session the record holds
// for each server, beginning to listen on one within ListenRecheck of its
// first request, and moving to another when a request replaced it. A
// session that is gone ends the stream.
const ListenRecheck = time.Second

// follow relays srv's upstream stream of sess to out until ctx ends,
// moving to the upstream session the gateway session record holds for
// srv whenever it changes, and listening again when the upstream ended
// its stream.
func (g *Gateway) follow(ctx context.Context, c *pipeline.Call, srv *registry.Server, sess upstream.Session, out *stream) {
	limits := session.NewLimits(g.o.Settings.SessionLifetime, g.o.Settings.SessionIdle)
	for ctx.Err() == nil {
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func(sess upstream.Session) {
			defer close(done)
			err := g.up.Listen(lctx, srv, sess, nil, func(msg []byte) {
				g.forgetOnChange(srv, msg)
				g.relayEvent(c, srv, sess, out, msg)
			})
			if err != nil {
				g.o.Logger.Warn("GET stream: upstream stream ended", "correlation_id", c.CorrelationID, "server", srv.Name, "err", err)
			}
		}(sess)
		next, gone := g.watch(lctx, c, srv.Name, sess, limits, done)
		cancel()
		<-done
		if gone {
			return
		}
		sess = next
	}
}

// watch reads c's session every ListenRecheck (touching it when stale)
// until the upstream session of server is another than sess (next), the
// session is gone or ctx ends (gone), or, once done is closed (the
// upstream stream ended), at the next read (next is then sess, to listen
// again).
func (g *Gateway) watch(ctx context.Context, c *pipeline.Call, server string, sess upstream.Session, limits session.Limits, done <-chan struct{}) (next upstream.Session, gone bool) {
	t := time.NewTicker(ListenRecheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return sess, true
		case <-t.C:
		}
		// A read each time; a write (the stream keeps its session alive)
		// once LastSeen is limits.Refresh old, not once a second.
		now := g.o.Now()
		rec, err := g.b.Session(ctx, c.Tenant.ID, c.SessionID, now, limits)
		if err == nil && limits.Stale(rec, now) {
			rec, err = g.b.Touch(ctx, c.Tenant.ID, c.SessionID, now, limits)
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			return sess, true
		case err == nil:
			if now, _ := upstream.DecodeSession(rec.Upstream[server]); now != sess {
				return now, false
			}
		}
		select {
		case <-done:
			return sess, false
		default:
		}
	}
}

// forgetOnChange makes the catalogs list srv again when msg is one of its
// list_changed notifications.
func (g *Gateway) forgetOnChange(srv *registry.Server, msg []byte) {
	method, _ := jsonrpc.StringMember(msg, "method")
	switch method {
	case "notifications/tools/list_changed":
		g.cats.Tools.Forget(srv)
	case "notifications/prompts/list_changed":
		g.cats.Prompts.Forget(srv)
	case "notifications/resources/list_changed":
		g.cats.Resources.Forget(srv)
		g.cats.Templates.Forget(srv)
	}
}

func acceptsSSE(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "*/*", "text/event-stream", "text/*":
				return true
			}
		}
	}
	return false
}
