package audit

import (
	"strconv"
	"unicode/utf8"
)

// Caps on what one Record keeps (docs/state.md, "In-memory bounds"). Most
// fields of a record come from the agent or its upstream (the tool and
// server it named, the session id it sent) or from an operator (a
// decision's detail); a record must not keep a megabyte because a client
// sent one. Bounded cuts a longer field to its cap and marks the cut.
const (
	// MaxFieldBytes caps each short field: tenant, caller, session,
	// correlation_id, layer, method, server, tool, word, and each degraded
	// slot name. It is twice params.MaxNameBytes, so a tool name that the
	// params check has already cut (256 bytes and the marker) is kept as it
	// was cut.
	MaxFieldBytes = 512
	// MaxDetailBytes caps the free-text detail.
	MaxDetailBytes = 4096
	// MaxDegraded caps how many degraded slots a record lists (there are
	// fewer slots than this).
	MaxDegraded = 16
)

// CutMarker starts the text that ends a cut field: Cut(s, n) is the first
// bytes of s (whole UTF-8 characters, at most n bytes), then
// "…[cut N bytes]", N being how many bytes were left out.
const CutMarker = "…[cut "

// Cut returns s when it is at most max bytes long; otherwise its longest
// prefix of at most max bytes that does not split a UTF-8 character,
// followed by "…[cut N bytes]" where N is the number of bytes left out.
// A cut value is at most max+len("…[cut 18446744073709551615 bytes]")
// bytes. max < 0 counts as 0.
func Cut(s string, max int) string {
	if max < 0 {
		max = 0
	}
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + CutMarker + strconv.Itoa(len(s)-n) + " bytes]"
}

// Bounded returns r with every agent- or operator-supplied text field cut
// to its cap (MaxFieldBytes, MaxDetailBytes, MaxDegraded), each cut marked
// as Cut marks it. Fixed-format fields (time, outcome, code, the two
// hashes, latency) are kept as they are. The stores apply it before every
// write, so a record is bounded in every store and in every log line that
// prints a stored record; a writer that logs a record instead of storing
// it should log r.Bounded(). It allocates only when it cuts.
func (r Record) Bounded() Record {
	f := func(p *string) { *p = Cut(*p, MaxFieldBytes) }
	f(&r.Tenant)
	f(&r.Caller)
	f(&r.Session)
	f(&r.CorrelationID)
	f(&r.Layer)
	f(&r.Method)
	f(&r.Server)
	f(&r.Tool)
	f(&r.Word)
	f(&r.PolicyVerdict)
	f(&r.PolicyRule)
	r.Detail = Cut(r.Detail, MaxDetailBytes)
	cut := len(r.Degraded) > MaxDegraded
	for _, d := range r.Degraded {
		cut = cut || len(d) > MaxFieldBytes
	}
	if cut {
		d := r.Degraded[:min(len(r.Degraded), MaxDegraded)]
		out := make([]string, len(d))
		for i, s := range d {
			out[i] = Cut(s, MaxFieldBytes)
		}
		r.Degraded = out
	}
	return r
}

// Size is an estimate of the bytes r holds in memory: its text fields and
// a fixed overhead for the rest. The embedded store's audit log counts
// records by it against its byte cap.
func (r Record) Size() int {
	n := recordOverhead + len(r.Tenant) + len(r.Caller) + len(r.Session) + len(r.CorrelationID) +
		len(r.Layer) + len(r.Method) + len(r.Server) + len(r.Tool) + len(r.ParamsHash) +
		len(r.Word) + len(r.Outcome) + len(r.PolicyHash) + len(r.Detail) +
		len(r.PolicyVerdict) + len(r.PolicyRule) + len(r.Writer) + len(r.Prev) + len(r.Hash)
	for _, d := range r.Degraded {
		n += 16 + len(d)
	}
	return n
}

// recordOverhead is the size of a Record's fixed part (times, numbers,
// string and slice headers) rounded up.
const recordOverhead = 256
