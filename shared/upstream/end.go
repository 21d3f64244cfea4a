package upstream

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/registry"
)

// EndTimeout bounds ending one upstream session (End).
const EndTimeout = 2 * time.Second

// End ends the upstream session sess on srv: an HTTP DELETE carrying its
// Mcp-Session-Id, which the Streamable HTTP transport asks of a client that
// no longer needs a session, so that the upstream can let its state go.
// A session without an id (an upstream that issues none, or the stateless
// protocol) needs nothing. The server's brokered credential goes with the
// DELETE as with any request. 2xx, 404 (already gone) and 405 (the
// upstream does not let clients end sessions) are success; End takes at
// most EndTimeout and never retries.
func (c *Client) End(ctx context.Context, srv *registry.Server, sess Session) error {
	if sess.ID == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, EndTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, srv.URL, nil)
	if err != nil {
		return &ProtocolError{Detail: "bad upstream URL"}
	}
	req.Header.Set("Mcp-Session-Id", sess.ID)
	if sess.Protocol != "" {
		req.Header.Set("Mcp-Protocol-Version", sess.Protocol)
	}
	cred, err := c.credential(ctx, srv)
	if err != nil {
		return err
	}
	if cred != nil {
		req.Header.Set(cred.header, cred.value)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return &TimeoutError{After: EndTimeout}
		}
		return &ConnError{Err: errors.Unwrap(err)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	switch s := resp.StatusCode; {
	case s >= 200 && s <= 299, s == http.StatusNotFound, s == http.StatusMethodNotAllowed:
		return nil
	default:
		return &HTTPError{Status: s}
	}
}

// ServerLister is the registry read EndSessions needs; registry.Reader is
// one.
type ServerLister interface {
	Servers(ctx context.Context, tenant string) ([]registry.Server, error)
}

// EndSessions ends the upstream sessions of one of tenant's gateway
// sessions: ups maps a server name to its Session.Encode() value, as
// session.Record.Upstream holds them. They are ended at once, each within
// EndTimeout; a server no longer registered is skipped. Failures are
// logged, never returned: an upstream session that could not be ended is
// left to the upstream's own idle expiry.
func (c *Client) EndSessions(ctx context.Context, servers ServerLister, tenant string, ups map[string]string, log *slog.Logger) {
	if len(ups) == 0 {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	list, err := servers.Servers(ctx, tenant)
	if err != nil {
		log.WarnContext(ctx, "upstream sessions not ended: registry unavailable", "tenant", tenant, "sessions", len(ups), "err", err)
		return
	}
	var wg sync.WaitGroup
	for i := range list {
		srv := &list[i]
		sess, ok := DecodeSession(ups[srv.Name])
		if !ok || sess.ID == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.End(ctx, srv, sess); err != nil {
				log.WarnContext(ctx, "upstream session not ended; left to its idle expiry", "tenant", tenant, "server", srv.Name, "err", err)
			}
		}()
	}
	wg.Wait()
}
