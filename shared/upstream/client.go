// Package upstream talks to tenants' MCP servers over Streamable HTTP. It
// forwards JSON-RPC messages as raw bytes, reads JSON or SSE answers to the
// final response, and reports failures as typed errors the gateway maps to
// the seed's failure contract (-32000, -32064).
package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/registry"
)

// ProtocolVersion is the version aegis offers in initialize to upstream
// servers that do not speak the stateless protocol (ModernProtocol).
const ProtocolVersion = "2025-11-25"

// MaxResponseBytes caps what aegis reads from an upstream answer.
const MaxResponseBytes = 8 << 20

// Credentials resolves a brokered credential reference to its value.
type Credentials interface {
	Resolve(ctx context.Context, ref string) (string, error)
}

// Session is the upstream's own session for one gateway session and server.
type Session struct {
	ID       string // Mcp-Session-Id the upstream issued ("" if it issues none)
	Protocol string // negotiated protocol version
}

// Encode packs s for the gateway session record.
func (s Session) Encode() string { return s.Protocol + " " + s.ID }

// DecodeSession unpacks what Encode produced; ok is false for "".
func DecodeSession(v string) (Session, bool) {
	p, id, ok := strings.Cut(v, " ")
	if !ok || p == "" {
		return Session{}, false
	}
	return Session{ID: id, Protocol: p}, true
}

// Client sends requests to upstream MCP servers. It is safe for concurrent
// use; set its fields before the first call and do not change them after.
type Client struct {
	HTTP       *http.Client
	Timeout    time.Duration // UPSTREAM_TIMEOUT_SECS
	MaxRetries int           // UPSTREAM_MAX_RETRIES, connection failures only
	Creds      Credentials   // may be nil when no server has a credential
	ClientName string

	// Observe, when set, is told the outcome of every Call that ran to an
	// end (not of calls whose context the caller cancelled): err is nil for
	// an answer, including an upstream JSON-RPC error, and a failure of this
	// package's types otherwise (see IsFailure). The circuit breaker records
	// results through it.
	Observe func(srv *registry.Server, err error)

	legacy legacyHints // servers that answered server/discover as legacy
}

// Errors of an upstream exchange. The gateway maps Timeout to -32064 and the
// rest to -32000.
type (
	// ConnError: the request never left (dial failed); retried.
	ConnError struct{ Err error }
	// TimeoutError: the request was sent and no answer came in time
	// (within the budget, or before the caller's context ended: After is
	// then the time waited). During names the set-up step that timed out
	// ("initialize") when the call itself was never sent; empty when the
	// call was.
	TimeoutError struct {
		After  time.Duration
		During string
	}
	// HTTPError: the upstream answered with a non-2xx status.
	HTTPError struct {
		Status int
		Body   string // the first 512 bytes of the body, the credential removed before the cut and at it
	}
	// ProtocolError: the answer could not be read as a JSON-RPC response,
	// or the connection broke after the request was sent.
	ProtocolError struct{ Detail string }
	// SessionLost: the upstream answered 404 to a request carrying its
	// session id; the caller re-initializes once.
	SessionLost struct{}
	// CredentialError: the server's brokered credential could not be
	// resolved; nothing was sent. It maps to -32000 but does not count
	// against the circuit breaker (the upstream is not at fault).
	CredentialError struct{ Ref string }
)

func (e *ConnError) Error() string { return "could not connect: " + e.Err.Error() }
func (e *ConnError) Unwrap() error { return e.Err }
func (e *TimeoutError) Error() string {
	if e.During != "" {
		return fmt.Sprintf("upstream did not respond within %v to %s", e.After, e.During)
	}
	return fmt.Sprintf("upstream did not respond within %v", e.After)
}

// CallSent reports whether err is a timeout of the call itself: the
// request reached the upstream and may have executed (-32064). A timeout
// while setting up the session is not one: the call was never sent. A
// request whose caller gave up (its context ended) after it was written is
// reported as a TimeoutError too, never as a ConnError.
func CallSent(err error) bool {
	var te *TimeoutError
	return errors.As(err, &te) && te.During == ""
}

// budgetKey carries the budget of a whole exchange (see WithBudget).
type budgetKey struct{}

// budget is one UPSTREAM_TIMEOUT_SECS shared by several requests. Its
// clock starts with the first request sent under it, so time spent before
// (the gateway's own store work) is not taken from the upstream.
type budget struct {
	mu       sync.Mutex
	deadline time.Time
}

