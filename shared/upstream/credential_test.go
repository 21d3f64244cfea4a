package upstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/registry"
)

// Brokered credentials through Client.Send against a loopback upstream:
// what the upstream got, and what comes back of it.

// staticCreds resolves every reference to one value.
type staticCreds string

func (c staticCreds) Resolve(context.Context, string) (string, error) { return string(c), nil }

// fakeUpstream answers every request with the status, content type and
// body last set, and keeps the raw bytes of what it was sent.
type fakeUpstream struct {
	url string

	mu     sync.Mutex
	status int
	ctype  string
	body   string
	wire   bytes.Buffer
	header http.Header // of the last request, as net/http parsed it
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	up := &fakeUpstream{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up.mu.Lock()
		status, ctype, body := up.status, up.ctype, up.body
		up.header = r.Header.Clone()
		up.mu.Unlock()
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	srv.Listener = &wireTap{Listener: srv.Listener, up: up}
	srv.Start()
	t.Cleanup(srv.Close)
	up.url = srv.URL + "/mcp"
	return up
}

func (up *fakeUpstream) answer(status int, ctype, body string) {
	up.mu.Lock()
	defer up.mu.Unlock()
	up.status, up.ctype, up.body = status, ctype, body
	up.wire.Reset()
}

func (up *fakeUpstream) sent() (string, http.Header) {
	up.mu.Lock()
	defer up.mu.Unlock()
	return up.wire.String(), up.header
}

// wireTap records the bytes the upstream reads.
type wireTap struct {
	net.Listener
	up *fakeUpstream
}

func (l *wireTap) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tappedConn{Conn: c, up: l.up}, nil
}

type tappedConn struct {
	net.Conn
	up *fakeUpstream
}

func (c *tappedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.up.mu.Lock()
	c.up.wire.Write(b[:n])
	c.up.mu.Unlock()
	return n, err
}

// credSend sends one tools/call to up with the credential value stored as
// value, injected as header X-Upstream-Key. It returns what the caller
// gets: the result and error members of the response, or the error's
// text.
func credSend(t *testing.T, up *fakeUpstream, value string) (string, *jsonrpc.Response, error) {
	t.Helper()
	c := &Client{HTTP: &http.Client{}, Timeout: 5 * time.Second, Creds: staticCreds(value)}
	srv := &registry.Server{Tenant: "t", Name: "s", URL: up.url, Credential: &registry.Credential{Header: "X-Upstream-Key", Ref: "env:KEY"}}
	resp, _, err := c.Send(context.Background(), &Exchange{Server: srv, ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(`{"name":"x"}`)})
	if err != nil {
		return err.Error(), nil, err
	}
	return string(resp.Result) + string(resp.Error), resp, nil
}

// TestCredentialRemovedFromAnswers: each variant's forms, sent back by the
// upstream in a result, in a JSON-RPC error, in a 200 answer that is not
// JSON-RPC (-32000 detail) and in a non-2xx body (HTTPError, logged), do
// not reach the caller.
func TestCredentialRemovedFromAnswers(t *testing.T) {
	up := newFakeUpstream(t)
	channels := []struct {
		name   string
		status int
		ctype  string
		body   func(content, plain string) string
		isJSON bool
	}{
		{"result", 200, "application/json", func(c, _ string) string {
			return `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"echo ` + c + `"}]}}`
		}, true},
		{"JSON-RPC error", 200, "application/json", func(c, _ string) string {
			return `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"bad key ` + c + `","data":{"key":"` + c + `"}}}`
		}, true},
		{"not JSON-RPC", 200, "text/plain", func(_, p string) string { return "denied: " + p + " (check the key)" }, false},
		{"HTTP 401", 401, "text/html", func(_, p string) string { return "<p>invalid key " + p + "</p>" }, false},
	}
	for _, v := range scrubVariants() {
		protect := v.protect
		if protect == nil {
			protect = []string{strings.TrimSpace(v.value)}
		}
		for _, ch := range channels {
			t.Run(v.name+"/"+ch.name, func(t *testing.T) {
				for _, f := range v.forms {
					content := f
					if !v.jsonText {
						content = goJSON(f)
					}
					up.answer(ch.status, ch.ctype, ch.body(content, f))
					got, resp, err := credSend(t, up, v.value)
					switch {
					case ch.isJSON && err != nil:
						t.Fatalf("form %q: %v", f, err)
					case !ch.isJSON && err == nil:
						t.Fatalf("form %q: no error for %s", f, ch.name)
					case ch.isJSON && (resp.Result != nil && !json.Valid(resp.Result) || resp.Error != nil && !json.Valid(resp.Error)):
						t.Errorf("form %q: scrubbed answer is not valid JSON: %s", f, got)
					}
					if l := leak(got, protect...); l != "" {
						t.Errorf("form %q: caller got %s", f, l)
					}
					if !strings.Contains(got, Redacted) {
						t.Errorf("form %q: nothing redacted: %s", f, got)
					}
				}
			})
		}
	}
}

