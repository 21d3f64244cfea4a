package schema

import (
	"context"
	"io"
	"log/slog"
	"testing"
)

// echoSchema is the demo upstream's echo tool's inputSchema, as the Go SDK
// lists it.
const echoSchema = `{"type":"object","required":["message"],"properties":{"message":{"type":"string","description":"text to send back"}},"additionalProperties":false}`

// BenchmarkCheck is one tools/call through the check with a cached schema:
// the definition hash, the cache lookup, decoding the arguments and
// validating them.
func BenchmarkCheck(b *testing.B) {
	for _, bc := range []struct{ name, schema, args string }{
		{"small/valid", echoSchema, `{"message":"hello"}`},
		{"small/invalid", echoSchema, `{"message":5}`},
		{"order/valid", order, `{"customer":{"id":"c1","tier":"pro"},"items":[{"sku":"a","qty":2},{"sku":"b","qty":1}],"note":"hi"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			k := New(Block, &Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			c := toolCall(bc.schema, bc.args)
			ctx := context.Background()
			_ = k.Check(ctx, c) // compile once
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = k.Check(ctx, c)
			}
		})
	}
}

// BenchmarkCompile is the cost of a cache miss.
func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if e := compile([]byte(order)); e.err != nil {
			b.Fatal(e.err)
		}
	}
}
