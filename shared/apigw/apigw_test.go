package apigw

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the adapter's output")

// eventNames lists testdata/events/*.json; TestTestdataIsRead fails on a
// file no test reads.
func eventNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/events/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded events: %v", err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	return names
}

// loadEvent decodes a recorded event strictly: a field API Gateway does not
// send (a typo in the fixture) fails the test.
func loadEvent(t *testing.T, name string) *events.APIGatewayV2HTTPRequest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "events", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var ev events.APIGatewayV2HTTPRequest
	if err := dec.Decode(&ev); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if ev.Version != "2.0" || ev.RequestContext.AccountID != "123456789012" || ev.RouteKey != ev.RequestContext.RouteKey {
		t.Fatalf("%s: not a payload 2.0 event of the test account: version %q account %q", name, ev.Version, ev.RequestContext.AccountID)
	}
	return &ev
}

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./shared/apigw -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (-update rewrites it)\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// requestView is what a handler can observe of a request.
type requestView struct {
	Method        string            `json:"method"`
	Path          string            `json:"path"`
	EscapedPath   string            `json:"escapedPath"`
	RawQuery      string            `json:"rawQuery"`
	RequestURI    string            `json:"requestURI"`
	Host          string            `json:"host"`
	RemoteAddr    string            `json:"remoteAddr"`
	Proto         string            `json:"proto"`
	ContentLength int64             `json:"contentLength"`
	Header        http.Header       `json:"header"`
	Cookies       []string          `json:"cookies,omitempty"`
	Body          string            `json:"body"`
	RequestID     string            `json:"requestId"`
	Stage         string            `json:"stage"`
	IAMPrincipal  string            `json:"iamPrincipal,omitempty"`
	PathParams    map[string]string `json:"pathParameters,omitempty"`
}

func view(t *testing.T, r *http.Request) requestView {
	t.Helper()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	v := requestView{
		Method: r.Method, Path: r.URL.Path, EscapedPath: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
		RequestURI: r.RequestURI, Host: r.Host, RemoteAddr: r.RemoteAddr, Proto: r.Proto,
		ContentLength: r.ContentLength, Header: r.Header, Body: string(body),
	}
	for _, c := range r.Cookies() {
		v.Cookies = append(v.Cookies, c.Name+"="+c.Value)
	}
	rc, ok := RequestContext(r.Context())
	if !ok {
		t.Fatal("RequestContext: no event on the request context")
	}
	v.RequestID, v.Stage = rc.RequestID, rc.Stage
	v.IAMPrincipal, _ = IAMPrincipal(r)
	if ev, ok := Event(r.Context()); ok {
		v.PathParams = ev.PathParameters
	}
	return v
}

