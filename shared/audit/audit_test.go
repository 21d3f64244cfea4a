package audit_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
)

func TestValidate(t *testing.T) {
	ok := records()["refused"]
	wrapRec := audit.Record{Time: ok.Time, Layer: "wrap", Method: "tools/call", Tool: "shell_exec",
		ParamsHash: goldenKey.Hash(nil), Outcome: audit.OutcomeRefused, Code: -32042, Word: "POLICY_DENIED", Slot: audit.SlotWrapPolicy,
		PolicyHash: audit.PolicyHash([]byte("rules"))}
	cases := []struct {
		name string
		edit func(*audit.Record)
		base audit.Record
		want string // "" for valid
	}{
		{"gateway refusal", func(*audit.Record) {}, ok, ""},
		{"wrap refusal", func(*audit.Record) {}, wrapRec, ""},
		{"wrap allowed", func(r *audit.Record) { r.Outcome, r.Code, r.Word, r.Slot = audit.OutcomeAllowed, 0, "", "" }, wrapRec, ""},
		{"wrap audit failure", func(r *audit.Record) { r.Word, r.Slot = "INTERNAL_ERROR", audit.SlotWrapAudit }, wrapRec, ""},
		{"upstream's own error", func(r *audit.Record) { r.Outcome, r.Code, r.Word, r.Slot = audit.OutcomeError, -32001, "", "" }, ok, ""},
		{"internal failure", func(r *audit.Record) { r.Outcome, r.Code, r.Word = audit.OutcomeError, -32603, "INTERNAL_ERROR" }, ok, ""},
		{"session error", func(r *audit.Record) { r.Code, r.Word = -32603, "SESSION_ERROR" }, ok, ""},
		{"approval record", func(r *audit.Record) { r.Method, r.ParamsHash = "approval.approved", "" }, records()["allowed"], ""},

		{"no time", func(r *audit.Record) { r.Time = time.Time{} }, ok, "no time"},
		{"no method", func(r *audit.Record) { r.Method = "" }, ok, "no method"},
		{"unknown outcome", func(r *audit.Record) { r.Outcome = "denied" }, ok, `unknown outcome "denied"`},
		{"unknown layer", func(r *audit.Record) { r.Layer = "proxy" }, ok, `unknown layer "proxy"`},
		{"no tenant", func(r *audit.Record) { r.Tenant = "" }, ok, "no tenant"},
		{"no caller", func(r *audit.Record) { r.Caller = "" }, ok, "no caller"},
		{"no correlation id", func(r *audit.Record) { r.CorrelationID = "" }, ok, "no correlation_id"},
		{"negative latency", func(r *audit.Record) { r.LatencyMs = -1 }, ok, "negative latency"},
		{"no policy hash", func(r *audit.Record) { r.PolicyHash = "" }, ok, "policy_hash"},
		{"prefixed policy hash", func(r *audit.Record) { r.PolicyHash = "sha256:" + audit.PolicyHashNone }, wrapRec, "policy_hash"},
		{"upper-case hash", func(r *audit.Record) { r.PolicyHash = strings.ToUpper(audit.PolicyHashNone) }, ok, "policy_hash"},
		{"prefixed params hash", func(r *audit.Record) { r.ParamsHash = "sha256:" + r.ParamsHash }, wrapRec, "params_hash"},
		{"tools/call without params hash", func(r *audit.Record) { r.ParamsHash = "" }, ok, "params_hash"},
		{"allowed with a code", func(r *audit.Record) { r.Outcome = audit.OutcomeAllowed }, ok, "allowed record has code"},
		{"allowed with a slot", func(r *audit.Record) { r.Outcome, r.Code, r.Word = audit.OutcomeAllowed, 0, "" }, ok, "allowed record has code"},
		{"refused without a slot", func(r *audit.Record) { r.Slot = "" }, ok, "names no slot"},
		{"wrap refused without a slot", func(r *audit.Record) { r.Slot = "" }, wrapRec, "names no slot"},
		{"refused without a word", func(r *audit.Record) { r.Word = "" }, ok, "refused record has no word"},
		{"indeterminate without a word", func(r *audit.Record) { r.Outcome, r.Code, r.Word, r.Slot = audit.OutcomeIndeterminate, -32064, "", "" }, ok, "no word"},
		{"word not in the table", func(r *audit.Record) { r.Word = "RATE_LIMITTED" }, ok, "not in the refusal table"},
		{"code of another word", func(r *audit.Record) { r.Code = -32003 }, ok, "want -32004"},
		{"gateway with wrap's code", func(r *audit.Record) { r.Code = -32042 }, ok, "want -32004"},
		{"wrap with the gateway's code", func(r *audit.Record) { r.Code = -32003 }, wrapRec, "want -32042"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.base
			tc.edit(&r)
			err := r.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// The writer writes only what validates: a golden cannot be produced from
// a record that breaks the rules.
func TestJSONWriterRefusesInvalid(t *testing.T) {
	r := records()["allowed"]
	r.PolicyHash = "sha256:" + r.PolicyHash
	var b strings.Builder
	if err := audit.NewJSONWriter(&b).Write(t.Context(), r); err == nil || b.Len() != 0 {
		t.Fatalf("Write = %v, wrote %q", err, b.String())
	}
}

func TestOutcomes(t *testing.T) {
	want := []string{"allowed", "refused", "error", "indeterminate"}
	if len(audit.Outcomes) != len(want) {
		t.Fatalf("Outcomes = %v", audit.Outcomes)
	}
	for i, o := range audit.Outcomes {
		if string(o) != want[i] || !o.Valid() {
			t.Errorf("Outcomes[%d] = %q, want %q", i, o, want[i])
		}
	}
	if audit.Outcome("ok").Valid() || audit.Outcome("").Valid() {
		t.Error("an unknown outcome is valid")
	}
}

func TestHashFormat(t *testing.T) {
	if audit.PolicyHash(nil) != audit.PolicyHashNone || audit.PolicyHash([]byte{}) != audit.PolicyHashNone {
		t.Errorf("PolicyHash of the empty form = %s, want PolicyHashNone", audit.PolicyHash(nil))
	}
	for _, h := range []string{audit.PolicyHashNone, audit.PolicyHash([]byte("x"))} {
		if !audit.IsHash(h) {
			t.Errorf("%q is not in the hash format", h)
		}
	}
	for _, h := range []string{"", "sha256:" + audit.PolicyHashNone, audit.PolicyHashNone[:63], audit.PolicyHashNone + "0", strings.ToUpper(audit.PolicyHashNone)} {
		if audit.IsHash(h) {
			t.Errorf("%q passes as a hash", h)
		}
	}
	// Absent arguments are hashed as null, whitespace and key order do not
	// count, and bytes that are not JSON are hashed as they are.
	k := goldenKey
	if k.Hash(nil) != k.Hash([]byte(" null ")) {
		t.Error("absent arguments and null differ")
	}
	if k.Hash([]byte(`{"b":[1, 2],"a":"x"}`)) != k.Hash([]byte("{ \"a\" : \"x\" ,\n \"b\" : [ 1,2 ] }")) {
		t.Error("spacing or key order changes the hash")
	}
	if k.Hash([]byte("{oops")) == k.Hash([]byte("{oops\n")) {
		t.Error("bytes that are not JSON are not hashed as they are")
	}
	for _, h := range []string{k.Hash([]byte(`{"a":1}`)), k.Hash(nil), k.Hash([]byte("not json\n"))} {
		if !audit.IsParamsHash(h) || audit.IsHash(h) {
			t.Errorf("%q: want the params_hash format, not policy_hash's", h)
		}
	}
}

// TestDocsListTheRecord: docs/state.md names every field of a record and
// every outcome, and states the one hash format.
func TestDocsListTheRecord(t *testing.T) {
	b, err := os.ReadFile("../../docs/state.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	r := records()["refused"]
	r.Detail = "d" // every omitempty field set
	enc, err := audit.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(enc, &fields); err != nil {
		t.Fatal(err)
	}
	for f := range fields {
		if !strings.Contains(doc, "`"+f+"`") {
			t.Errorf("docs/state.md does not name the field %s", f)
		}
	}
	for _, o := range audit.Outcomes {
		if !strings.Contains(doc, "`"+string(o)+"`") {
			t.Errorf("docs/state.md does not name the outcome %s", o)
		}
	}
	if !strings.Contains(doc, audit.PolicyHashNone) || !strings.Contains(doc, "`audit.ParamsKey.Hash`") || !strings.Contains(doc, audit.ParamsHashPrefix) {
		t.Error("docs/state.md does not state the hash formats (PolicyHashNone, audit.ParamsKey.Hash, hmac-sha256:)")
	}
}