// start returns the budget's deadline, setting it to d at first use.
func (b *budget) start(d time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.deadline.IsZero() {
		b.deadline = d
	}
	return b.deadline
}

// WithBudget gives everything sent under the returned context one deadline,
// Timeout from the first request: discovery, initialize, a re-initialize,
// the catalog's tools/list of a cold cache and the call itself share
// UPSTREAM_TIMEOUT_SECS instead of each having their own, so a slow
// upstream cannot stretch a call past the function timeout that was sized
// for it. An existing budget is kept.
func (c *Client) WithBudget(ctx context.Context) context.Context {
	if _, ok := ctx.Value(budgetKey{}).(*budget); ok {
		return ctx
	}
	return context.WithValue(ctx, budgetKey{}, &budget{})
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("upstream answered HTTP %d %s", e.Status, e.Body)
}
func (e *ProtocolError) Error() string { return e.Detail }
func (e *SessionLost) Error() string   { return "upstream session not found" }
func (e *CredentialError) Error() string {
	return "brokered credential unavailable (" + credKind(e.Ref) + ")"
}

// credKind is the part of a credential reference that may be shown: its
// kind, never the name or path.
func credKind(ref string) string {
	k, _, _ := strings.Cut(ref, ":")
	return k
}

// IsFailure reports whether err is an upstream failure that counts against
// the circuit breaker: the upstream could not be reached, answered non-2xx,
// sent something unreadable, or did not answer in time.
func IsFailure(err error) bool {
	if err == nil {
		return false
	}
	var (
		ce *ConnError
		te *TimeoutError
		he *HTTPError
		pe *ProtocolError
		sl *SessionLost
	)
	return errors.As(err, &ce) || errors.As(err, &te) || errors.As(err, &he) || errors.As(err, &pe) || errors.As(err, &sl)
}

// Exchange is one request to send.
type Exchange struct {
	Server  *registry.Server
	Session Session
	ID      json.RawMessage // nil for a notification
	Method  string
	Params  json.RawMessage
	Header  http.Header // extra headers (Idempotency-Key, traceparent)
	// ToolDef is the called tool's definition from the upstream's
	// tools/list, for the Mcp-Param-* headers of 2026-07-28 upstreams.
	ToolDef json.RawMessage
	// Capabilities are the client's capabilities, announced to the
	// upstream when this exchange opens its session (initialize) and in
	// the _meta of a 2026-07-28 request; nil announces none ({}).
	Capabilities json.RawMessage
	// OnEvent, when set, is given every message of the upstream's event
	// stream other than the response (progress and log notifications,
	// requests to the client), in order, as they arrive, with the brokered
	// credential removed. It runs on the goroutine of Send and must not
	// block for long. nil drops them.
	OnEvent func(msg []byte)
	// OnSession, when set, is told the upstream session Call opened for
	// this exchange, before the request is sent on it, so that an answer
	// of the client to a request of the upstream during the call can be
	// sent on that session by any instance.
	OnSession func(Session)
	// Body, when set, is sent as the whole message instead of a request
	// built from ID, Method and Params: the client's answer to a request
	// of the upstream. No answer is read (the upstream answers 202).
	Body []byte
}

// Send performs one exchange and returns the upstream's JSON-RPC response
// (nil for a notification). Connection failures where the request never
// left are retried up to MaxRetries; timeouts and HTTP errors never are.
// The server's brokered credential is injected as its header and removed
// from everything returned: the response's result and error, and the
// details of errors.
func (c *Client) Send(ctx context.Context, ex *Exchange) (*jsonrpc.Response, http.Header, error) {
	cred, err := c.credential(ctx, ex.Server)
	if err != nil {
		return nil, nil, err
	}
	params := ex.Params
	switch {
	case IsModern(ex.Session.Protocol) && ex.ID != nil:
		params = c.modernMeta(params, ex.Session.Protocol, ex.Capabilities)
	case !IsModern(ex.Session.Protocol):
		params = stripModernMeta(params)
	}
	body := ex.Body
	if body == nil {
		body = encodeRequest(ex.ID, ex.Method, params)
	}
	var (
		resp *jsonrpc.Response
		hdr  http.Header
	)
	for attempt := 0; attempt <= c.MaxRetries; attempt++ {
		resp, hdr, err = c.once(ctx, ex, body, cred)
		var ce *ConnError
		if !errors.As(err, &ce) || ctx.Err() != nil {
			break
		}
	}
	if cred != nil {
		resp, err = cred.scrubAnswer(resp, err)
	}
	return resp, hdr, err
}