// checks pins, per recorded event, what the adapter must get right; the
// golden request views pin the rest.
var checks = map[string]func(t *testing.T, r *http.Request, v requestView){
	"mcp-post": func(t *testing.T, r *http.Request, v requestView) {
		want(t, "method", v.Method, http.MethodPost)
		want(t, "path", v.Path, "/mcp")
		want(t, "comma-joined Accept kept whole", r.Header.Get("Accept"), "application/json, text/event-stream")
		want(t, "Mcp-Session-Id", r.Header.Get("Mcp-Session-Id"), "sess_01JDQ7Z4K8X2M5N9P3R6T0V1W4")
		want(t, "remote addr", v.RemoteAddr, "198.51.100.23:0")
		want(t, "host", v.Host, "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com")
		if r.Header.Get("Host") != "" {
			t.Error("Host stays in r.Host only, as net/http does")
		}
		if v.ContentLength != int64(len(v.Body)) || !json.Valid([]byte(v.Body)) {
			t.Errorf("body %d bytes, ContentLength %d, valid JSON %v", len(v.Body), v.ContentLength, json.Valid([]byte(v.Body)))
		}
	},
	"mcp-server-base64": func(t *testing.T, r *http.Request, v requestView) {
		want(t, "path", v.Path, "/mcp/github")
		want(t, "decoded body", v.Body, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search_issues","arguments":{"q":"café ✓ label:bug"}}}`)
		want(t, "raw query verbatim", v.RawQuery, "trace=1&tag=a&tag=b&q=hello%20world")
		q := r.URL.Query()
		if !slices.Equal(q["tag"], []string{"a", "b"}) || q.Get("q") != "hello world" {
			t.Errorf("query = %v", q)
		}
		want(t, "cookies", strings.Join(v.Cookies, " "), "aegis_sess=sess_01JDQ7Z4K8X2M5N9P3R6T0V1W4 theme=dark")
		want(t, "X-Forwarded-For", r.Header.Get("X-Forwarded-For"), "203.0.113.40, 198.51.100.23")
	},
	"invoke-named-stage": func(t *testing.T, r *http.Request, v requestView) {
		want(t, "stage prefix stripped", v.Path, "/v1/invoke")
		want(t, "request URI", v.RequestURI, "/v1/invoke")
		want(t, "stage", v.Stage, "prod")
		want(t, "IPv6 remote addr", v.RemoteAddr, "[2001:db8::7]:0")
		if host, _, err := net.SplitHostPort(v.RemoteAddr); err != nil || host != "2001:db8::7" {
			t.Errorf("SplitHostPort(%q) = %q, %v", v.RemoteAddr, host, err)
		}
	},
	"admin-iam": func(t *testing.T, r *http.Request, v requestView) {
		want(t, "IAM principal", v.IAMPrincipal, "arn:aws:sts::123456789012:assumed-role/AegisOperator/ops-alice")
		rc, _ := RequestContext(r.Context())
		want(t, "IAM account", rc.Authorizer.IAM.AccountID, "123456789012")
		want(t, "request id", v.RequestID, "TqbJKj0WIAMEV4A=")
		// A SigV4 Authorization value holds commas: it must reach the handler unsplit.
		if a := r.Header.Values("Authorization"); len(a) != 1 || !strings.HasPrefix(a[0], "AWS4-HMAC-SHA256 Credential=") || !strings.Contains(a[0], ", Signature=") {
			t.Errorf("Authorization = %q", a)
		}
		want(t, "proxy path parameter", v.PathParams["proxy"], "tenants/acme/keys")
	},
	"mcp-get": func(t *testing.T, r *http.Request, v requestView) {
		want(t, "method", v.Method, http.MethodGet)
		if r.Body != http.NoBody || v.ContentLength != 0 {
			t.Errorf("a GET without body gets http.NoBody, ContentLength 0; got %T, %d", r.Body, v.ContentLength)
		}
		want(t, "Last-Event-Id", r.Header.Get("Last-Event-ID"), "42")
	},
	"mcp-delete-encoded": func(t *testing.T, r *http.Request, v requestView) {
		want(t, "decoded path", v.Path, "/mcp/jira cloud")
		want(t, "escaped path kept", v.EscapedPath, "/mcp/jira%20cloud")
		want(t, "HTTP/2", v.Proto, "HTTP/2.0")
		if r.ProtoMajor != 2 {
			t.Errorf("ProtoMajor = %d", r.ProtoMajor)
		}
		want(t, "custom domain host", v.Host, "mcp.example.com")
	},
}

func want(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

// TestDecodeRecordedEvents builds the request for every recorded event and
// checks what a handler observes, against explicit checks and a golden view.
func TestDecodeRecordedEvents(t *testing.T) {
	for _, name := range eventNames(t) {
		t.Run(name, func(t *testing.T) {
			check, ok := checks[name]
			if !ok {
				t.Fatalf("testdata/events/%s.json has no entry in checks", name)
			}
			ev := loadEvent(t, name)
			r, err := NewRequest(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			v := view(t, r)
			check(t, r, v)
			b, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".request.json", append(b, '\n'))
		})
	}
}

// testMux stands in for the gateway and admin handlers: one route per
// recorded event, each exercising a part of the response encoding.
func testMux(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "POST, DELETE")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMethodNotAllowed)
		io.WriteString(w, `{"error":"method not allowed: this gateway does not stream; POST JSON-RPC to /mcp"}`)
	})
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Mcp-Session-Id", r.Header.Get("Mcp-Session-Id"))
		h.Add("Vary", "Origin")
		h.Add("Vary", "Accept")
		h.Add("Set-Cookie", "aegis_corr=4bf92f3577b34da6a3ce929d0e0e4736; Path=/; Secure; HttpOnly")
		h.Add("Set-Cookie", "theme=dark; Path=/; Max-Age=3600")
		if rc, ok := RequestContext(r.Context()); ok {
			h.Set("X-Correlation-Id", rc.RequestID)
		}
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"3 issues"}]}}`)
	})
	mux.HandleFunc("POST /mcp/{server}", func(w http.ResponseWriter, r *http.Request) {
		// Echo the bytes as an opaque blob: binary by content type.
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("X-Server", r.PathValue("server"))
		w.Write(body)
	})
	mux.HandleFunc("DELETE /mcp/{server}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Server", r.PathValue("server"))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/invoke", func(w http.ResponseWriter, r *http.Request) {
		// No Content-Type: sniffed, as net/http would.
		io.WriteString(w, `{"path":"`+r.URL.Path+`","remote":"`+r.RemoteAddr+`"}`)
	})
	mux.HandleFunc("/admin/v1/", func(w http.ResponseWriter, r *http.Request) {
		p, ok := IAMPrincipal(r)
		if !ok {
			http.Error(w, "no IAM identity", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"principal":"`+p+`","path":"`+r.URL.Path+`"}`)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("no route for %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	return mux
}

