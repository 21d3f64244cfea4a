package telemetry

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/correlation"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		out = append(out, m)
	}
	return out
}

func TestAccessLogLine(t *testing.T) {
	secret := "aegis_k3v9q2x7m1p4d8s6_ThisIsTheSecretPartOfTheKey"
	var buf syncBuf
	out := NewLines(&buf, slog.LevelInfo)
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(1500 * time.Microsecond); return clock }
	h := AccessLog(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(correlation.Header, "corr-1")
		b, _ := io.ReadAll(r.Body)
		n := NoteOf(r.Context())
		n.Tenant("acme")
		n.Method("tools/call")
		switch r.URL.Path {
		case "/v1/invoke": // a decided call: the audit record's fields win
			n.Call(audit.Record{Tenant: "acme", Method: "tools/call", Server: "billing", Tool: "refund", Code: -32062, Word: "TOOL_STOPPED"})
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"isError":true}}`))
		case "/mcp": // not audited: the frame's code and word
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":{"aegis":{"layer":"gateway","code":"PARSE_ERROR"}}}}`))
		default:
			_, _ = w.Write(b) // echoes the body: still never logged
		}
	}), out, now)
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, p := range []string{"/v1/invoke", "/mcp", "/other"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+p+"?api_key="+secret, strings.NewReader(`{"token":"`+secret+`"}`))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Cookie", "session="+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	srv.Close() // waits for the handlers, so every line is written
	out.Flush()
	if strings.Contains(buf.b.String(), "ThisIsTheSecret") || strings.Contains(buf.b.String(), "k3v9q2x7m1p4d8s6") {
		t.Fatalf("a key reached the access log:\n%s", buf.b.String())
	}
	ls := buf.lines(t)
	if len(ls) != 3 {
		t.Fatalf("%d lines, want one per request:\n%s", len(ls), buf.b.String())
	}
	want := []map[string]any{
		{"msg": "request", "method": "POST", "path": "/v1/invoke", "status": 200.0, "tenant": "acme", "rpc_method": "tools/call",
			"server": "billing", "tool": "refund", "code": -32062.0, "word": "TOOL_STOPPED", "correlation_id": "corr-1", "latency_ms": 1.5, "remote": "127.0.0.1"},
		{"path": "/mcp", "status": 400.0, "code": -32700.0, "word": "PARSE_ERROR", "tenant": "acme"},
		{"path": "/other", "status": 200.0},
	}
	for i, w := range want {
		for k, v := range w {
			if ls[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v\n%v", i, k, ls[i][k], v, ls[i])
			}
		}
	}
	if _, ok := ls[2]["code"]; ok {
		t.Errorf("a non-JSON answer has no code: %v", ls[2])
	}
}

// A long answer is not kept whole to find a code in: only its first
// maxSniff bytes are looked at, and past that none.
func TestAccessLogBoundedSniff(t *testing.T) {
	var buf syncBuf
	out := NewLines(&buf, slog.LevelInfo)
	h := AccessLog(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"` + strings.Repeat("x", maxSniff) + `"}}`))
		if rec := w.(*recorder); rec.head != nil || !rec.over {
			t.Errorf("kept %d bytes of a long answer", len(rec.head))
		}
	}), out, nil)
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest(http.MethodPost, "/v1/invoke", nil))
	out.Flush()
	if l := buf.lines(t)[0]; l["code"] != nil || l["bytes"].(float64) < maxSniff {
		t.Fatalf("%v", l)
	}
}

// The recorder passes flushes and deadlines through (an /mcp event stream
// needs both).
func TestAccessLogStreams(t *testing.T) {
	var buf syncBuf
	out := NewLines(&buf, slog.LevelInfo)
	h := AccessLog(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("deadline: %v", err)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: 1\n\n"))
		if err := rc.Flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
	}), out, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "data: 1\n\n" {
		t.Fatalf("%q", b)
	}
}

// The nil Note (no access log) takes every note without effect.
func TestNilNote(t *testing.T) {
	var n *Note
	n.Tenant("a")
	n.Method("m")
	n.Call(audit.Record{})
}

// The access log's hand-built strings are the strings slog's JSON handler
// writes, byte for byte, for text an agent may send (controls, quotes,
// invalid UTF-8, line and paragraph separators, bidi controls).
func FuzzAccessLogString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\x00\x01\x1f\x7f", "\n\r\t", "\xff\xfe", "caf\xc3", "\u2028\u2029", "\u202eevil", "é漢字🙂", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		drop := func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey {
				return slog.Attr{}
			}
			return a
		}
		slog.New(slog.NewJSONHandler(&want, &slog.HandlerOptions{ReplaceAttr: drop})).Info("", "v", s)
		got := append(appendField([]byte("{"), "v", s), "}\n"...)
		got = append(got[:1], got[2:]...) // appendField's leading comma
		if string(got) != want.String() {
			t.Fatalf("%q:\n got  %s\n want %s", s, got, want.Bytes())
		}
	})
}

// A request line is one JSON object whose fields decode to what the
// request and the note held, escaped for the terminal where needed.
func TestAccessLogEscapes(t *testing.T) {
	var buf syncBuf
	out := NewLines(&buf, slog.LevelInfo)
	h := AccessLog(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := NoteOf(r.Context())
		n.Tenant("acme")
		n.Method("tools/call\u202e\x1b[31m")
	}), out, nil)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp/a%22b%5Cc%E2%80%AE", nil))
	out.Flush()
	raw := buf.b.String()
	if strings.ContainsAny(raw, "\u202e\x1b") {
		t.Fatalf("a terminal control reached the line: %q", raw)
	}
	l := buf.lines(t)[0]
	if l["rpc_method"] != "tools/call\u202e\x1b[31m" || l["path"] != "/mcp/a\"b\\c\u202e" || l["tenant"] != "acme" || l["msg"] != "request" || l["level"] != "INFO" {
		t.Fatalf("%v", l)
	}
}

// Below INFO's level nothing is written.
func TestAccessLogLevel(t *testing.T) {
	var buf syncBuf
	out := NewLines(&buf, slog.LevelWarn)
	h := AccessLog(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), out, nil)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil))
	out.Flush()
	if buf.b.Len() != 0 {
		t.Fatalf("wrote %q at level warn", buf.b.String())
	}
}

// Buffered lines keep their order with the logger's (a logger line writes
// those waiting first), are written by the timed flush without a Flush,
// and never wait beyond LinesBuffer bytes.
func TestLinesBuffer(t *testing.T) {
	var buf syncBuf
	out := NewLines(&buf, slog.LevelInfo)
	out.Buffer([]byte(`{"n":1}` + "\n"))
	out.Logger().Warn("two")
	out.Buffer([]byte(`{"n":3}` + "\n"))
	if ls := buf.lines(t); len(ls) != 2 || ls[0]["n"] != 1.0 || ls[1]["msg"] != "two" {
		t.Fatalf("before the flush: %v", ls)
	}
	// The timed flush: poll, never assert a duration.
	for len(buf.lines(t)) < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	if ls := buf.lines(t); ls[2]["n"] != 3.0 {
		t.Fatalf("after the flush: %v", ls)
	}
	line := []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}` + "\n")
	for range 2 * LinesBuffer / len(line) {
		out.Buffer(line)
	}
	buf.mu.Lock()
	written := buf.b.Len()
	buf.mu.Unlock()
	out.mu.Lock()
	waiting := len(out.buf)
	out.mu.Unlock()
	if waiting > LinesBuffer || written < LinesBuffer {
		t.Fatalf("%d bytes waiting, %d written", waiting, written)
	}
}