// injected is a resolved brokered credential for one Send.
type injected struct {
	header, value string
	scrub         Scrubber
}

// scrubber is in's Scrubber; nil (no credential) removes nothing.
func (in *injected) scrubber() Scrubber {
	if in == nil {
		return Scrubber{}
	}
	return in.scrub
}

// scrubAnswer removes the credential from a response and from error details.
func (in *injected) scrubAnswer(resp *jsonrpc.Response, err error) (*jsonrpc.Response, error) {
	if resp != nil {
		r := *resp
		r.Result = in.scrub.JSON(r.Result)
		r.Error = in.scrub.ErrorObject(r.Error)
		resp = &r
	}
	var (
		he *HTTPError
		pe *ProtocolError
	)
	switch {
	case errors.As(err, &he):
		err = &HTTPError{Status: he.Status, Body: in.scrub.String(he.Body)}
	case errors.As(err, &pe):
		err = &ProtocolError{Detail: in.scrub.String(pe.Detail)}
	}
	return resp, err
}

func encodeRequest(id json.RawMessage, method string, params json.RawMessage) []byte {
	b := make([]byte, 0, len(params)+len(method)+64)
	b = append(b, `{"jsonrpc":"2.0",`...)
	if id != nil {
		b = append(b, `"id":`...)
		b = append(b, id...)
		b = append(b, ',')
	}
	m, _ := json.Marshal(method)
	b = append(b, `"method":`...)
	b = append(b, m...)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

func (c *Client) once(ctx context.Context, ex *Exchange, body []byte, cred *injected) (*jsonrpc.Response, http.Header, error) {
	parent := ctx
	deadline := time.Now().Add(c.Timeout)
	if b, ok := ctx.Value(budgetKey{}).(*budget); ok {
		deadline = b.start(deadline)
	}
	if d, ok := parent.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// The request's context has the caller's values and the deadline, and
	// ends with the caller's only until the answer is in (stop, below): the
	// rest of an event stream is read after that by drain, and net/http
	// closes a connection whose request's context ends before its body is
	// read to the end. Ended with the caller's (the gateway cancels its
	// call's context once it has answered), that cost a new upstream
	// connection, and a reset one, every 27 calls or so under load.
	ctx, cancel := context.WithDeadline(context.WithoutCancel(parent), deadline)
	stop := context.AfterFunc(parent, cancel)
	// handedOff: a drain goroutine owns the body and cancel (see below).
	handedOff := false
	defer func() {
		if !handedOff {
			stop()
			cancel()
		}
	}()
	var wrote atomic.Bool // set on the transport's writer goroutine
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ex.Server.URL, bytes.NewReader(body))
	if err != nil {
		return nil, nil, &ProtocolError{Detail: "bad upstream URL"}
	}
	// No rewindable body: net/http would otherwise re-send a request it
	// deems idempotent (one with an Idempotency-Key header) after a reset
	// on a reused connection, though the upstream may have run it. Retries
	// are this package's alone, and only for requests that never left.
	req.GetBody = nil
	h := req.Header
	for k, v := range ex.Header {
		h[k] = v
	}
	h["Content-Type"], h["Accept"] = ContentTypeJSON, acceptBoth
	if ex.Session.Protocol != "" {
		h.Set("Mcp-Protocol-Version", ex.Session.Protocol)
	}
	if ex.Session.ID != "" {
		h.Set("Mcp-Session-Id", ex.Session.ID)
	}
	if IsModern(ex.Session.Protocol) {
		standardHeaders(h, ex.Method, ex.Params, ex.ToolDef)
	}
	if cred != nil {
		h.Set(cred.header, cred.value)
	}
	began := time.Now()
	resp, err := c.roundTrip(req)
	if err != nil {
		switch {
		case parent.Err() != nil && wrote.Load():
			// The caller gave up after the request was written: the
			// upstream may be running it. The outcome is unknown, as after
			// a timeout; it is never a connection failure.
			return nil, nil, &TimeoutError{After: time.Since(began).Round(time.Millisecond)}
		case parent.Err() != nil: // the caller gave up before it left; not the upstream's fault
			return nil, nil, &ConnError{Err: parent.Err()}
		case (!wrote.Load() || serverClosedIdle(err)) && ctx.Err() == nil:
			return nil, nil, &ConnError{Err: errors.Unwrap(err)}
		case ctx.Err() != nil && wrote.Load():
			return nil, nil, &TimeoutError{After: c.Timeout}
		case ctx.Err() != nil:
			return nil, nil, &ConnError{Err: ctx.Err()}
		default:
			return nil, nil, &ProtocolError{Detail: "connection failed after the request was sent"}
		}
	}
	defer func() {
		if !handedOff {
			resp.Body.Close()
		}
	}()
	if resp.StatusCode == http.StatusNotFound && ex.Session.ID != "" {
		return nil, resp.Header, &SessionLost{}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Read past the part kept by as much as one form of the
		// credential can take, so that a form starting in the kept part
		// is read whole and scrubbed before the cut.
		sc := cred.scrubber()
		limit := errorBodyBytes + sc.span()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
		if ctx.Err() != nil && parent.Err() == nil {
			return nil, nil, &TimeoutError{After: c.Timeout}
		}
		return nil, resp.Header, &HTTPError{Status: resp.StatusCode, Body: string(sc.cut(b, errorBodyBytes, len(b) > limit))}
	}
	if ex.ID == nil || ex.Body != nil { // notification or answer: 202 expected, body ignored
		return nil, resp.Header, nil
	}
	var on func([]byte)
	if ex.OnEvent != nil {
		sc := cred.scrubber()
		on = func(msg []byte) { ex.OnEvent(sc.JSON(msg)) }
	}
	raw, err := readAnswer(resp, ex.ID, on)
	if err != nil {
		switch {
		case ctx.Err() != nil && parent.Err() == nil:
			return nil, nil, &TimeoutError{After: c.Timeout}
		case parent.Err() != nil: // the caller gave up while the answer came: unknown, as above
			return nil, nil, &TimeoutError{After: time.Since(began).Round(time.Millisecond)}
		}
		return nil, resp.Header, err
	}
	r, ok := jsonrpc.DecodeResponse(raw)
	if !ok {
		return nil, resp.Header, &ProtocolError{Detail: "upstream answer is not a JSON-RPC response: " + snippet(cred.scrubber(), raw, len(raw) >= MaxResponseBytes)}
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The answer came before the stream's end (the server writes its
		// last chunk a moment later). Closing now would discard the
		// connection and cost the next call a handshake; read the rest in
		// the background instead, bounded by size and by this call's
		// deadline, so the connection goes back to the pool.
		handedOff = true
		stop() // the caller's end no longer cuts the stream (see above)
		go drain(resp.Body, cancel)
	}
	return &r, resp.Header, nil
}

