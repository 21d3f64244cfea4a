package upstream

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestStripModernMeta(t *testing.T) {
	for _, tc := range []struct {
		name, params, want string
	}{
		{"no meta", `{"name":"x"}`, `{"name":"x"}`},
		{"only modern keys", `{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`, `{"name":"x"}`},
		{"progress token kept", `{"_meta":{"progressToken":"p","io.modelcontextprotocol/clientInfo":{"name":"c"}}}`, `{"_meta":{"progressToken":"p"}}`},
		{"other meta untouched", `{"_meta":{"progressToken":1}}`, `{"_meta":{"progressToken":1}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(stripModernMeta(json.RawMessage(tc.params))); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestReadSSEEvents: every event before the response goes to on, in
// order; events after it are not read.
func TestReadSSEEvents(t *testing.T) {
	body := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"roots/list\"}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"late\"}\n\n"
	var got []string
	resp, err := readSSE(strings.NewReader(body), json.RawMessage(`1`), func(m []byte) { got = append(got, string(m)) })
	if err != nil || string(resp) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("readSSE = %s, %v", resp, err)
	}
	want := []string{
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`,
		`{"jsonrpc":"2.0","id":9,"method":"roots/list"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events %q, want %q", got, want)
	}
}
