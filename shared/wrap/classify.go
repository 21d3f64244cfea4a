package wrap

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
)

// A call is one tools/call found on a client line.
type call struct {
	id     json.RawMessage // to echo: the request's string or number id, else null
	tool   string          // decoded params.name; "" when not determined
	params []byte          // exact bytes hashed into the record
	// why is "" when tool was read unambiguously, else ruleUnparseable or
	// ruleAmbiguous: such a call is refused under a policy (fail closed).
	why string
}

// mayBeCall is the fast filter run on every client line: false means no
// JSON parser, strict or lenient, can read a tools/call method from line,
// because the method string can only be spelled with the ASCII letters
// "tools/call" (in any case) or with a backslash escape.
func mayBeCall(line []byte) bool {
	if bytes.IndexByte(line, '\\') >= 0 {
		return true
	}
	for i := 0; i+len("tools/call") <= len(line); i++ {
		j := bytes.IndexByte(line[i:], '/')
		if j < 0 {
			return false
		}
		i += j
		if i >= len("tools") && i+len("/call") <= len(line) &&
			asciiFold(line[i-len("tools"):i+len("/call")], "tools/call") {
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
// a method member whose key matches "method" in any case and whose value is
// "tools/call" in any ASCII case; a line that is not valid UTF-8 JSON but
// passes mayBeCall. Such a call gets why set unless it is the one clean
// spelling: exactly one "method":"tools/call", one "params" object, one
// "name" string in it.
func findCalls(line []byte) (calls []call, elems []json.RawMessage, callIdx []int) {
	if !mayBeCall(line) {
		return nil, nil, nil
	}
	b := bytes.TrimSpace(line)
	if !utf8.Valid(b) || !json.Valid(b) {
		sum := line
		return []call{{id: jsonrpc.Null, params: sum, why: ruleUnparseable}}, nil, nil
	}
	switch b[0] {
	case '{':
		if c, ok := objectCall(b); ok {
			return []call{c}, nil, nil
		}
	case '[':
		jsonrpc.Elements(b, func(v json.RawMessage) {
			if c, ok := objectCall(v); ok {
				calls = append(calls, c)
				callIdx = append(callIdx, len(elems))
			}
			elems = append(elems, v)
		})
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
		case strings.EqualFold(k, "method"):
			nMethod++
			var m string
			if v[0] == '"' && json.Unmarshal(v, &m) == nil && asciiFold([]byte(m), "tools/call") {
				isCall = true
				clean = clean && k == "method" && m == "tools/call"
			}
		case strings.EqualFold(k, "params"):
			nParams++
			params = v
			clean = clean && k == "params"
		case strings.EqualFold(k, "id"):
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
		if !strings.EqualFold(k, "name") {
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
	if nNames != 1 {
		c.why = ruleAmbiguous
	}
	if c.why != "" {
		c.tool = ""
	}
	return c, true
}