// Constant header values, one slice each, shared by every request (and,
// ContentTypeJSON, by the gateway's JSON answers) rather than allocated
// per call: net/http only reads them, and an Add to a full slice copies
// it. Assign them, never append to or change them.
var (
	ContentTypeJSON = []string{"application/json"}
	acceptBoth      = []string{"application/json, text/event-stream"}
)

// roundTrip is c.HTTP.Do(req) without what Do adds that this client does
// not use: no redirect is followed (NewHTTPClient's CheckRedirect stops
// at the first response; here the transport's answer is the answer), and
// there is no cookie jar and no client timeout (the context has the
// deadline). Do copies the request's headers for redirects on every call;
// that copy was about 700 bytes a call (docs/performance.md). A client
// with a Jar or a Timeout goes through Do. Errors are wrapped in
// *url.Error as Do wraps them.
func (c *Client) roundTrip(req *http.Request) (*http.Response, error) {
	h := c.HTTP
	if h.Jar != nil || h.Timeout != 0 {
		return h.Do(req)
	}
	rt := h.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: "Post", URL: req.URL.Redacted(), Err: err}
	}
	return resp, nil
}

// drainLimit bounds what is read after the answer to keep a connection.
const drainLimit = 64 << 10

func drain(body io.ReadCloser, cancel context.CancelFunc) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, drainLimit))
	body.Close()
	cancel()
}

// serverClosedIdle reports net/http's error for a pooled connection the
// server had closed before the request reached it: nothing was read by the
// upstream, so it is as safe to retry as a refused dial. (net/http retries
// it itself only for requests it deems replayable; its error value is not
// exported, hence the text.)
func serverClosedIdle(err error) bool {
	return strings.Contains(err.Error(), "server closed idle connection")
}

// Sizes of the upstream text quoted in errors: the start of a non-2xx
// body (HTTPError.Body), and of an answer that is not JSON-RPC
// (ProtocolError.Detail).
const (
	errorBodyBytes = 512
	snippetBytes   = 120
)

