package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
)

// stream is the answer to one request on /mcp. It is a plain JSON answer
// until the upstream sends a message before its response (a progress or
// log notification, a request to the client); the answer then becomes a
// text/event-stream: that message and every later one are SSE events,
// flushed as they come, and so is the final response (or refusal), which
// ends the stream. Under API Gateway, which buffers a Lambda's answer,
// the client gets the same events in one body at the end
// (docs/design/protocol.md).
//
// stream is an http.ResponseWriter so that every answer path (writeFrame,
// writeRefusal) works unchanged: once the stream has begun, WriteHeader is
// ignored (the status is 200, sent with the first event) and each Write
// is one event. It is safe for concurrent use.
type stream struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	mu   sync.Mutex
	sse  bool // the event stream has begun
	json bool // a JSON answer was begun instead
	n    int  // events written
}

func newStream(w http.ResponseWriter) *stream {
	return &stream{w: w, rc: http.NewResponseController(w)}
}

// Header implements http.ResponseWriter. Once the event stream has begun
// its headers are sent; what is set after goes nowhere.
func (s *stream) Header() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sse {
		return http.Header{}
	}
	return s.w.Header()
}

// WriteHeader implements http.ResponseWriter: the status of a JSON answer;
// ignored once the event stream has begun.
func (s *stream) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.sse {
		s.json = true
		s.w.WriteHeader(code)
	}
}

// Write implements http.ResponseWriter: the JSON answer's body, or, once
// the event stream has begun, one event carrying b.
func (s *stream) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.sse {
		s.json = true
		return s.w.Write(b)
	}
	return len(b), s.writeEvent(b)
}

// Event sends msg, one JSON-RPC message from the upstream, to the client
// as an SSE event, beginning the event stream if it has not begun. It is
// dropped (false) when the JSON answer was already sent.
func (s *stream) Event(msg []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.sse {
		if s.json {
			return false
		}
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Del("Content-Length")
		s.w.WriteHeader(http.StatusOK)
		s.sse = true
	}
	return s.writeEvent(msg) == nil
}

func (s *stream) writeEvent(msg []byte) error {
	var b bytes.Buffer
	b.Grow(len(msg) + 24)
	b.WriteString("event: message\ndata: ")
	// A JSON message holds no raw newline, but one that was pretty-printed
	// upstream would: each line is its own data line.
	b.WriteString(strings.ReplaceAll(string(bytes.TrimSpace(msg)), "\n", "\ndata: "))
	b.WriteString("\n\n")
	if _, err := s.w.Write(b.Bytes()); err != nil {
		return err
	}
	s.n++
	if err := s.rc.Flush(); err != nil && err != http.ErrNotSupported {
		return err
	}
	return nil
}

// Begin begins the event stream at once (a GET stream: the client learns
// it is open before any event), unless a JSON answer was begun.
func (s *stream) Begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sse || s.json {
		return
	}
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	s.sse = true
	_ = s.rc.Flush()
}

// KeepAlive writes an SSE comment (a line ":"; clients ignore it) on an
// event stream that has begun, so that an idle proxy or client does not
// take a quiet stream for a dead one.
func (s *stream) KeepAlive() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.sse {
		return
	}
	if _, err := io.WriteString(s.w, ":\n\n"); err == nil {
		_ = s.rc.Flush()
	}
}

// Streaming reports whether the event stream has begun.
func (s *stream) Streaming() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sse
}

// Server-to-client requests relayed to the client carry an id that names
// the server they came from, so that the client's answer, a POST to any
// instance of the gateway, finds its way back without shared state: the
// id is the JSON string SERVER + ":" + the upstream's id as JSON (server
// names hold no ':'). The answer is only ever sent to that server of the
// client's own tenant, on the client's own gateway session.
const relaySep = ":"

// relayID is the id the client sees for the request id of server srv.
func relayID(srv string, id json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(srv + relaySep + string(bytes.TrimSpace(id)))
	return b
}

// unrelayID splits an id made by relayID; ok is false for any other id.
func unrelayID(id json.RawMessage) (srv string, upstreamID json.RawMessage, ok bool) {
	var s string
	if len(id) == 0 || id[0] != '"' || json.Unmarshal(id, &s) != nil {
		return "", nil, false
	}
	srv, rest, ok := strings.Cut(s, relaySep)
	if !ok || srv == "" || !json.Valid([]byte(rest)) {
		return "", nil, false
	}
	return srv, json.RawMessage(rest), true
}

// relayMessage is the upstream message msg of server srv as the client is
// to get it: a request (it has a method and an id) gets its relayed id;
// a notification is unchanged.
func relayMessage(srv string, msg []byte) []byte {
	var probe struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &probe) != nil || probe.Method == "" || len(probe.ID) == 0 || string(probe.ID) == "null" {
		return msg
	}
	return jsonrpc.Edit(msg, "id", relayID(srv, probe.ID))
}
