package wrap

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
)

// A call is one tools/call found on a client line.
type call struct {
	id     json.RawMessage // to echo: the request's string or number id, else null
	tool   string          // decoded params.name; "" when not determined
	params []byte          // the params member (nil when absent), or the whole line when whole
	whole  bool            // the line is the call as a whole: unparseable, or an array with a non-object element
	// why is "" when tool was read unambiguously, else ruleUnparseable or
	// ruleAmbiguous: such a call is refused under a policy (fail closed).
	why string
}

// paramsHash is the call's params_hash: k.Hash of the arguments member of
// params, the bytes the gateway hashes for the same tools/call, so that
// the records of one call at both boundaries join when both hold the same
// params key. A call wrap found only in the line as a whole has no
// arguments it could read: the whole line is hashed instead (canonically
// when it is JSON, byte for byte when not).
func (c call) paramsHash(k audit.ParamsKey) string {
	if c.whole {
		return k.Hash(c.params)
	}
	return k.Hash(jsonrpc.Member(c.params, "arguments"))
}

// framing classifies one client line (its '\n' included, if any) for a
// mode that decides: it returns the line's JSON text without the framing
// whitespace, and whether the line is blank or framed.
//
// A line is framed when, after trimming the final "\n", one final "\r"
// and spaces and tabs at both ends, it is exactly one complete JSON object
// or array, valid UTF-8, with no other raw "\r". Only a framed line can be
// decided: every child reads it as the same single value wrap read. Any
// other non-blank line might be a piece of a message that the child
// reassembles, or a message the child splits differently: a child reading
// like the MCP Python SDK (universal newlines) ends a line at a bare "\r",
// and the Go SDK's stdio transport reads with a streaming json.Decoder,
// which joins a value across newlines. So wrap cannot know what such a
// line means to the child and treats it as a possible tools/call.
//
// A blank line (nothing but spaces, tabs and a final "\r") holds no token
// for any reader and is forwarded.
func framing(line []byte) (body []byte, blank, framed bool) {
	b := line
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	b = bytes.Trim(b, " \t")
	if len(b) == 0 {
		return nil, true, false
	}
	if (b[0] != '{' && b[0] != '[') || bytes.IndexByte(b, '\r') >= 0 || !utf8.Valid(b) || !json.Valid(b) {
		return b, false, false
	}
	return b, false, true
}

// needsDecision is the fast check run on every client line: false means
// the line can be forwarded as it is, because it is blank or it is framed
// and mayBeCall proves it holds no tools/call.
func needsDecision(line []byte) bool {
	b, blank, framed := framing(line)
	return !blank && (!framed || mayBeCall(b))
}

// mayBeCall is the filter run on a framed line (see framing): false means no
// JSON parser, strict or lenient, can read a tools/call method from it.
// The child reads a framed line as the one complete value wrap read, and
// in that value a method that is or may be read as tools/call
// (methodIsCall) can only be spelled with the ASCII letters "tools/call"
// (in any case, spaces around them), with a backslash escape (any escape:
// "tools\/call", "\u0074ools/call", "tools/call\u0000"), or with a byte
// that is not printable ASCII (a raw DEL, or any non-ASCII character:
// fullwidth letters, "ſ", a raw zero-width or bidi character; also any
// method holding one, which is refused whatever it says). It is not
// sound on a line that is not framed: there, a call can be spread over
// several lines.
func mayBeCall(line []byte) bool { return mayBeMethod(line, "tools/call") }

// mayBeMethod is mayBeCall for any method m of the form "a/b" in lower-case
// ASCII ("tools/list" for the pins).
func mayBeMethod(line []byte, m string) bool {
	if bytes.IndexByte(line, '\\') >= 0 || notPrintableASCII(line) {
		return true
	}
	slash := strings.IndexByte(m, '/')
	for i := 0; i+len(m) <= len(line); i++ {
		j := bytes.IndexByte(line[i:], '/')
		if j < 0 {
			return false
		}
		i += j
		if i >= slash && i-slash+len(m) <= len(line) && asciiFold(line[i-slash:i-slash+len(m)], m) {
			return true
		}
	}
	return false
}

// notPrintableASCII reports whether b holds a byte of 0x7f (DEL) or
// above, eight bytes at a time: adding 1 to each byte sets its top bit
// exactly when it is 0x7f, and a carry out of a byte happens only from
// 0xff, which is found anyway.
func notPrintableASCII(b []byte) bool {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		if (w|(w+ones))&tops != 0 {
			return true
		}
		b = b[8:]
	}
	for _, c := range b {
		if c >= 0x7f {
			return true
		}
	}
	return false
}

func asciiFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// findCalls returns the tools/call requests on one client line (its line
// ending included). A line that is a JSON array (a JSON-RPC batch) can hold
// several; elems then has one entry per array element, with isCall[i]
// telling which ones are calls. For a single object elems is nil.
//
// Anything a lenient parser might read as a tools/call is reported as one:
// a method member whose key may be read as "method" (keyIs) and whose value
// may be read as "tools/call" or holds a hidden character (methodIsCall,
// names.go); a non-blank line that is not framed (see
// framing), which is reported with why ruleUnparseable, id null and the
// whole line as params; an array that may hold a call (mayBeCall) and has
// an element that is not an object (a nested array, a scalar), which is
// not a JSON-RPC batch but may be read as one by a child that skips to the
// first "{": it is reported as one call with why ruleAmbiguous, id null
// and the whole line as params. A call gets why set unless it is the one
// clean spelling: exactly one "method":"tools/call", one "params" object,
// one "name" string in it, and that name holds no hidden character
// (hiddenInName); such a call whose params fail jsonrpc.StrictCall (the
// gateway's reading: a duplicate key anywhere, keys that differ only in
// case, a misspelt member, a lone surrogate escape) gets why
// ruleUnreadable. So a call with why "" has one reading: its name, the
// arguments the decider sees and the params hash are all read from params
// by jsonrpc.Member, and they are what the child reads from the bytes
// forwarded.
func findCalls(line []byte) (calls []call, elems []json.RawMessage, callIdx []int) {
	b, blank, framed := framing(line)
	switch {
	case blank:
		return nil, nil, nil
	case !framed:
		return []call{{id: jsonrpc.Null, params: line, whole: true, why: ruleUnparseable}}, nil, nil
	case !mayBeCall(b):
		return nil, nil, nil
	}
	switch b[0] {
	case '{':
		if c, ok := objectCall(b); ok {
			return []call{c}, nil, nil
		}
	case '[':
		nonObject := false
		jsonrpc.Elements(b, func(v json.RawMessage) {
			if v[0] != '{' {
				nonObject = true
			}
			if c, ok := objectCall(v); ok {
				calls = append(calls, c)
				callIdx = append(callIdx, len(elems))
			}
			elems = append(elems, v)
		})
		if nonObject {
			// Not a JSON-RPC batch (its elements are objects), but a
			// lenient child may still find a call in it: [[call]],
			// [1,call]. It cannot be split safely, so it is one call.
			return []call{{id: jsonrpc.Null, params: line, whole: true, why: ruleAmbiguous}}, nil, nil
		}
		if len(calls) == 0 {
			return nil, nil, nil
		}
		return calls, elems, callIdx
	}
	return nil, nil, nil
}

// objectCall reads a tools/call out of the JSON object obj (valid JSON).
func objectCall(obj json.RawMessage) (call, bool) {
	if len(obj) == 0 || obj[0] != '{' {
		return call{}, false
	}
	var (
		isCall, clean, idClean = false, true, true
		nMethod, nParams, nIDs int
		params, id             json.RawMessage
	)
	jsonrpc.Members(obj, func(k string, v json.RawMessage) {
		switch {
		case keyIs(k, "method"):
			nMethod++
			var m string
			if v[0] == '"' && json.Unmarshal(v, &m) == nil && methodIsCall(m) {
				isCall = true
				clean = clean && k == "method" && m == "tools/call"
			}
		case keyIs(k, "params"):
			nParams++
			params = v
			clean = clean && k == "params"
		case keyIs(k, "id"):
			nIDs++
			id = v
			idClean = idClean && k == "id"
		}
	})
	if !isCall {
		return call{}, false
	}
	c := call{id: jsonrpc.Null, params: params}
	if nIDs == 1 && id != nil && (id[0] == '"' || id[0] == '-' || ('0' <= id[0] && id[0] <= '9')) && idClean {
		c.id = id
	}
	if !clean || nMethod != 1 || nParams != 1 || params[0] != '{' {
		c.why = ruleAmbiguous
		return c, true
	}
	nNames := 0
	jsonrpc.Members(params, func(k string, v json.RawMessage) {
		if !keyIs(k, "name") {
			return
		}
		nNames++
		var s string
		if k != "name" || v[0] != '"' || json.Unmarshal(v, &s) != nil {
			c.why = ruleAmbiguous
			return
		}
		c.tool = s
	})
	if nNames != 1 || hasHidden(c.tool, hiddenInName) {
		c.why = ruleAmbiguous
	}
	if c.why == "" && jsonrpc.StrictCall(params) != nil {
		// The gateway's reading (shared/params): params that two readers
		// could read differently are not decided on, whatever the rules.
		c.why = ruleUnreadable
	}
	if c.why != "" {
		c.tool = ""
	}
	return c, true
}