// TestRoundTripRecordedEvents runs every recorded event through Handler and
// compares the encoded response, as Lambda would send it, with a golden file.
func TestRoundTripRecordedEvents(t *testing.T) {
	fn := Handler(testMux(t))
	responses := map[string]func(t *testing.T, res events.APIGatewayV2HTTPResponse){
		"mcp-post": func(t *testing.T, res events.APIGatewayV2HTTPResponse) {
			want(t, "status", itoa(res.StatusCode), "200")
			want(t, "multi-value header joined", res.Headers["Vary"], "Origin, Accept")
			if len(res.Cookies) != 2 || res.Headers["Set-Cookie"] != "" {
				t.Errorf("Set-Cookie must move to cookies: cookies %q headers %v", res.Cookies, res.Headers)
			}
			if res.IsBase64Encoded || !json.Valid([]byte(res.Body)) {
				t.Errorf("JSON must travel as text: base64 %v body %q", res.IsBase64Encoded, res.Body)
			}
		},
		"mcp-server-base64": func(t *testing.T, res events.APIGatewayV2HTTPResponse) {
			if !res.IsBase64Encoded {
				t.Fatal("application/octet-stream must be base64-encoded")
			}
			b, err := base64.StdEncoding.DecodeString(res.Body)
			if err != nil || !strings.Contains(string(b), "café ✓") {
				t.Errorf("body = %q, %v", b, err)
			}
		},
		"invoke-named-stage": func(t *testing.T, res events.APIGatewayV2HTTPResponse) {
			want(t, "sniffed content type", res.Headers["Content-Type"], "text/plain; charset=utf-8")
			want(t, "body", res.Body, `{"path":"/v1/invoke","remote":"[2001:db8::7]:0"}`)
		},
		"admin-iam": func(t *testing.T, res events.APIGatewayV2HTTPResponse) {
			want(t, "status", itoa(res.StatusCode), "201")
		},
		"mcp-get": func(t *testing.T, res events.APIGatewayV2HTTPResponse) {
			want(t, "status", itoa(res.StatusCode), "405")
			want(t, "Allow", res.Headers["Allow"], "POST, DELETE")
		},
		"mcp-delete-encoded": func(t *testing.T, res events.APIGatewayV2HTTPResponse) {
			want(t, "status", itoa(res.StatusCode), "204")
			want(t, "body", res.Body, "")
			want(t, "path value", res.Headers["X-Server"], "jira cloud")
		},
	}
	for _, name := range eventNames(t) {
		t.Run(name, func(t *testing.T) {
			check, ok := responses[name]
			if !ok {
				t.Fatalf("testdata/events/%s.json has no response check", name)
			}
			res, err := fn(context.Background(), *loadEvent(t, name))
			if err != nil {
				t.Fatal(err)
			}
			check(t, res)
			b, err := json.MarshalIndent(res, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".response.json", append(b, '\n'))
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestTestdataIsRead fails on a golden file whose event is gone: fixtures
// no test reads drift.
func TestTestdataIsRead(t *testing.T) {
	names := eventNames(t)
	files, _ := filepath.Glob("testdata/golden/*")
	for _, f := range files {
		base := filepath.Base(f)
		ev, ok := strings.CutSuffix(base, ".request.json")
		if !ok {
			ev, ok = strings.CutSuffix(base, ".response.json")
		}
		if !ok || !slices.Contains(names, ev) {
			t.Errorf("testdata/golden/%s belongs to no recorded event", base)
		}
	}
	if len(files) != 2*len(names) && !*update {
		t.Errorf("%d golden files for %d events; want a request and a response view each", len(files), len(names))
	}
	entries, _ := os.ReadDir("testdata")
	for _, e := range entries {
		if e.Name() != "events" && e.Name() != "golden" {
			t.Errorf("testdata/%s is read by no test", e.Name())
		}
	}
}

func TestStripStage(t *testing.T) {
	tests := []struct{ path, stage, want string }{
		{"/mcp", "$default", "/mcp"},
		{"/mcp", "", "/mcp"},
		{"/prod/mcp", "prod", "/mcp"},
		{"/prod", "prod", "/"},
		{"/prod/", "prod", "/"},
		{"/production/mcp", "prod", "/production/mcp"}, // not a whole segment
		{"/mcp", "prod", "/mcp"},                       // custom domain: no prefix in rawPath
		{"/prod/prod/x", "prod", "/prod/x"},            // only once
	}
	for _, tt := range tests {
		if got := StripStage(tt.path, tt.stage); got != tt.want {
			t.Errorf("StripStage(%q, %q) = %q, want %q", tt.path, tt.stage, got, tt.want)
		}
	}
}

func TestIsText(t *testing.T) {
	tests := []struct {
		ct   string
		want bool
	}{
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"text/event-stream", true},
		{"text/plain; charset=utf-8", true},
		{"application/problem+json", true},
		{"application/soap+xml", true},
		{"application/xml", true},
		{"application/javascript", true},
		{"application/x-www-form-urlencoded", true},
		{"APPLICATION/JSON", true}, // media types are case-insensitive
		{"application/octet-stream", false},
		{"image/png", false},
		{"application/gzip", false},
		{"application/pdf", false},
		{"", false},
		{"not a type;;", false},
	}
	for _, tt := range tests {
		if got := IsText(tt.ct); got != tt.want {
			t.Errorf("IsText(%q) = %v, want %v", tt.ct, got, tt.want)
		}
	}
}

func TestResponseEncoding(t *testing.T) {
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		status     int
		base64     bool
		body       string // decoded
		headers    map[string]string
		cookies    []string
		noCTHeader bool
	}{
		{
			name:    "nothing written is 200 with no body",
			handler: func(w http.ResponseWriter, r *http.Request) {},
			status:  200, noCTHeader: true,
		},
		{
			name: "first final status wins, 1xx ignored",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusEarlyHints)
				w.WriteHeader(http.StatusAccepted)
				w.WriteHeader(http.StatusInternalServerError)
			},
			status: 202, noCTHeader: true,
		},
		{
			name: "text type with invalid UTF-8 is base64",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				w.Write([]byte{'o', 'k', 0xff, 0xfe})
			},
			status: 200, base64: true, body: "ok\xff\xfe",
		},
		{
			name: "PNG sniffed and base64",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
			},
			status: 200, base64: true, body: "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
			headers: map[string]string{"Content-Type": "image/png"},
		},
		{
			name: "JSON problem type is text",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusTooManyRequests)
				w.Write([]byte(`{"title":"slow down ✋"}`))
			},
			status: 429, body: `{"title":"slow down ✋"}`,
		},
		{
			name: "cookies and repeated headers",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Add("Set-Cookie", "a=1")
				w.Header().Add("Set-Cookie", "b=2; Expires=Wed, 21 Oct 2026 07:28:00 GMT")
				w.Header().Add("Cache-Control", "no-store")
				w.Header().Add("Cache-Control", "private")
				w.Header()["X-Empty"] = nil
			},
			status: 200, noCTHeader: true,
			headers: map[string]string{"Cache-Control": "no-store, private"},
			cookies: []string{"a=1", "b=2; Expires=Wed, 21 Oct 2026 07:28:00 GMT"},
		},
		{
			name: "explicit empty Content-Type turns sniffing off",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header()["Content-Type"] = nil
				w.Write([]byte("<html></html>"))
			},
			status: 200, base64: true, body: "<html></html>", noCTHeader: true,
		},
		{
			name:    "panic is a 500 and the instance lives on",
			handler: func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) },
			status:  500, body: `{"error":"internal error"}`,
			headers: map[string]string{"Content-Type": "application/json"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := &events.APIGatewayV2HTTPRequest{RawPath: "/x", RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}}}
			res := Serve(context.Background(), tt.handler, ev)
			if res.StatusCode != tt.status {
				t.Errorf("status = %d, want %d", res.StatusCode, tt.status)
			}
			if res.IsBase64Encoded != tt.base64 {
				t.Errorf("isBase64Encoded = %v, want %v", res.IsBase64Encoded, tt.base64)
			}
			body := res.Body
			if res.IsBase64Encoded {
				b, err := base64.StdEncoding.DecodeString(res.Body)
				if err != nil {
					t.Fatal(err)
				}
				body = string(b)
			}
			if body != tt.body {
				t.Errorf("body = %q, want %q", body, tt.body)
			}
			for k, v := range tt.headers {
				if res.Headers[k] != v {
					t.Errorf("header %s = %q, want %q", k, res.Headers[k], v)
				}
			}
			if _, ok := res.Headers["Content-Type"]; ok && tt.noCTHeader {
				t.Errorf("unexpected Content-Type %q", res.Headers["Content-Type"])
			}
			if _, ok := res.Headers["X-Empty"]; ok {
				t.Error("a header without values must not be sent")
			}
			if !slices.Equal(res.Cookies, tt.cookies) {
				t.Errorf("cookies = %q, want %q", res.Cookies, tt.cookies)
			}
			// The JSON Lambda sends must carry the body byte for byte.
			wire, _ := json.Marshal(res)
			var back events.APIGatewayV2HTTPResponse
			if err := json.Unmarshal(wire, &back); err != nil || back.Body != res.Body {
				t.Errorf("body does not survive JSON: %v", err)
			}
		})
	}
}

