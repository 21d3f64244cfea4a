// Package apigw serves an http.Handler on AWS Lambda behind an API Gateway
// HTTP API (payload format 2.0). It is the only Lambda-specific code between
// API Gateway and aegis's handlers: the gateway and the admin API are plain
// http.Handlers, the same ones `aegis serve` mounts on net/http.
//
// The function mains are one line:
//
//	lambda.Start(apigw.Handler(h))
//
// # Requests
//
// An event becomes an *http.Request as net/http's server would have built it:
//
//   - Method from requestContext.http.method; Proto from requestContext.http.protocol.
//   - URL path from rawPath, with the stage prefix removed when the stage is
//     not "$default" ("/prod/mcp" on stage "prod" is served as "/mcp"); a
//     rawPath that does not start with the stage (a custom domain mapping) is
//     kept as it is. rawPath keeps its percent-encoding in URL.RawPath.
//   - URL.RawQuery is rawQueryString, byte for byte (repeated keys and
//     encoding intact); queryStringParameters is not used.
//   - Headers: API Gateway sends names lower-cased and joins repeated headers
//     with commas; names are canonicalised (r.Header.Get works as usual) and
//     each value is kept whole. The handler sees "Accept: a, b" as one value,
//     which RFC 9110 makes equivalent to two lines for list-valued headers.
//   - Cookies: the event's cookies array becomes one Cookie header joined
//     with "; ", so r.Cookie and r.Cookies work.
//   - Host from the host header, else requestContext.domainName.
//   - RemoteAddr is requestContext.http.sourceIp joined with port 0
//     ("203.0.113.7:0", "[2001:db8::1]:0"): API Gateway does not pass the
//     client's port, and net.SplitHostPort must still work on it.
//   - Body: isBase64Encoded bodies are decoded. A body that is not valid
//     base64 is not an adapter error: reading r.Body fails, as a broken
//     connection would, and the handler answers it (aegis: HTTP 400, -32700).
//   - r.Context() is the invocation's context (the Lambda deadline applies)
//     and carries the event: see RequestContext, Event and IAMPrincipal.
//
// # Responses
//
// The handler writes into an in-memory ResponseWriter (API Gateway HTTP APIs
// cannot stream a response). Its result becomes the 2.0 response:
//
//   - statusCode: the first WriteHeader with a final status, else 200.
//     Informational (1xx) statuses are ignored.
//   - headers: every header but Set-Cookie, values joined with ", ".
//     Content-Type is sniffed from the body when the handler set none, as
//     net/http does.
//   - cookies: one entry per Set-Cookie value.
//   - body: sent as text when the media type is textual (text/*, JSON, XML,
//     JavaScript, form data, YAML, event streams, and any +json/+xml type)
//     and the bytes are valid UTF-8; everything else is base64-encoded with
//     isBase64Encoded true, so no byte is lost to JSON's UTF-8 rules.
//
// A handler that panics gets a 500 with the body {"error":"internal error"},
// and the panic and its stack go to the function's log (stderr), as net/http
// does: the instance stays warm instead of exiting as aws-lambda-go would.
package apigw

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// DefaultStage is the stage name whose URL has no stage prefix.
const DefaultStage = "$default"

// Func is the Lambda handler type Handler returns; lambda.Start accepts it.
type Func = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Handler returns a Lambda handler that serves every API Gateway HTTP API
// (2.0) event with h. The returned error is always nil: every outcome,
// including a panic in h, is an HTTP response. It is safe for concurrent use
// if h is.
func Handler(h http.Handler) Func {
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return Serve(ctx, h, &ev), nil
	}
}

// Serve runs one event through h and returns the encoded response.
func Serve(ctx context.Context, h http.Handler, ev *events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	r, err := NewRequest(ctx, ev)
	if err != nil {
		return errorResponse(http.StatusBadRequest, "bad request")
	}
	w := NewResponseWriter()
	if !serve(h, w, r) {
		return errorResponse(http.StatusInternalServerError, "internal error")
	}
	return w.Response()
}

