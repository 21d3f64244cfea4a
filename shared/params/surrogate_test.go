package params_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/params"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// A string with a lone surrogate escape or bytes that are not UTF-8 is
// decoded to U+FFFD by the gateway (and its params hash), while an
// upstream may keep it: "acct-\ud800" and "acct-\udfff" would hash alike
// and be approved as one. Such params are refused with -32602, naming the
// problem and never the value (issue 16, item 4).
func TestLoneSurrogatesRefused(t *testing.T) {
	tests := []struct {
		name, params string
		refused      string // a phrase of the message, "" when the call passes
	}{
		{"issue: high alone", `{"name":"transfer","arguments":{"to":"acct-\ud800"}}`, "lone UTF-16 surrogate"},
		{"issue: low alone", `{"name":"transfer","arguments":{"to":"acct-\udfff"}}`, "lone UTF-16 surrogate"},
		{"upper-case hex", `{"name":"transfer","arguments":{"to":"acct-\uD800"}}`, "lone UTF-16 surrogate"},
		{"high at the end of the string", `{"name":"transfer","arguments":{"to":"\ud83d"}}`, "lone UTF-16 surrogate"},
		{"high then a letter", `{"name":"transfer","arguments":{"to":"\ud83dx"}}`, "lone UTF-16 surrogate"},
		{"high then another escape", `{"name":"transfer","arguments":{"to":"\ud83d\n"}}`, "lone UTF-16 surrogate"},
		{"high then a non-surrogate escape", `{"name":"transfer","arguments":{"to":"\ud83d\u0041"}}`, "lone UTF-16 surrogate"},
		{"two highs", `{"name":"transfer","arguments":{"to":"\ud83d\ud83d"}}`, "lone UTF-16 surrogate"},
		{"low then high", `{"name":"transfer","arguments":{"to":"\ude00\ud83d"}}`, "lone UTF-16 surrogate"},
		{"in a key", `{"name":"transfer","arguments":{"\ud800":1}}`, "lone UTF-16 surrogate"},
		{"in the name", `{"name":"transfer\udfff"}`, "lone UTF-16 surrogate"},
		{"deep in an array", `{"name":"t","arguments":{"a":[{"b":["x","\udbff"]}]}}`, "lone UTF-16 surrogate"},
		{"raw invalid byte", "{\"name\":\"transfer\",\"arguments\":{\"to\":\"acct-\xff\"}}", "not valid UTF-8"},
		{"raw encoded surrogate", "{\"name\":\"transfer\",\"arguments\":{\"to\":\"acct-\xed\xa0\x80\"}}", "not valid UTF-8"},
		{"raw truncated sequence", "{\"name\":\"transfer\",\"arguments\":{\"to\":\"acct-\xe2\x82\"}}", "not valid UTF-8"},

		{"valid pair (emoji)", `{"name":"transfer","arguments":{"to":"\ud83d\ude00"}}`, ""},
		{"valid pair, upper case", `{"name":"transfer","arguments":{"to":"\uD83D\uDE00"}}`, ""},
		{"raw emoji", `{"name":"transfer","arguments":{"to":"😀 é"}}`, ""},
		{"U+FFFD itself", `{"name":"transfer","arguments":{"to":"\ufffd �"}}`, ""},
		{"escaped backslash before u", `{"name":"transfer","arguments":{"to":"\\ud800"}}`, ""},
		{"escaped backslash pairs", `{"name":"transfer","arguments":{"to":"\\\\\\\ud83d\ude00\\"}}`, ""},
		{"neighbours of the range", `{"name":"transfer","arguments":{"to":"\ud7ff\ue000"}}`, ""},
		{"pair in a key", `{"name":"transfer","arguments":{"\ud83d\ude00":1}}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.params)) {
				t.Fatalf("test params are not valid JSON: %q", tc.params)
			}
			c := &pipeline.Call{Method: "tools/call", Params: json.RawMessage(tc.params)}
			err := params.Check{}.Check(context.Background(), c)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("err = %v; want nil", err)
				}
				return
			}
			var ref *refusal.Refusal
			if !errors.As(err, &ref) || ref.Code != refusal.CodeInvalidParams {
				t.Fatalf("err = %v; want -32602", err)
			}
			if !strings.Contains(ref.Message, tc.refused) {
				t.Errorf("message %q does not name %q", ref.Message, tc.refused)
			}
			for _, v := range []string{"acct", "\ufffd", "\xff"} {
				if strings.Contains(ref.Message, v) {
					t.Errorf("message %q echoes the value (%q)", ref.Message, v)
				}
			}
		})
	}
}

// The scan allocates nothing on clean params.
func TestSurrogateScanAllocatesNothing(t *testing.T) {
	p := json.RawMessage(`{"name":"transfer","arguments":{"to":"acct-1 \ud83d\ude00 \\u","n":[1,2,{"k":"é"}]}}`)
	allocs := testing.AllocsPerRun(100, func() {
		c := pipeline.Call{Method: "tools/call", Params: p}
		_ = params.Check{}.Check(context.Background(), &c)
	})
	base := testing.AllocsPerRun(100, func() {
		c := pipeline.Call{Method: "tools/call", Params: json.RawMessage(`{"name":"transfer","arguments":{"to":"acct-1 x \\u","n":[1,2,{"k":"e"}]}}`)}
		_ = params.Check{}.Check(context.Background(), &c)
	})
	if allocs > base {
		t.Errorf("%v allocations with escapes and UTF-8, %v without; the scan should add none", allocs, base)
	}
}
