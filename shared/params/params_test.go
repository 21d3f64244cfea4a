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

// Names over MaxNameBytes are refused (-32602), and the call carries them
// cut, so that the rate windows, the route and the audit record never hold
// a client's megabyte (issue 11, item 9).
func TestLongNames(t *testing.T) {
	at := strings.Repeat("n", params.MaxNameBytes)
	over := at + "n"
	huge := strings.Repeat("n", 1<<20)
	cut := func(s string) string { // what the call carries
		return s[:params.MaxNameBytes] + "…[cut " + itoa(len(s)-params.MaxNameBytes) + " bytes]"
	}
	str := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	tests := []struct {
		name       string
		pathServer string
		params     string
		refused    bool
		tool, srv  string // what the call carries after the check
	}{
		{"name at the cap", "", `{"name":` + str(at) + `}`, false, at, ""},
		{"name one over", "", `{"name":` + str(over) + `}`, true, cut(over), ""},
		{"megabyte name", "", `{"name":` + str(huge) + `,"arguments":{}}`, true, cut(huge), ""},
		{"server at the cap", "", `{"name":"echo","server":` + str(at) + `}`, false, "echo", at},
		{"megabyte server", "", `{"name":"echo","server":` + str(huge) + `}`, true, "echo", cut(huge)},
		{"megabyte path server", huge, `{"name":"echo"}`, true, "", cut(huge)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &pipeline.Call{Method: "tools/call", Params: json.RawMessage(tc.params), RequestedServer: tc.pathServer}
			err := params.Check{}.Check(context.Background(), c)
			var ref *refusal.Refusal
			switch {
			case tc.refused && (!errors.As(err, &ref) || ref.Code != refusal.CodeInvalidParams):
				t.Fatalf("err = %v; want -32602", err)
			case tc.refused && !strings.Contains(ref.Message, "longer than 256 bytes"):
				t.Errorf("message %q does not name the cap", ref.Message)
			case !tc.refused && err != nil:
				t.Fatalf("err = %v; want nil", err)
			}
			if c.Tool != tc.tool || c.RequestedServer != tc.srv {
				t.Errorf("call carries tool of %d bytes, server of %d bytes; want %d and %d", len(c.Tool), len(c.RequestedServer), len(tc.tool), len(tc.srv))
			}
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
