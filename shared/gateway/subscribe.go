package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// MaxListenURIs bounds the resourceSubscriptions of one
// subscriptions/listen; more is -32602.
const MaxListenURIs = 100

// metaSubscriptionID is the _meta member that names, on every message of
// a subscriptions/listen stream, the request that opened it (its id).
const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// filter is a subscriptions/listen notification filter (SEP-2575), as the
// client sends it and as an acknowledgment carries the part honoured.
type filter struct {
	Tools     bool     `json:"toolsListChanged,omitempty"`
	Prompts   bool     `json:"promptsListChanged,omitempty"`
	Resources bool     `json:"resourcesListChanged,omitempty"`
	URIs      []string `json:"resourceSubscriptions,omitempty"`
}

// upSub is what one server is asked for on behalf of a subscriptions/listen:
// the list changes the client asked for, and the resources of that server
// it subscribed to (URIs as the server knows them, each with the names the
// client used for it: in the aggregate "SERVER.URI" may be one).
type upSub struct {
	srv   *registry.Server
	want  filter
	names map[string][]string // upstream URI → the client's names for it
	// honoured is what the server's first acknowledgment agreed to, and
	// what is relayed from it from then on (set once, before start).
	honoured filter
}

// subscribe serves MCP 2026-07-28's subscriptions/listen, the stateless
// replacement of the GET stream and of resources/subscribe: its answer is
// an event stream that stays open and carries the notifications the
// client's filter asks for, from every server of the endpoint. The
// gateway holds, per server, the upstream's own subscription: a 2026-07-28
// upstream gets the filter's part for it as its own subscriptions/listen;
// a 2025 upstream gets a session of its own (announcing the request's
// capabilities), its GET stream, and resources/subscribe for each of its
// URIs, and the session is ended with the stream. Each resource URI is
// routed as resources/subscribe is (the route stage: a URI a server lists,
// one a template matches, or "SERVER.URI"); one that routes nowhere is not
// honoured. The gateway's acknowledgment comes once every server has
// acknowledged (or failed, or taken UPSTREAM_TIMEOUT_SECS) and carries
// what at least one of them honoured; nothing is relayed before it.
// Every relayed notification carries the request's id in
// _meta[io.modelcontextprotocol/subscriptionId], and a resource update the
// URI the client subscribed with. Log messages and requests of an
// upstream are not part of a subscription and are dropped; a list change
// also makes the gateway list that server again. An upstream stream that
// ends is held again (ListenRecheck later), with what was honoured. The
// stream ends when the client leaves, or after Options.ListenTimeout with
// the graceful end the spec gives (the request's result, resultType
// complete), as it does at once when the gateway stops (CloseStreams). Behind a host that buffers the answer (API Gateway), the
// acknowledgment honours nothing and the result follows at once.
func (g *Gateway) subscribe(ctx context.Context, w http.ResponseWriter, ep endpoint, c *pipeline.Call) {
	if !c.Stateless {
		writeRefusal(w, c, refusal.Unknown(c.Method+" (MCP 2026-07-28; a 2025-11-25 session listens with GET)"), "")
		return
	}
	var p struct {
		Notifications *filter `json:"notifications"`
	}
	if json.Unmarshal(c.Params, &p) != nil || p.Notifications == nil {
		writeRefusal(w, c, refusal.New(refusal.InvalidParams, "Invalid params: subscriptions/listen needs its notifications filter, an object"), "")
		return
	}
	if len(p.Notifications.URIs) > MaxListenURIs {
		writeRefusal(w, c, refusal.New(refusal.InvalidParams, "Invalid params: at most "+strconv.Itoa(MaxListenURIs)+" resourceSubscriptions per subscriptions/listen"), "")
		return
	}
	want := *p.Notifications
	release, ok := g.streams.take(streamOwner(c))
	if !ok {
		ref := refusal.TooManyStreams(MaxStreamsPerKey)
		g.auditRefusal(ctx, c, ref, audit.SlotStreams)
		writeRefusal(w, c, ref, "")
		return
	}
	defer release()
	out := ep.out
	st := &settler{parent: ctx, call: c}
	defer st.stop()
	defer func() { g.audit(st.ctx(), c, audit.OutcomeAllowed, 0, "", "", "") }()
	ack := func(f filter) {
		params, _ := json.Marshal(map[string]any{"_meta": map[string]json.RawMessage{metaSubscriptionID: c.ID}, "notifications": f})
		out.Event(notification("notifications/subscriptions/acknowledged", params))
	}
	end := func() {
		res, _ := json.Marshal(map[string]any{"resultType": "complete", "_meta": map[string]json.RawMessage{metaSubscriptionID: c.ID}})
		writeFrame(w, http.StatusOK, jsonrpc.Result(c.ID, res))
	}
	if !g.canStream(out.w) || g.closing.Err() != nil { // buffered, or stopping
		ack(filter{})
		end()
		return
	}
	subs, err := g.subscriptions(ctx, ep, c, want)
	if err != nil {
		g.internal(w, c, err)
		return
	}
	lctx, cancel := g.streamContext(ctx) // CloseStreams ends the holds too
	defer cancel()
	acks := make(chan *upSub, len(subs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.hold(lctx, c, s, acks, start, out)
		}()
	}
	var agreed filter
	for range subs {
		s := <-acks
		agreed.Tools = agreed.Tools || s.honoured.Tools
		agreed.Prompts = agreed.Prompts || s.honoured.Prompts
		agreed.Resources = agreed.Resources || s.honoured.Resources
		for _, u := range s.honoured.URIs {
			agreed.URIs = append(agreed.URIs, s.names[u]...)
		}
	}
	ack(agreed)
	close(start)
	g.keepAlive(ctx, out, g.listenTimeout())
	cancel()
	wg.Wait()
	if ctx.Err() == nil {
		end()
	}
}

