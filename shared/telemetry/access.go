package telemetry

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/correlation"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/scan"
	"github.com/aegis-gw/aegis/shared/timefmt"
)

// The access log: one JSON line per HTTP request (AccessLog), written
// after the answer, with what the HTTP layer knows (method, path, status,
// bytes, latency, the correlation id the answer carries) and what the
// gateway noted on the request's Note (tenant, JSON-RPC method, server,
// tool, code and word). Nothing the client sent besides the method and the
// path is logged: no header (so no key and no credential), no query, no
// body.

// Note is what the gateway tells the access log about one request. Its
// methods are safe on a nil *Note (no access log: nothing is noted) and
// for concurrent use.
type Note struct {
	mu                           sync.Mutex
	tenant, method, server, tool string
	word                         string
	code                         int
	called                       bool // Call was noted: code and word are the decision's
}

type noteKey struct{}

// WithNote returns ctx carrying a new Note, and the Note.
func WithNote(ctx context.Context) (context.Context, *Note) {
	n := &Note{}
	return context.WithValue(ctx, noteKey{}, n), n
}

// NoteOf is the Note ctx carries, or nil.
func NoteOf(ctx context.Context) *Note {
	n, _ := ctx.Value(noteKey{}).(*Note)
	return n
}

// Tenant notes the authenticated tenant.
func (n *Note) Tenant(id string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.tenant = id
	n.mu.Unlock()
}

// Method notes the JSON-RPC method of the request.
func (n *Note) Method(m string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.method = m
	n.mu.Unlock()
}

// Call notes a decided call from its audit record: tenant, method, server,
// tool, and the code and word it was answered with (0 and "" when it was
// allowed). They win over what the answer's frame shows, which for a
// tenant that takes refusals as results (refusal_shape: result) is not an
// error.
func (n *Note) Call(rec audit.Record) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.tenant, n.method, n.server, n.tool = rec.Tenant, rec.Method, rec.Server, rec.Tool
	n.code, n.word, n.called = rec.Code, rec.Word, true
	n.mu.Unlock()
}

func (n *Note) read() (tenant, method, server, tool, word string, code int, called bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.tenant, n.method, n.server, n.tool, n.word, n.code, n.called
}

// Access-log bounds: the longest path logged (longer ones are cut, the
// line says so) and how much of a JSON answer is kept to read a JSON-RPC
// error's code and word from (an aegis refusal frame is far smaller; an
// answer longer than this is not an aegis refusal).
const (
	maxLoggedPath = 512
	maxSniff      = 4096
)

// AccessLog wraps next: after each request, one line "request" at INFO on
// lines (the logger's destination, so the two never interleave; buffered,
// see Lines.Buffer: call lines.Flush before the process exits), in the
// logger's format: the JSON slog writes, with its time, level and msg
// first. The line is built by hand rather than by slog, which cost a
// tenth of the gateway's CPU per call (docs/performance.md). now is the
// clock (nil: time.Now).
func AccessLog(next http.Handler, lines *Lines, now func() time.Time) http.Handler {
	if now == nil {
		now = time.Now
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := now()
		ctx, note := WithNote(r.Context())
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(ctx))
		if !lines.Enabled(slog.LevelInfo) {
			return
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		tenant, method, server, tool, word, code, called := note.read()
		if !called {
			code, word = frameCode(rec.head)
		}
		path := r.URL.Path
		if len(path) > maxLoggedPath {
			path = path[:maxLoggedPath] + "...(cut)"
		}
		end := now()
		bp := linePool.Get().(*[]byte)
		b := append((*bp)[:0], `{"time":"`...)
		b = timefmt.AppendRFC3339Nano(b, end)
		b = append(b, `","level":"INFO","msg":"request"`...)
		b = appendField(b, "method", r.Method)
		b = appendField(b, "path", path)
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(status), 10)
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, rec.bytes, 10)
		b = append(b, `,"latency_ms":`...)
		b = strconv.AppendFloat(b, float64(end.Sub(start).Microseconds())/1000, 'f', -1, 64)
		if corr := w.Header().Get(correlation.Header); corr != "" {
			b = appendField(b, LogKeyCorrelationID, corr)
		}
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			b = appendField(b, "remote", host)
		}
		for _, kv := range [...][2]string{{"tenant", tenant}, {"rpc_method", method}, {"server", server}, {"tool", tool}} {
			if kv[1] != "" {
				b = appendField(b, kv[0], kv[1])
			}
		}
		if code != 0 {
			b = append(b, `,"code":`...)
			b = strconv.AppendInt(b, int64(code), 10)
		}
		if word != "" {
			b = appendField(b, "word", word)
		}
		b = append(b, "}\n"...)
		lines.Buffer(b)
		if cap(b) <= maxPooledLine {
			*bp = b
			linePool.Put(bp)
		}
	})
}

// linePool holds the access log's line buffers; one longer than
// maxPooledLine (a long path, say) is not kept.
var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

const maxPooledLine = 4 << 10

// appendField appends ,"key":"val" with val escaped as slog's JSON handler
// escapes a string (scan.AppendEscaped). key is one of ours, plain ASCII.
// What else a terminal could act on is escaped by Lines.Write.
func appendField(b []byte, key, val string) []byte {
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":"`...)
	b = scan.AppendEscapedString(b, val)
	return append(b, '"')
}

// frameCode reads a JSON-RPC error's code and aegis word from the start of
// a JSON answer; 0 and "" when it is not one (or was too long to keep).
func frameCode(head []byte) (int, string) {
	e := jsonrpc.Member(head, "error")
	if len(e) == 0 {
		return 0, ""
	}
	code, err := strconv.Atoi(string(jsonrpc.Member(e, "code")))
	if err != nil {
		return 0, ""
	}
	word := ""
	if w := jsonrpc.Member(jsonrpc.Member(jsonrpc.Member(e, "data"), "aegis"), "code"); len(w) > 2 && w[0] == '"' {
		word, _ = strconv.Unquote(string(w))
	}
	return code, word
}

// recorder is the ResponseWriter AccessLog hands on: it keeps the status,
// counts the bytes and keeps the start of a JSON answer. Unwrap lets
// http.ResponseController reach the connection (flushes, deadlines).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	head   []byte
	json   bool
	over   bool // the answer outgrew maxSniff: head is dropped
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
		ct := r.Header().Get("Content-Type")
		r.json = len(ct) >= 16 && ct[:16] == "application/json"
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.json && !r.over {
		if len(r.head)+len(b) > maxSniff {
			r.head, r.over = nil, true
		} else {
			r.head = append(r.head, b...)
		}
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush implements http.Flusher for handlers that ask for it directly.
func (r *recorder) Flush() {
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// Unwrap is for http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