// snippet is the start of an unreadable answer b, for the capped detail,
// with the credential removed before the cut and after it (Scrubber.cut);
// more is whether b was itself cut short by the read limit.
func snippet(sc Scrubber, b []byte, more bool) string {
	return strings.ToValidUTF8(string(sc.cut(b, snippetBytes, more)), "?")
}

// readAnswer returns the JSON-RPC response for id from a JSON or SSE body.
func readAnswer(resp *http.Response, id json.RawMessage, on func([]byte)) ([]byte, error) {
	ct := resp.Header.Get("Content-Type")
	body := io.LimitReader(resp.Body, MaxResponseBytes)
	if strings.HasPrefix(ct, "text/event-stream") {
		return readSSE(body, id, on)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, &ProtocolError{Detail: "connection broke while reading the answer"}
	}
	return b, nil
}

// Initialize opens an upstream session on srv. A server that speaks the
// stateless protocol (ModernProtocol) is recognised by server/discover and
// needs no session: the returned Session carries only the version, and
// every request then carries the SEP-2575 _meta and headers. Any other
// server gets initialize, then notifications/initialized.
func (c *Client) Initialize(ctx context.Context, srv *registry.Server) (Session, error) {
	return c.initialize(ctx, srv, nil)
}

// initialize is Initialize announcing the client capabilities caps (nil:
// none).
func (c *Client) initialize(ctx context.Context, srv *registry.Server, caps json.RawMessage) (Session, error) {
	if !c.legacy.known(srv.URL) {
		s, ok, err := c.discover(ctx, srv)
		if err != nil {
			return Session{}, err
		}
		if ok {
			return s, nil
		}
		c.legacy.mark(srv.URL)
	}
	if len(caps) == 0 || caps[0] != '{' {
		caps = json.RawMessage(`{}`)
	}
	params := []byte(`{"protocolVersion":"` + ProtocolVersion + `","capabilities":` + string(caps) + `,"clientInfo":{"name":"` + c.name() + `","version":"1"}}`)
	resp, hdr, err := c.Send(ctx, &Exchange{Server: srv, ID: json.RawMessage(`0`), Method: "initialize", Params: params})
	if err != nil {
		return Session{}, err
	}
	if resp.Error != nil {
		return Session{}, &ProtocolError{Detail: "upstream refused initialize: " + string(resp.Error)}
	}
	s := Session{ID: hdr.Get("Mcp-Session-Id"), Protocol: ProtocolVersion}
	if v, ok := jsonrpc.StringMember(resp.Result, "protocolVersion"); ok && v != "" {
		s.Protocol = v
	}
	if _, _, err := c.Send(ctx, &Exchange{Server: srv, Session: s, Method: "notifications/initialized"}); err != nil {
		return Session{}, err
	}
	return s, nil
}

func (c *Client) name() string {
	if c.ClientName != "" {
		return c.ClientName
	}
	return "aegis-gateway"
}

// Call sends ex on ex.Session, initializing first when the session is empty
// and once more when the upstream has lost it. It returns the session used,
// so the caller can store it when it changed. Observe, when set, is told
// the outcome.
func (c *Client) Call(ctx context.Context, ex *Exchange) (*jsonrpc.Response, Session, error) {
	ctx = c.WithBudget(ctx)
	resp, s, err := c.call(ctx, ex)
	if c.Observe != nil && ctx.Err() == nil {
		c.Observe(ex.Server, err)
	}
	return resp, s, err
}

func (c *Client) call(ctx context.Context, ex *Exchange) (*jsonrpc.Response, Session, error) {
	if ex.Session.Protocol == "" {
		s, err := c.initialize(ctx, ex.Server, ex.Capabilities)
		if err != nil {
			return nil, Session{}, setup(err)
		}
		ex.Session = s
		if ex.OnSession != nil {
			ex.OnSession(s)
		}
	}
	resp, _, err := c.Send(ctx, ex)
	var lost *SessionLost
	if errors.As(err, &lost) {
		s, ierr := c.initialize(ctx, ex.Server, ex.Capabilities)
		if ierr != nil {
			return nil, Session{}, setup(ierr)
		}
		ex.Session = s
		if ex.OnSession != nil {
			ex.OnSession(s)
		}
		resp, _, err = c.Send(ctx, ex)
	}
	return resp, ex.Session, err
}

// setup marks a timeout of the session set-up: the call was not sent.
func setup(err error) error {
	var te *TimeoutError
	if errors.As(err, &te) {
		te.During = "initialize"
	}
	return err
}