// subscriptions splits the client's filter by server: the list changes go
// to every server of the endpoint, each resource URI to the server it
// routes to.
func (g *Gateway) subscriptions(ctx context.Context, ep endpoint, c *pipeline.Call, want filter) ([]*upSub, error) {
	servers, err := g.cat.Servers(ctx, c.Tenant.ID, ep.server)
	if err != nil {
		return nil, err
	}
	subs := make([]*upSub, len(servers))
	byName := make(map[string]*upSub, len(servers))
	for i := range servers {
		subs[i] = &upSub{srv: &servers[i], want: filter{Tools: want.Tools, Prompts: want.Prompts, Resources: want.Resources}, names: map[string][]string{}}
		byName[servers[i].Name] = subs[i]
	}
	for _, u := range want.URIs {
		uri, _ := json.Marshal(u)
		rc := &pipeline.Call{
			Tenant: c.Tenant, Caller: c.Caller, KeyID: c.KeyID, CorrelationID: c.CorrelationID,
			Method: "resources/subscribe", Params: json.RawMessage(`{"uri":` + string(uri) + `}`), Start: c.Start,
			RequestedServer: ep.server, PolicyHash: c.PolicyHash, Inline: c.Inline, MCP: true, Stateless: true,
		}
		if err := g.pipe.Run(ctx, rc); err != nil || rc.Server == nil {
			g.o.Logger.Info("subscriptions/listen: resource not honoured", "correlation_id", c.CorrelationID, "tenant", c.Tenant.ID, "err", err)
			continue
		}
		s := byName[rc.Server.Name]
		if s == nil {
			continue
		}
		if _, ok := s.names[rc.Target]; !ok {
			s.want.URIs = append(s.want.URIs, rc.Target)
		}
		if !slices.Contains(s.names[rc.Target], u) {
			s.names[rc.Target] = append(s.names[rc.Target], u)
		}
	}
	return subs, nil
}

