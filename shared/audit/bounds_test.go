package audit_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aegis-gw/aegis/shared/audit"
)

func TestCut(t *testing.T) {
	tests := []struct {
		name string
		s    string
		max  int
		want string
	}{
		{"short", "echo", 8, "echo"},
		{"exactly the cap", "abcd", 4, "abcd"},
		{"one over", "abcde", 4, "abcd…[cut 1 bytes]"},
		{"empty cap", "abc", 0, "…[cut 3 bytes]"},
		{"negative cap", "abc", -1, "…[cut 3 bytes]"},
		// "é" is two bytes: a cut never splits it.
		{"utf-8 boundary", "aéé", 2, "a…[cut 4 bytes]"},
		{"utf-8 fits", "aéé", 3, "aé…[cut 2 bytes]"},
	}
	for _, tc := range tests {
		if got := audit.Cut(tc.s, tc.max); got != tc.want {
			t.Errorf("%s: Cut(%q, %d) = %q; want %q", tc.name, tc.s, tc.max, got, tc.want)
		}
	}
}

// A megabyte tool name (issue 11, item 9: 300 such calls kept +298 MB) is
// kept as its first MaxFieldBytes bytes and a marker that says how much
// was left out; so are the other agent-supplied fields.
func TestBoundedCutsLongFields(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	r := audit.Record{
		Time: time.Now(), Tenant: "acme", Caller: "agent", Session: huge, CorrelationID: "c",
		Layer: "gateway", Method: huge, Server: huge, Tool: huge, ParamsHash: goldenKey.Hash(nil),
		PolicyHash: audit.PolicyHashNone, Outcome: audit.OutcomeRefused, Code: -32602, Word: "INVALID_PARAMS",
		Detail: huge, Degraded: append(make([]string, 0, 40), make([]string, 40)...),
	}
	r.Degraded[0] = huge
	b := r.Bounded()
	wantField := strings.Repeat("x", audit.MaxFieldBytes) + "…[cut 1048064 bytes]"
	for name, got := range map[string]string{"session": b.Session, "method": b.Method, "server": b.Server, "tool": b.Tool, "degraded[0]": b.Degraded[0]} {
		if got != wantField {
			t.Errorf("%s: %d bytes ending %q; want the first %d bytes and the marker", name, len(got), got[max(0, len(got)-24):], audit.MaxFieldBytes)
		}
	}
	if want := strings.Repeat("x", audit.MaxDetailBytes) + "…[cut 1044480 bytes]"; b.Detail != want {
		t.Errorf("detail: %d bytes; want %d", len(b.Detail), len(want))
	}
	if len(b.Degraded) != audit.MaxDegraded {
		t.Errorf("degraded: %d entries; want %d", len(b.Degraded), audit.MaxDegraded)
	}
	if b.Tenant != "acme" || b.Caller != "agent" || b.ParamsHash != r.ParamsHash || b.PolicyHash != r.PolicyHash || b.Word != r.Word {
		t.Errorf("short and fixed fields changed: %+v", b)
	}
	if r.Tool != huge || len(r.Degraded[0]) != len(huge) {
		t.Error("Bounded changed the record it was called on")
	}
	if b.Size() > 16<<10 {
		t.Errorf("a bounded record holds %d bytes; want at most 16 KiB", b.Size())
	}
}

func TestBoundedKeepsShortRecords(t *testing.T) {
	r := audit.Record{Time: time.Now(), Tenant: "acme", Caller: "agent", Tool: "é" + strings.Repeat("a", audit.MaxFieldBytes-2), Degraded: []string{"ratelimit"}}
	if !utf8.ValidString(r.Tool) || len(r.Tool) != audit.MaxFieldBytes {
		t.Fatal("bad fixture")
	}
	var b audit.Record
	if n := testing.AllocsPerRun(100, func() { b = r.Bounded() }); n != 0 {
		t.Errorf("Bounded of a short record allocates %v times; want 0", n)
	}
	if b.Tool != r.Tool || &b.Degraded[0] != &r.Degraded[0] {
		t.Errorf("a field at the cap was changed")
	}
}
