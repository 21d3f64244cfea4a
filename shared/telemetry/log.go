package telemetry

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/display"
)

type corrKey struct{}

// WithCorrelationID returns ctx carrying the request's correlation id, for
// LogHandler to add to every line logged with that context.
func WithCorrelationID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, corrKey{}, id)
}

// CorrelationID is the correlation id ctx carries, or "".
func CorrelationID(ctx context.Context) string {
	id, _ := ctx.Value(corrKey{}).(string)
	return id
}

// LogKeyCorrelationID is the attribute every request log line carries.
const LogKeyCorrelationID = "correlation_id"

// LogHandler wraps a slog.Handler and adds "correlation_id" from the
// context (WithCorrelationID) to every record that does not carry one
// already. Lines logged without a context (slog's Info, not InfoContext)
// are left as they are.
type LogHandler struct {
	inner slog.Handler
	has   bool // a correlation_id was added with WithAttrs
}

// NewLogHandler wraps inner.
func NewLogHandler(inner slog.Handler) *LogHandler { return &LogHandler{inner: inner} }

var _ slog.Handler = (*LogHandler)(nil)

// Enabled implements slog.Handler.
func (h *LogHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if !h.has {
		if id := CorrelationID(ctx); id != "" {
			found := false
			r.Attrs(func(a slog.Attr) bool {
				found = a.Key == LogKeyCorrelationID
				return !found
			})
			if !found {
				r.AddAttrs(slog.String(LogKeyCorrelationID, id))
			}
		}
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *LogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	has := h.has
	for _, a := range as {
		has = has || a.Key == LogKeyCorrelationID
	}
	return &LogHandler{inner: h.inner.WithAttrs(as), has: has}
}

// WithGroup implements slog.Handler.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{inner: h.inner.WithGroup(name), has: h.has}
}

// NewLogger is aegis's structured logger: JSON lines to w, correlation id
// from the context, and a last line of defence against secrets: the value
// of any attribute whose key names a credential (authorization, api_key,
// token, secret, password, credential, cookie) is replaced by "[redacted]".
// Lines hold only printable text: slog escapes the C0 controls, and
// display.JSON the rest of what an agent could use to drive the terminal
// an operator reads the log in (DEL, C1 controls, bidi and zero-width
// characters); the lines decode to the same values.
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return NewLines(w, level).Logger()
}

// Lines is one log destination: whole JSON lines, each passed through
// display.JSON. The logger's lines (Write) are written at once, each with
// one Write; the access log's (Buffer) are gathered and written together,
// at most LinesFlushEvery after the first of them, when LinesBuffer bytes
// are waiting, before any logger line (so the order of lines holds), and
// on Flush. Level is the lowest level written.
type Lines struct {
	mu    sync.Mutex
	w     io.Writer
	level slog.Leveler
	buf   []byte // lines waiting (Buffer), at most LinesBuffer bytes
	armed bool   // a flush of buf is scheduled
}

// Bounds of the lines Buffer gathers: at most LinesBuffer bytes wait, for
// at most LinesFlushEvery. One write per request cost the gateway about
// 3% of its CPU per call (docs/performance.md).
const (
	LinesBuffer     = 64 << 10
	LinesFlushEvery = 100 * time.Millisecond
)

// NewLines writes lines at level and above to w.
func NewLines(w io.Writer, level slog.Leveler) *Lines { return &Lines{w: w, level: level} }

// Logger is the structured logger writing to l (see NewLogger).
func (l *Lines) Logger() *slog.Logger {
	return slog.New(NewLogHandler(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: l.level, ReplaceAttr: redact})))
}

// Enabled reports whether a line at level is written: never on a nil
// *Lines (no log).
func (l *Lines) Enabled(level slog.Level) bool { return l != nil && level >= l.level.Level() }

// Write writes b, one JSON line, made printable by display.JSON, after
// the lines waiting.
func (l *Lines) Write(b []byte) (int, error) {
	out := display.JSON(b)
	l.mu.Lock()
	l.flushLocked()
	_, err := l.w.Write(out)
	l.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return len(b), nil
}

// Buffer queues b, one JSON line, made printable by display.JSON, to be
// written with the others waiting. A write error is not reported: the
// access log's lines are best effort.
func (l *Lines) Buffer(b []byte) {
	out := display.JSON(b)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf)+len(out) > LinesBuffer {
		l.flushLocked()
	}
	if len(out) > LinesBuffer {
		_, _ = l.w.Write(out)
		return
	}
	if l.buf == nil {
		l.buf = make([]byte, 0, LinesBuffer)
	}
	l.buf = append(l.buf, out...)
	if !l.armed {
		l.armed = true
		time.AfterFunc(LinesFlushEvery, l.Flush)
	}
}

// Flush writes the lines waiting. Call it before the process exits; it
// does nothing on a nil *Lines.
func (l *Lines) Flush() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.flushLocked()
	l.armed = false
	l.mu.Unlock()
}

func (l *Lines) flushLocked() {
	if len(l.buf) > 0 {
		_, _ = l.w.Write(l.buf)
		l.buf = l.buf[:0]
	}
}

func redact(_ []string, a slog.Attr) slog.Attr {
	if secretKey(a.Key) {
		return slog.String(a.Key, "[redacted]")
	}
	return a
}

func secretKey(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; 'A' <= c && c <= 'Z' {
			k = strings.ToLower(k)
			break
		}
	}
	for _, s := range secretWords {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

var secretWords = [...]string{"authorization", "api_key", "apikey", "token", "secret", "password", "credential", "cookie"}
