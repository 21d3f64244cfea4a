// Package correlation gives every request its correlation id: the trace-id
// of a valid W3C traceparent header when the client sent one, else 128
// fresh random bits. Every response carries it in X-Correlation-ID, and
// every log line and audit record of the request names it.
package correlation

import (
	"crypto/rand"
	"encoding/hex"
)

// Header is the response header that carries the id (X-Correlation-ID),
// spelled in net/http's canonical form so that setting and reading it do
// not re-case it on every request.
const Header = "X-Correlation-Id"

// ID returns the correlation id for a request whose traceparent header is tp.
func ID(tp string) string {
	if id, ok := TraceID(tp); ok {
		return id
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TraceID returns the trace-id of tp if tp is a valid W3C traceparent:
// version "-" trace-id(32) "-" parent-id(16) "-" flags(2), lower-case hex,
// neither id all zeros, version not "ff", and nothing after the flags
// unless the version is newer than "00".
func TraceID(tp string) (string, bool) {
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return "", false
	}
	version, trace, parent, flags := tp[:2], tp[3:35], tp[36:52], tp[53:55]
	if !isHex(version) || version == "ff" || !isHex(trace) || !isHex(parent) || !isHex(flags) ||
		allZero(trace) || allZero(parent) {
		return "", false
	}
	if len(tp) > 55 && (version == "00" || tp[55] != '-') {
		return "", false
	}
	return trace, true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