// hold holds s's upstream subscription until ctx ends, sending s on acks
// exactly once: when the first upstream subscription acknowledged (with
// s.honoured set to what it agreed to), or failed (honouring nothing).
// Nothing is relayed before start is closed. An upstream stream that
// ends after honouring something is held again ListenRecheck later.
func (g *Gateway) hold(ctx context.Context, c *pipeline.Call, s *upSub, acks chan<- *upSub, start <-chan struct{}, out *stream) {
	reported := false
	defer func() {
		if !reported {
			acks <- s
		}
	}()
	relay := func(msg []byte) {
		g.forgetOnChange(s.srv, msg)
		select {
		case <-start:
		case <-ctx.Done():
			return
		}
		// Its row of the message table and the ingress stage first;
		// then only what the subscription honours (upSub.relay).
		rec, row, ok := g.serverMessage(ctx, c, s.srv, msg)
		if !ok || row.Kind != pipeline.ServerNotification {
			return
		}
		if msg, ok = g.ingress(ctx, rec, msg); ok {
			s.relay(c.ID, msg, func(ev []byte) { out.Event(ev) })
		}
	}
	for ctx.Err() == nil {
		actx, cancel := context.WithCancel(ctx)
		// An upstream that does not acknowledge within UPSTREAM_TIMEOUT_SECS
		// is given up (and, after a first acknowledgment, held again).
		timer := time.AfterFunc(g.o.Settings.UpstreamTimeout, cancel)
		onAck := func(f filter) {
			timer.Stop()
			if !reported {
				s.honoured = f
				reported = true
				acks <- s
			}
		}
		err := g.holdOnce(actx, c, s, onAck, relay)
		timer.Stop()
		cancel()
		if err != nil && ctx.Err() == nil {
			g.o.Logger.Warn("subscriptions/listen: upstream subscription ended", "correlation_id", c.CorrelationID, "server", s.srv.Name, "err", err)
		}
		if !reported || s.honoured.empty() {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(ListenRecheck):
		}
	}
}

// holdOnce holds one upstream subscription for s (see subscribe) until
// ctx ends or the upstream ends it, calling onAck once it is in place.
func (g *Gateway) holdOnce(ctx context.Context, c *pipeline.Call, s *upSub, onAck func(filter), relay func([]byte)) error {
	var caps json.RawMessage
	if c.Session.Capabilities != "" {
		caps = json.RawMessage(c.Session.Capabilities)
	}
	sess, err := g.up.Open(ctx, s.srv, caps)
	if err != nil {
		return err
	}
	if upstream.IsModern(sess.Protocol) {
		params, _ := json.Marshal(map[string]any{"notifications": s.want})
		acked := false
		return g.up.Subscribe(ctx, s.srv, sess, c.ID, params, caps, func(msg []byte) {
			if acked {
				relay(msg)
				return
			}
			// Nothing comes before the acknowledgment (SEP-2575).
			if m, _ := jsonrpc.StringMember(msg, "method"); m == "notifications/subscriptions/acknowledged" {
				var p struct {
					Notifications filter `json:"notifications"`
				}
				_ = json.Unmarshal(jsonrpc.Member(msg, "params"), &p)
				acked = true
				onAck(s.want.meet(p.Notifications))
			}
		})
	}
	// A 2025 upstream: a session of this stream's own, ended with it.
	defer func() {
		if err := g.up.End(context.WithoutCancel(ctx), s.srv, sess); err != nil {
			g.o.Logger.Warn("subscriptions/listen: upstream session not ended; left to its idle expiry", "correlation_id", c.CorrelationID, "server", s.srv.Name, "err", err)
		}
	}()
	opened := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- g.up.Listen(ctx, s.srv, sess, func() { close(opened) }, relay) }()
	select {
	case <-opened:
	case err := <-errc: // no stream (405): nothing can be delivered
		onAck(filter{})
		return err
	}
	agreed := filter{Tools: s.want.Tools, Prompts: s.want.Prompts, Resources: s.want.Resources}
	for i, u := range s.want.URIs {
		uri, _ := json.Marshal(u)
		resp, _, err := g.up.Send(ctx, &upstream.Exchange{
			Server: s.srv, Session: sess, ID: json.RawMessage(strconv.Itoa(i + 1)),
			Method: "resources/subscribe", Params: json.RawMessage(`{"uri":` + string(uri) + `}`), Capabilities: caps,
		})
		if err == nil && resp.Error == nil {
			agreed.URIs = append(agreed.URIs, u)
		}
	}
	onAck(agreed)
	return <-errc
}