// serve calls h and reports false when it panicked.
func serve(h http.Handler, w http.ResponseWriter, r *http.Request) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			ok = false
			if v != http.ErrAbortHandler {
				fmt.Fprintf(os.Stderr, "apigw: panic serving %s %s: %v\n%s", r.Method, r.URL.Path, v, debug.Stack())
			}
		}
	}()
	h.ServeHTTP(w, r)
	return true
}

func errorResponse(status int, msg string) events.APIGatewayV2HTTPResponse {
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       `{"error":"` + msg + `"}`,
	}
}

// NewRequest builds the *http.Request for ev, as described in the package
// documentation. ctx becomes the request's context, carrying ev. It fails
// only when the path and query cannot form a request URI.
func NewRequest(ctx context.Context, ev *events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	rc := &ev.RequestContext
	method := rc.HTTP.Method
	if method == "" {
		method = http.MethodGet
	}
	path := StripStage(ev.RawPath, rc.Stage)
	if path == "" {
		path = "/"
	}
	uri := path
	if ev.RawQueryString != "" {
		uri = path + "?" + ev.RawQueryString
	}
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return nil, fmt.Errorf("apigw: request URI %q: %w", uri, err)
	}

	header := make(http.Header, len(ev.Headers)+1)
	// One backing array for every header value: one allocation, not one per header.
	vals := make([]string, 0, len(ev.Headers)+1)
	add := func(k, v string) {
		vals = append(vals, v)
		header[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	for k, v := range ev.Headers {
		add(textproto.CanonicalMIMEHeaderKey(k), v)
	}
	if len(ev.Cookies) > 0 {
		add("Cookie", strings.Join(ev.Cookies, "; "))
	}

	host := header.Get("Host")
	if host == "" {
		host = rc.DomainName
	}
	delete(header, "Host") // net/http keeps Host in r.Host only

	r := &http.Request{
		Method:     method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     header,
		Host:       host,
		RequestURI: uri,
		RemoteAddr: remoteAddr(rc.HTTP.SourceIP),
		Body:       http.NoBody,
	}
	if maj, min, ok := http.ParseHTTPVersion(rc.HTTP.Protocol); ok {
		r.Proto, r.ProtoMajor, r.ProtoMinor = rc.HTTP.Protocol, maj, min
	}
	if ev.Body != "" {
		if ev.IsBase64Encoded {
			b := make([]byte, base64.StdEncoding.DecodedLen(len(ev.Body)))
			n, err := base64.StdEncoding.Decode(b, []byte(ev.Body))
			if err != nil {
				r.Body = errorBody{fmt.Errorf("apigw: body is not valid base64: %w", err)}
				r.ContentLength = -1
			} else {
				r.Body = io.NopCloser(bytes.NewReader(b[:n]))
				r.ContentLength = int64(n)
			}
		} else {
			r.Body = io.NopCloser(strings.NewReader(ev.Body))
			r.ContentLength = int64(len(ev.Body))
		}
	}
	return r.WithContext(context.WithValue(ctx, eventKey{}, ev)), nil
}

// StripStage removes "/{stage}" from the front of rawPath when stage names a
// stage other than "$default" and rawPath starts with it as a whole segment.
func StripStage(rawPath, stage string) string {
	if stage == "" || stage == DefaultStage {
		return rawPath
	}
	rest, ok := strings.CutPrefix(rawPath, "/"+stage)
	if !ok || (rest != "" && rest[0] != '/') {
		return rawPath
	}
	if rest == "" {
		return "/"
	}
	return rest
}

func remoteAddr(ip string) string {
	if ip == "" {
		return ""
	}
	return net.JoinHostPort(ip, "0")
}

// errorBody is a request body whose every read fails.
type errorBody struct{ err error }

func (b errorBody) Read([]byte) (int, error) { return 0, b.err }
func (errorBody) Close() error               { return nil }

type eventKey struct{}

// Event returns the API Gateway event a request was built from, and false
// when ctx did not come from this package (the handler runs under net/http).
// The event must not be modified.
func Event(ctx context.Context) (*events.APIGatewayV2HTTPRequest, bool) {
	ev, ok := ctx.Value(eventKey{}).(*events.APIGatewayV2HTTPRequest)
	return ev, ok
}

// RequestContext returns the event's request context (request id, stage,
// source IP, authorizer claims or IAM identity), and false outside Lambda.
// It must not be modified.
func RequestContext(ctx context.Context) (*events.APIGatewayV2HTTPRequestContext, bool) {
	ev, ok := Event(ctx)
	if !ok {
		return nil, false
	}
	return &ev.RequestContext, true
}

// IAMPrincipal returns the ARN of the IAM principal that API Gateway's
// AWS_IAM authorizer verified for r (requestContext.authorizer.iam.userArn),
// and false when the route had no IAM authorization. Its signature matches
// admin.IAMPrincipal, so the AdminFunction passes it as Options.TrustIAM.
// Only routes whose authorizer is AWS_IAM may trust it: the value comes from
// API Gateway, never from a client header.
func IAMPrincipal(r *http.Request) (string, bool) {
	rc, ok := RequestContext(r.Context())
	if !ok || rc.Authorizer == nil || rc.Authorizer.IAM == nil || rc.Authorizer.IAM.UserARN == "" {
		return "", false
	}
	return rc.Authorizer.IAM.UserARN, true
}

// ResponseWriter is an in-memory http.ResponseWriter whose result becomes an
// API Gateway 2.0 response. It does not implement http.Flusher: a response
// cannot be streamed through an HTTP API, so http.ResponseController.Flush
// reports http.ErrNotSupported. It is not safe for concurrent use.
type ResponseWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

// NewResponseWriter returns an empty ResponseWriter.
func NewResponseWriter() *ResponseWriter {
	return &ResponseWriter{header: make(http.Header, 4)}
}

// Header implements http.ResponseWriter.
func (w *ResponseWriter) Header() http.Header { return w.header }

// WriteHeader implements http.ResponseWriter. The first final status wins;
// informational statuses are ignored.
func (w *ResponseWriter) WriteHeader(status int) {
	if w.status != 0 || status < 200 {
		return
	}
	w.status = status
}

// Write implements http.ResponseWriter.
func (w *ResponseWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// WriteString lets io.WriteString avoid a copy.
func (w *ResponseWriter) WriteString(s string) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.WriteString(s)
}

// Response encodes what was written as an API Gateway 2.0 response.
func (w *ResponseWriter) Response() events.APIGatewayV2HTTPResponse {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	body := w.body.Bytes()
	if len(body) > 0 && w.header.Get("Content-Type") == "" {
		if _, set := w.header["Content-Type"]; !set { // an explicit empty value turns sniffing off, as in net/http
			w.header.Set("Content-Type", http.DetectContentType(body))
		}
	}
	res := events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    make(map[string]string, len(w.header)),
	}
	for k, vs := range w.header {
		if len(vs) == 0 {
			continue
		}
		if k == "Set-Cookie" {
			res.Cookies = append(res.Cookies, vs...)
			continue
		}
		if len(vs) == 1 {
			res.Headers[k] = vs[0]
		} else {
			res.Headers[k] = strings.Join(vs, ", ")
		}
	}
	if len(body) == 0 {
		return res
	}
	if IsText(w.header.Get("Content-Type")) && utf8.Valid(body) {
		res.Body = string(body)
	} else {
		res.Body = base64.StdEncoding.EncodeToString(body)
		res.IsBase64Encoded = true
	}
	return res
}

// IsText reports whether a response with this Content-Type is sent as text
// rather than base64: text/*, application/json, application/xml,
// application/javascript, application/x-www-form-urlencoded,
// application/yaml, application/x-ndjson and any type with a +json, +xml or
// +yaml suffix. Anything else, or a missing or unparsable type, is binary.
func IsText(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	if strings.HasPrefix(mt, "text/") {
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/javascript",
		"application/x-www-form-urlencoded", "application/yaml",
		"application/x-yaml", "application/x-ndjson", "application/jsonl":
		return true
	}
	return strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") || strings.HasSuffix(mt, "+yaml")
}

var _ http.ResponseWriter = (*ResponseWriter)(nil)
var _ io.StringWriter = (*ResponseWriter)(nil)
