package content

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/pipeline"
)

// BenchmarkEgress: the content stage over a tools/call's arguments and
// over the members the message table names for prompts/get, a
// resources/read URI and a client's answer, each about 1 KB of clean
// text: the same scanner pass, no allocation.
func BenchmarkEgress(b *testing.B) {
	k, _, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	text, _ := json.Marshal(strings.Repeat("the quick brown fox jumps over the lazy dog ", 24))
	for _, tc := range []struct {
		name string
		c    pipeline.Call
	}{
		{"tools/call", pipeline.Call{Method: "tools/call", Params: json.RawMessage(`{"name":"echo","arguments":{"message":` + string(text) + `}}`)}},
		{"prompts/get", pipeline.Call{Method: "prompts/get", Params: json.RawMessage(`{"name":"greet","arguments":{"name":` + string(text) + `}}`)}},
		{"resources/read", pipeline.Call{Method: "resources/read", Params: json.RawMessage(`{"uri":"test://item/abc/def?x=1"}`)}},
		{"response", pipeline.Call{Method: pipeline.ResponseMethod, Relayed: true, Params: json.RawMessage(`{"jsonrpc":"2.0","id":"a:1","result":{"action":"accept","content":{"note":` + string(text) + `}}}`)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				c := tc.c
				if err := k.Check(ctx, &c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
