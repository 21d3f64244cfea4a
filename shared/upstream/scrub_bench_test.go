package upstream

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchAnswer is a tools/call result of about 64 KB: prose, an embedded
// JSON document (escaped quotes and backslashes) and a base64 image.
func benchAnswer() json.RawMessage {
	img := make([]byte, 24<<10)
	_, _ = rand.Read(img)
	inner, _ := json.Marshal(map[string]any{"path": `C:\data\x`, "rows": strings.Repeat(`{"a":"b"},`, 400)})
	v := map[string]any{"content": []any{
		map[string]any{"type": "text", "text": strings.Repeat("The quick brown fox jumps over the lazy dog. ", 400)},
		map[string]any{"type": "text", "text": string(inner)},
		map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(img)},
	}}
	b, _ := json.Marshal(v)
	return b
}

func BenchmarkScrubJSON(b *testing.B) {
	doc := benchAnswer()
	s := NewScrubber("Bearer ghp_16C7e42F292c6912E7710c838347Ae178B4a")
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		_ = s.JSON(doc)
	}
}

// BenchmarkScrubAdversarial scrubs the adversarial texts at 8 MB, the
// largest answer read, plain and in JSON, and reports the work per byte
// (failing over maxWorkPerByte) beside the time.
func BenchmarkScrubAdversarial(b *testing.B) {
	for _, tc := range adversarial() {
		for _, inJSON := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/json=%v", tc.name, inJSON), func(b *testing.B) {
				var per float64
				for b.Loop() {
					per = adversarialWork(b, tc, 8<<20, inJSON)
				}
				b.ReportMetric(per, "work/byte")
			})
		}
	}
}

func BenchmarkNewScrubber(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = NewScrubber("Bearer ghp_16C7e42F292c6912E7710c838347Ae178B4a")
	}
}