func TestBadBase64BodyFailsOnRead(t *testing.T) {
	ev := loadEvent(t, "mcp-server-base64")
	ev.Body = "not*base64"
	var readErr error
	res := Serve(context.Background(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, readErr = io.ReadAll(r.Body)
		http.Error(w, "unreadable body", http.StatusBadRequest)
	}), ev)
	if readErr == nil || res.StatusCode != http.StatusBadRequest {
		t.Errorf("read error %v, status %d; want a read error and the handler's 400", readErr, res.StatusCode)
	}
}

func TestBadRequestURI(t *testing.T) {
	ev := loadEvent(t, "mcp-post")
	ev.RawPath = "/mcp/%zz"
	res := Serve(context.Background(), http.NotFoundHandler(), ev)
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("status = %d, want 400", res.StatusCode)
	}
}

func TestHostFallsBackToDomainName(t *testing.T) {
	ev := loadEvent(t, "mcp-get")
	delete(ev.Headers, "host")
	r, err := NewRequest(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	want(t, "host", r.Host, "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com")
}

func TestContextCarriesDeadlineAndValues(t *testing.T) {
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "lambda"))
	defer cancel()
	r, err := NewRequest(ctx, loadEvent(t, "mcp-get"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Context().Value(key{}) != "lambda" {
		t.Error("the invocation context must be the request's parent")
	}
	cancel()
	if !errors.Is(r.Context().Err(), context.Canceled) {
		t.Error("cancelling the invocation must cancel the request")
	}
}

func TestAccessorsOutsideLambda(t *testing.T) {
	r, _ := http.NewRequest("GET", "http://localhost/mcp", nil)
	if _, ok := RequestContext(r.Context()); ok {
		t.Error("RequestContext outside Lambda must report false")
	}
	if _, ok := IAMPrincipal(r); ok {
		t.Error("IAMPrincipal outside Lambda must report false")
	}
	r2, err := NewRequest(context.Background(), loadEvent(t, "mcp-post"))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := IAMPrincipal(r2); ok {
		t.Errorf("a route without IAM authorization has no principal, got %q", p)
	}
}

func TestFlushNotSupported(t *testing.T) {
	w := NewResponseWriter()
	if err := http.NewResponseController(w).Flush(); !errors.Is(err, http.ErrNotSupported) {
		t.Errorf("Flush = %v, want http.ErrNotSupported: an HTTP API cannot stream", err)
	}
}

// TestAllocations keeps the adapter lean: a recorded MCP POST through a
// handler that writes a small JSON answer.
func TestAllocations(t *testing.T) {
	ev := loadEvent(t, "mcp-post")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	})
	ctx := context.Background()
	n := testing.AllocsPerRun(100, func() { Serve(ctx, h, ev) })
	t.Logf("%.0f allocations per event", n)
	if n > 40 {
		t.Errorf("%.0f allocations per event; the adapter should need about 30", n)
	}
}

func BenchmarkServe(b *testing.B) {
	raw, err := os.ReadFile("testdata/events/mcp-post.json")
	if err != nil {
		b.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		b.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		Serve(ctx, h, &ev)
	}
}
