// Package jsonrpc is aegis's thin JSON-RPC 2.0 layer. It never decodes a
// message into structs and re-encodes it: ids, params, unknown members and
// _meta stay as the exact bytes the client sent (json.RawMessage), so a large
// integer id stays exact and a string id stays a string. It depends on
// nothing else of aegis: its errors are wire errors (WireError) with the
// standard codes; shared/refusal gives them their aegis words.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects a request may have.
const MaxDepth = 128

// Null is the JSON null id used when a request has no usable id.
var Null = json.RawMessage("null")

// Request is one decoded JSON-RPC request or notification.
type Request struct {
	ID     json.RawMessage // exact bytes; nil when the member is absent
	Method string
	Params json.RawMessage // exact bytes; nil when absent
}

// IsNotification reports whether r expects no answer: no id, or a null id
// (seed 004: both get HTTP 202 with an empty body).
func (r *Request) IsNotification() bool {
	return r.ID == nil || bytes.Equal(r.ID, Null)
}

// ReplyID is the id to echo: the request's, or null.
func (r *Request) ReplyID() json.RawMessage {
	if r == nil || r.ID == nil {
		return Null
	}
	return r.ID
}

// The standard JSON-RPC 2.0 error codes this layer produces or names.
const (
	CodeParseError     int64 = -32700 // not JSON
	CodeInvalidRequest int64 = -32600 // JSON, but not a request object
	CodeMethodNotFound int64 = -32601
	CodeInvalidParams  int64 = -32602
	CodeInternalError  int64 = -32603
)

// WireError is a JSON-RPC error object: code, message and data as they
// travel. Errors compare by code (errors.Is).
type WireError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *WireError) Error() string { return fmt.Sprintf("jsonrpc %d: %s", e.Code, e.Message) }

// Is reports whether target is a *WireError with the same code.
func (e *WireError) Is(target error) bool {
	t, ok := target.(*WireError)
	return ok && t.Code == e.Code
}

// DecodeError is a request that cannot be served. ID is what the answer
// echoes (null when no usable id was found); Err is CodeParseError or
// CodeInvalidRequest with a message for the client.
type DecodeError struct {
	ID  json.RawMessage
	Err *WireError
}

func (e *DecodeError) Error() string { return e.Err.Error() }

// Unwrap returns the wire error.
func (e *DecodeError) Unwrap() error { return e.Err }

func parseErr(detail string) *DecodeError {
	return &DecodeError{ID: Null, Err: &WireError{Code: CodeParseError, Message: "Parse error: " + detail}}
}

func invalid(id json.RawMessage, detail string) *DecodeError {
	if id == nil {
		id = Null
	}
	return &DecodeError{ID: id, Err: &WireError{Code: CodeInvalidRequest, Message: "Invalid request: " + detail}}
}

// Decode reads one JSON-RPC 2.0 request from body. A body that is not JSON,
// is empty, has trailing garbage or nests deeper than MaxDepth is a parse
// error (-32700, HTTP 400, id null). Valid JSON that is not a single request
// object (a batch array, a missing or wrong "jsonrpc", an id that is not a
// string, number or null, a missing method, a duplicated member, params that
// are neither object nor array, a response object) is -32600.
func Decode(body []byte) (*Request, *DecodeError) {
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		return nil, parseErr("empty body")
	}
	if !json.Valid(b) {
		return nil, parseErr("body is not valid JSON")
	}
	if depth(b) > MaxDepth {
		return nil, parseErr(fmt.Sprintf("nesting deeper than %d levels", MaxDepth))
	}
	switch b[0] {
	case '[':
		return nil, invalid(nil, "batch requests are not supported")
	case '{':
	default:
		return nil, invalid(nil, "a request must be a JSON object")
	}
	var (
		req               Request
		version, method   json.RawMessage
		sawResult, sawErr bool
		seen              uint8               // the members below, one bit each
		others            map[string]struct{} // any other member, once there is one
	)
	err := eachRawMember(b, func(raw []byte, val json.RawMessage) error {
		name := raw[1 : len(raw)-1]
		if bytes.IndexByte(raw, '\\') >= 0 {
			k, err := decodeKey(raw)
			if err != nil {
				return err
			}
			name = []byte(k)
		}
		var bit uint8
		switch string(name) { // no allocation: the compiler compares the bytes
		case "jsonrpc":
			bit, version = 1, val
		case "id":
			bit, req.ID = 2, val
		case "method":
			bit, method = 4, val
		case "params":
			bit, req.Params = 8, val
		case "result":
			bit, sawResult = 16, true
		case "error":
			bit, sawErr = 32, true
		default:
			if _, dup := others[string(name)]; dup {
				return fmt.Errorf("duplicate member %q", name)
			}
			if others == nil {
				others = map[string]struct{}{}
			}
			others[string(name)] = struct{}{}
			return nil
		}
		if seen&bit != 0 {
			return fmt.Errorf("duplicate member %q", name)
		}
		seen |= bit
		return nil
	})
	if err != nil {
		return nil, invalid(nil, err.Error())
	}
	if req.ID != nil {
		switch req.ID[0] {
		case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		default:
			req.ID = nil
			return nil, invalid(nil, "id must be a string, a number or null")
		}
	}
	if !bytes.Equal(version, []byte(`"2.0"`)) {
		return nil, invalid(req.ID, `"jsonrpc" must be "2.0"`)
	}
	if sawResult || sawErr {
		return nil, invalid(req.ID, "a response is not a request")
	}
	if method == nil || method[0] != '"' {
		return nil, invalid(req.ID, `"method" must be a string`)
	}
	if err := json.Unmarshal(method, &req.Method); err != nil || req.Method == "" {
		return nil, invalid(req.ID, `"method" must be a non-empty string`)
	}
	if req.Params != nil {
		if c := req.Params[0]; c != '{' && c != '[' {
			if bytes.Equal(req.Params, Null) {
				req.Params = nil
			} else {
				return nil, invalid(req.ID, `"params" must be an object or an array`)
			}
		}
	}
	return &req, nil
}