// TestCredentialCutSweep: a credential at every offset around the cuts of
// a -32000 detail (120 bytes of a 200 answer that is not JSON-RPC) and of
// an HTTPError body (512 bytes): the error text never holds 8 bytes of it
// in a row, in any form.
func TestCredentialCutSweep(t *testing.T) {
	const tok = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	up := newFakeUpstream(t)
	forms := []string{
		tok,
		"Bearer " + tok,
		goJSON(`{"auth":"Bearer ` + tok + `"}`),
		url.QueryEscape("Bearer " + tok),
		base64.StdEncoding.EncodeToString([]byte("user:" + tok)),
	}
	for _, status := range []int{200, 500} {
		for _, f := range forms {
			for pad := 0; pad <= 600; pad++ {
				up.answer(status, "text/plain", strings.Repeat("x", pad)+f+" and more text after it")
				got, _, err := credSend(t, up, "Bearer "+tok)
				if err == nil {
					t.Fatalf("status %d: no error", status)
				}
				if l := leak(got, tok); l != "" {
					t.Fatalf("status %d, form %q at %d: error text %q holds %s", status, f, pad, got, l)
				}
			}
		}
	}
}

// TestCredentialSentTrimmed: a stored value with whitespace around it (a
// secret file's final newline) is sent trimmed (net/http would refuse the
// newline), and an echo of the trimmed value is removed.
func TestCredentialSentTrimmed(t *testing.T) {
	const tok = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	up := newFakeUpstream(t)
	for _, stored := range []string{" \t" + tok + " \r\n", tok + "\n", "  Bearer " + tok + "  "} {
		want := strings.TrimSpace(stored)
		up.answer(200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{"echo":"`+tok+`"}}`)
		got, _, err := credSend(t, up, stored)
		if err != nil {
			t.Fatalf("stored %q: %v", stored, err)
		}
		wire, hdr := up.sent()
		if !strings.Contains(wire, "\r\nX-Upstream-Key: "+want+"\r\n") {
			t.Errorf("stored %q: request on the wire:\n%s", stored, wire)
		}
		if hdr.Get("X-Upstream-Key") != want {
			t.Errorf("stored %q: upstream got %q", stored, hdr.Get("X-Upstream-Key"))
		}
		if got != `{"echo":"`+Redacted+`"}` {
			t.Errorf("stored %q: result %s", stored, got)
		}
	}
}

// TestCredentialErrorStaysErrorObject: the JSON-RPC error the caller gets
// is an object with an integer code, also when scrubbing fails closed and
// when the credential was found in the code itself.
func TestCredentialErrorStaysErrorObject(t *testing.T) {
	up := newFakeUpstream(t)
	tests := []struct{ name, value, error, want string }{
		{"work budget spent", strings.Repeat(`\`, 60),
			`{"code":-32001,"message":"` + strings.Repeat(`\\`, 64<<10) + `","data":{"k":1}}`,
			`{"code":-32001,"message":"[REDACTED]"}`},
		{"work budget spent, a code that is not an integer", strings.Repeat(`\`, 60),
			`{"code":"E1","message":"` + strings.Repeat(`\\`, 64<<10) + `"}`,
			`{"code":-32000,"message":"[REDACTED]"}`},
		{"work budget spent, the code holds the credential", "Basic " + base64.StdEncoding.EncodeToString([]byte(strings.Repeat(`\`, 40)+":12345678")),
			`{"code":-12345678,"message":"` + strings.Repeat(`\\`, 200) + `:12345678"}`,
			`{"code":-32000,"message":"[REDACTED]"}`},
		{"the credential in the code", "12345678",
			`{"code":-12345678,"message":"bad key 12345678","data":{"key":"12345678"}}`,
			`{"code":-32000,"message":"bad key [REDACTED]","data":{"key":"[REDACTED]"}}`},
		{"the credential in the data", "12345678",
			`{"code":-32602,"message":"bad","data":{"n":12345678}}`,
			`{"code":-32602,"message":"bad","data":{"n":"[REDACTED]"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up.answer(200, "application/json", `{"jsonrpc":"2.0","id":1,"error":`+tc.error+`}`)
			_, resp, err := credSend(t, up, tc.value)
			if err != nil {
				t.Fatal(err)
			}
			var e struct {
				Code    *int    `json:"code"`
				Message *string `json:"message"`
			}
			if err := json.Unmarshal(resp.Error, &e); err != nil || e.Code == nil || e.Message == nil {
				t.Errorf("error is not a JSON-RPC error object (%v): %.200s", err, resp.Error)
			}
			if string(resp.Error) != tc.want {
				t.Errorf("error = %.200s; want %s", resp.Error, tc.want)
			}
		})
	}
}