// relay gives emit the client's form of msg, one upstream message of s's
// subscription, when the subscription honours it: a list change it asked
// for, or the update of a resource it subscribed to (once per name the
// client gave that resource, with that name as its uri). Each carries the
// subscriptions/listen's id in _meta. Anything else (log messages,
// requests, responses, another acknowledgment) is dropped.
func (s *upSub) relay(id json.RawMessage, msg []byte, emit func([]byte)) {
	if jsonrpc.Member(msg, "id") != nil {
		return
	}
	method, _ := jsonrpc.StringMember(msg, "method")
	params := jsonrpc.Member(msg, "params")
	if len(params) == 0 || params[0] != '{' {
		params = json.RawMessage(`{}`)
	}
	names := []string{""}
	switch method {
	case "notifications/tools/list_changed":
		if !s.honoured.Tools {
			return
		}
	case "notifications/prompts/list_changed":
		if !s.honoured.Prompts {
			return
		}
	case "notifications/resources/list_changed":
		if !s.honoured.Resources {
			return
		}
	case "notifications/resources/updated":
		uri, _ := jsonrpc.StringMember(params, "uri")
		if !slices.Contains(s.honoured.URIs, uri) {
			return
		}
		names = s.names[uri]
	default:
		return
	}
	meta := jsonrpc.Member(params, "_meta")
	if len(meta) == 0 || meta[0] != '{' {
		meta = json.RawMessage(`{}`)
	}
	params = jsonrpc.Edit(params, "_meta", jsonrpc.Edit(meta, metaSubscriptionID, id))
	for _, n := range names {
		p := params
		if n != "" {
			v, _ := json.Marshal(n)
			p = jsonrpc.Edit(p, "uri", v)
		}
		emit(notification(method, p))
	}
}

// meet is what both f and g ask for.
func (f filter) meet(g filter) filter {
	out := filter{Tools: f.Tools && g.Tools, Prompts: f.Prompts && g.Prompts, Resources: f.Resources && g.Resources}
	for _, u := range f.URIs {
		if slices.Contains(g.URIs, u) {
			out.URIs = append(out.URIs, u)
		}
	}
	return out
}

func (f filter) empty() bool { return !f.Tools && !f.Prompts && !f.Resources && len(f.URIs) == 0 }

// notification is a JSON-RPC notification of method with params.
func notification(method string, params json.RawMessage) []byte {
	m, _ := json.Marshal(method)
	return []byte(`{"jsonrpc":"2.0","method":` + string(m) + `,"params":` + string(params) + `}`)
}

// keepAlive writes a keep-alive comment on out every Options.KeepAlive
// until ctx ends, d has passed or CloseStreams is called.
func (g *Gateway) keepAlive(ctx context.Context, out *stream, d time.Duration) {
	every := g.o.KeepAlive
	if every <= 0 {
		every = DefaultKeepAlive
	}
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.closing.Done():
			return
		case <-end.C:
			return
		case <-tick.C:
			out.KeepAlive()
		}
	}
}

// listenTimeout is how long a GET stream or a subscriptions/listen is held
// (Options.ListenTimeout).
func (g *Gateway) listenTimeout() time.Duration {
	if g.o.ListenTimeout > 0 {
		return g.o.ListenTimeout
	}
	return ListenTimeout
}