// depth returns the deepest nesting of b, which must be valid JSON.
func depth(b []byte) int {
	d, max, inStr := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			d++
			if d > max {
				max = d
			}
		case '}', ']':
			d--
		}
	}
	return max
}

// eachMember calls fn for each member of the JSON object obj (valid JSON),
// with the decoded key and the exact bytes of the value.
func eachMember(obj []byte, fn func(key string, val json.RawMessage) error) error {
	return eachRawMember(obj, func(raw []byte, val json.RawMessage) error {
		key, err := decodeKey(raw)
		if err != nil {
			return err
		}
		return fn(key, val)
	})
}

// eachRawMember is eachMember with each key as written (quotes and
// escapes included), for callers that only compare keys: keyIs costs no
// allocation where decoding would.
func eachRawMember(obj []byte, fn func(raw []byte, val json.RawMessage) error) error {
	i := skipSpace(obj, 1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for i < len(obj) {
		i = skipSpace(obj, i)
		kEnd := skipString(obj, i)
		raw := obj[i:kEnd]
		i = skipSpace(obj, kEnd)
		i = skipSpace(obj, i+1) // ':'
		vEnd := skipValue(obj, i)
		if err := fn(raw, obj[i:vEnd:vEnd]); err != nil {
			return err
		}
		i = skipSpace(obj, vEnd)
		if i >= len(obj) || obj[i] == '}' {
			return nil
		}
		i++ // ','
	}
	return nil
}

// keyIs reports whether the key raw (as written, quoted) decodes to key.
func keyIs(raw []byte, key string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return len(raw) >= 2 && string(raw[1:len(raw)-1]) == key
	}
	k, err := decodeKey(raw)
	return err == nil && k == key
}

func decodeKey(raw []byte) (string, error) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value starting at b[i] (valid JSON).
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		d := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				d++
			case '}', ']':
				d--
				if d == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	default:
		for ; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
		}
		return len(b)
	}
}

// Member returns the exact bytes of member key of the JSON object obj, or nil.
func Member(obj json.RawMessage, key string) json.RawMessage {
	if len(obj) == 0 || obj[0] != '{' {
		return nil
	}
	var out json.RawMessage
	_ = eachRawMember(obj, func(k []byte, v json.RawMessage) error {
		if out == nil && keyIs(k, key) {
			out = v
		}
		return nil
	})
	return out
}

// StringMember returns member key of obj as a string, and whether it was one.
func StringMember(obj json.RawMessage, key string) (string, bool) {
	v := Member(obj, key)
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return string(v[1 : len(v)-1]), true // no escape: the bytes are the string
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// Edit returns a copy of the JSON object obj with member key set to val
// (added at the end when absent), or removed when val is nil. Every other
// member keeps its exact bytes and order.
func Edit(obj json.RawMessage, key string, val json.RawMessage) json.RawMessage {
	out := make([]byte, 0, len(obj)+len(key)+len(val)+8)
	out = append(out, '{')
	first, done := true, false
	_ = eachMember(obj, func(k string, v json.RawMessage) error {
		if k == key {
			if val == nil || done {
				return nil
			}
			v, done = val, true
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = strconv.AppendQuote(out, k)
		out = append(out, ':')
		out = append(out, v...)
		return nil
	})
	if !done && val != nil {
		if !first {
			out = append(out, ',')
		}
		out = strconv.AppendQuote(out, key)
		out = append(out, ':')
		out = append(out, val...)
	}
	return append(out, '}')
}

// frame encodes {"jsonrpc":"2.0","id":ID,"<member>":PAYLOAD}.
func frame(id json.RawMessage, member string, payload []byte) []byte {
	if id == nil {
		id = Null
	}
	out := make([]byte, 0, len(id)+len(payload)+len(member)+32)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"`...)
	out = append(out, member...)
	out = append(out, `":`...)
	out = append(out, payload...)
	return append(out, '}')
}

// Result encodes a success response.
func Result(id, result json.RawMessage) []byte { return frame(id, "result", result) }

// RawError encodes an error response around an error object kept as the
// exact bytes an upstream sent.
func RawError(id, errObj json.RawMessage) []byte { return frame(id, "error", errObj) }

// Error encodes an error response.
func Error(id json.RawMessage, e *WireError) []byte {
	eb, err := json.Marshal(e)
	if err != nil {
		panic("jsonrpc: unencodable error object: " + err.Error())
	}
	return frame(id, "error", eb)
}

// Response is a decoded JSON-RPC response (from an upstream), members kept raw.
type Response struct {
	ID     json.RawMessage
	Result json.RawMessage
	Error  json.RawMessage
}

// DecodeResponse reads a response object; ok is false when b is not one.
func DecodeResponse(b []byte) (Response, bool) {
	var r Response
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return r, false
	}
	_ = eachRawMember(b, func(k []byte, v json.RawMessage) error {
		switch {
		case keyIs(k, "id"):
			r.ID = v
		case keyIs(k, "result"):
			r.Result = v
		case keyIs(k, "error"):
			r.Error = v
		}
		return nil
	})
	return r, r.Result != nil || r.Error != nil
}
