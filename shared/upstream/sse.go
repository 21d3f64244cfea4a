package upstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
)

// readSSE reads a text/event-stream body until the event that carries the
// JSON-RPC response for id, and returns that event's data. Other events
// with data (progress and logging notifications, server-to-client
// requests) are given to on, in order, each a copy; nil drops them.
func readSSE(r io.Reader, id json.RawMessage, on func([]byte)) ([]byte, error) {
	bp := scanBufs.Get().(*[]byte)
	defer scanBufs.Put(bp)
	sc := bufio.NewScanner(r)
	sc.Buffer((*bp)[:0], MaxResponseBytes)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 { // end of event
			if len(data) > 0 {
				if resp, ok := jsonrpc.DecodeResponse(data); ok && sameID(resp.ID, id) {
					return data, nil
				}
				if on != nil && json.Valid(data) {
					on(bytes.Clone(data))
				}
			}
			data = data[:0]
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			v = bytes.TrimPrefix(v, []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
	}
	if len(data) > 0 { // a last event without its blank line
		if resp, ok := jsonrpc.DecodeResponse(data); ok && sameID(resp.ID, id) {
			return data, nil
		}
	}
	if sc.Err() != nil {
		return nil, &ProtocolError{Detail: "event stream broke before the response"}
	}
	return nil, &ProtocolError{Detail: "event stream ended without a response"}
}

// scanBufs recycles the scanner's line buffers: one per SSE answer would
// otherwise be a large allocation on every call. (A line longer than the
// pooled buffer makes the scanner allocate its own; the pooled one is kept.)
var scanBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// sameID compares ids as JSON values' bytes after trimming; upstreams echo
// the id they were sent, so exact bytes match.
func sameID(a, b json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b))
}

// readEvents reads a text/event-stream body to its end, giving on the
// data of every event, in order, each a copy.
func readEvents(r io.Reader, on func([]byte)) error {
	bp := scanBufs.Get().(*[]byte)
	defer scanBufs.Put(bp)
	sc := bufio.NewScanner(r)
	sc.Buffer((*bp)[:0], MaxResponseBytes)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if len(data) > 0 && json.Valid(data) {
				on(bytes.Clone(data))
			}
			data = data[:0]
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			v = bytes.TrimPrefix(v, []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
	}
	return sc.Err()
}
