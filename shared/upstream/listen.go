package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/textproto"

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
// upstream closes the stream. An upstream that offers no such stream (405),
// or a session without an id (the stateless protocol), returns nil at
// once. Listen is not bounded by Timeout: ctx bounds it.
func (c *Client) Listen(ctx context.Context, srv *registry.Server, sess Session, on func([]byte)) error {
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
		req.Header.Set("MCP-Protocol-Version", sess.Protocol)
	}
	var sc Scrubber
	if cr := srv.Credential; cr != nil {
		if c.Creds == nil {
			return &CredentialError{Ref: cr.Ref}
		}
		v, err := c.Creds.Resolve(ctx, cr.Ref)
		if v = textproto.TrimString(v); err != nil || v == "" {
			return &CredentialError{Ref: cr.Ref}
		}
		req.Header.Set(cr.Header, v)
		sc = NewScrubber(v)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return &ConnError{Err: errors.Unwrap(err)}
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
	err = readEvents(resp.Body, func(msg []byte) { on(sc.JSON(msg)) })
	if ctx.Err() != nil {
		return nil
	}
	return err
}
