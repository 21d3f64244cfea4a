package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// paramHeaders returns the Mcp-Param-* headers (SEP-2243) of a tools/call
// to a 2026-07-28 upstream: for every property of the tool's inputSchema,
// at any depth, annotated with "x-mcp-header": NAME, the argument's value
// as header Mcp-Param-NAME. Only strings, booleans and integers within
// ±(2^53−1) are sent; a value with control or non-ASCII characters, edge
// whitespace, or the shape of the encoding itself is sent as
// "=?base64?…?=". The upstream checks these headers against the body, so
// a missing one makes it refuse the call.
func paramHeaders(toolDef, params json.RawMessage) map[string]string {
	if len(toolDef) == 0 || !bytes.Contains(toolDef, []byte("x-mcp-header")) {
		return nil
	}
	var def struct {
		InputSchema schemaNode `json:"inputSchema"`
	}
	if json.Unmarshal(toolDef, &def) != nil {
		return nil
	}
	var p struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.Arguments) == 0 {
		return nil
	}
	out := map[string]string{}
	def.InputSchema.collect(p.Arguments, out)
	return out
}

type schemaNode struct {
	Properties map[string]schemaNode `json:"properties"`
	Header     string                `json:"x-mcp-header"`
}

// collect adds the headers of n's annotated properties found in args.
func (n schemaNode) collect(args json.RawMessage, out map[string]string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil {
		return
	}
	for name, prop := range n.Properties {
		v, ok := obj[name]
		if !ok {
			continue
		}
		if prop.Header != "" {
			if s, ok := headerValue(v); ok {
				out["Mcp-Param-"+prop.Header] = s
			}
		}
		if len(prop.Properties) > 0 {
			prop.collect(v, out)
		}
	}
}

const (
	b64Prefix = "=?base64?"
	b64Suffix = "?="
)

func headerValue(raw json.RawMessage) (string, bool) {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return "", false
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case bool:
		s = strconv.FormatBool(x)
	case json.Number:
		f, err := x.Float64()
		if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53-1 {
			return "", false
		}
		s = strconv.FormatInt(int64(f), 10)
	default:
		return "", false
	}
	if needsBase64(s) {
		return b64Prefix + base64.StdEncoding.EncodeToString([]byte(s)) + b64Suffix, true
	}
	return s, true
}

func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return true
		}
	}
	return strings.HasPrefix(s, b64Prefix) && strings.HasSuffix(s, b64Suffix)
}
