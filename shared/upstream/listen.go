package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/registry"
)

// Open opens an upstream session on srv announcing the client
// capabilities caps (nil: none), as Call does before its first request.
func (c *Client) Open(ctx context.Context, srv *registry.Server, caps json.RawMessage) (Session, error) {
	return c.initialize(c.WithBudget(ctx), srv, caps)
}

// Listen holds the upstream's standalone event stream of sess (an HTTP
// GET with its Mcp-Session-Id, the Streamable HTTP transport's channel for
// messages outside any request: list_changed and resource update
// notifications, log messages, requests to the client) and gives on every
// message, with the brokered credential removed, until ctx ends or the
// upstream closes the stream. opened, when set, is called once the
// upstream has answered 2xx, before the first message. An upstream that
// offers no such stream (405), or a session without an id (the stateless
// protocol), returns nil at once, without calling opened. Listen is not
// bounded by Timeout: ctx bounds it.
func (c *Client) Listen(ctx context.Context, srv *registry.Server, sess Session, opened func(), on func([]byte)) error {
	if sess.ID == "" {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		return &ProtocolError{Detail: "bad upstream URL"}
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sess.ID)
	if sess.Protocol != "" {
		req.Header.Set("Mcp-Protocol-Version", sess.Protocol)
	}
	resp, sc, err := c.openStream(ctx, req, srv)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusMethodNotAllowed:
		return nil
	case resp.StatusCode == http.StatusNotFound:
		return &SessionLost{}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return &HTTPError{Status: resp.StatusCode}
	}
	if opened != nil {
		opened()
	}
	err = readEvents(resp.Body, func(msg []byte) { on(sc.JSON(msg)) })
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Subscribe holds a 2026-07-28 upstream's subscriptions/listen stream
// (SEP-2575: a POST whose answer is an event stream that stays open) for
// the request id with params (the notification filter; the SEP-2575
// _meta, announcing caps, is added), and gives on every message of it,
// with the brokered credential removed: first the upstream's
// notifications/subscriptions/acknowledged, then the notifications the
// filter asked for, and, when the upstream ends the subscription
// gracefully, its response. It returns when ctx ends (nil) or the
// upstream closes the stream. An upstream that answers with a JSON body
// instead (an error: it does not serve the method) is a *RefusedError.
// Subscribe is not bounded by Timeout: ctx bounds it.
func (c *Client) Subscribe(ctx context.Context, srv *registry.Server, sess Session, id, params, caps json.RawMessage, on func([]byte)) error {
	params = c.modernMeta(params, sess.Protocol, caps)
	const method = "subscriptions/listen"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(encodeRequest(id, method, params)))
	if err != nil {
		return &ProtocolError{Detail: "bad upstream URL"}
	}
	req.GetBody = nil // never re-sent by net/http (see once)
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("Mcp-Protocol-Version", sess.Protocol)
	standardHeaders(h, method, params, nil)
	resp, sc, err := c.openStream(ctx, req, srv)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes))
		return &HTTPError{Status: resp.StatusCode, Body: sc.String(string(b))}
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
		r, _ := jsonrpc.DecodeResponse(b)
		return &RefusedError{Method: method, Err: sc.ErrorObject(r.Error)}
	}
	err = readEvents(resp.Body, func(msg []byte) { on(sc.JSON(msg)) })
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// RefusedError: the upstream answered a stream's request with a JSON-RPC
// error (or with no event stream at all): it does not serve Method.
type RefusedError struct {
	Method string
	Err    json.RawMessage // the upstream's error object; nil when there was none
}

func (e *RefusedError) Error() string {
	if e.Err == nil {
		return "upstream answered " + e.Method + " without an event stream"
	}
	return "upstream refused " + e.Method + ": " + string(e.Err)
}

// openStream sends req, a request whose answer is a long-lived event
// stream, with srv's brokered credential, and returns the response and
// the Scrubber that removes the credential from what it carries. The
// caller closes the body.
func (c *Client) openStream(ctx context.Context, req *http.Request, srv *registry.Server) (*http.Response, Scrubber, error) {
	var sc Scrubber
	cred, err := c.credential(ctx, srv)
	if err != nil {
		return nil, sc, err
	}
	if cred != nil {
		req.Header.Set(cred.header, cred.value)
		sc = cred.scrub
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, sc, &ConnError{Err: errors.Unwrap(err)}
	}
	return resp, sc, nil
}
