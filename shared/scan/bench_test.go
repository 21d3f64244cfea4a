package scan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchDoc is a JSON result of about size bytes that holds no finding:
// MCP content items with prose, code, ids, hashes, timestamps, numbers.
func benchDoc(size int) []byte {
	items := []string{
		`{"type":"text","text":"The deployment finished in 42 seconds; 3 services were restarted and the cache was warmed. See https://docs.example.com/guide/v2.3.1#rollout for details."}`,
		`{"id":"123e4567-e89b-12d3-a456-426614174000","sha":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","at":"2026-11-30T09:00:00Z","n":1732000000000,"ok":true}`,
		`{"type":"text","text":"func main() {\n\tfmt.Println(\"hello, world\")\n\tfor i := 0; i < 10; i++ { total += i * 3 }\n}\n"}`,
		`{"order":"ORD-2024-000123","isbn":"978-3-16-148410-0","version":"1.24.3","price":"$1,234.56","qty":[1,2,3,4,5]}`,
	}
	var b strings.Builder
	b.WriteString(`{"content":[`)
	for i := 0; b.Len() < size-200; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(items[i%len(items)])
	}
	b.WriteString(`],"isError":false}`)
	return []byte(b.String())
}

// BenchmarkScan: every detector on, documents without findings, a reused
// dst. ns/op over the size stays flat from 10 KB to 1 MB (linear work);
// allocs/op is 0.
func BenchmarkScan(b *testing.B) {
	s := New(nil)
	html := htmlDoc(10 << 10)
	b.Run("html10KB", func(b *testing.B) {
		dst := make([]Finding, 0, 16)
		b.SetBytes(int64(len(html)))
		b.ReportAllocs()
		for b.Loop() {
			dst, _ = s.Scan(html, dst[:0])
		}
	})
	for _, size := range []int{10 << 10, 100 << 10, 1 << 20} {
		doc := benchDoc(size)
		if fs, err := s.Scan(doc, nil); err != nil || len(fs) > 0 {
			b.Fatalf("bench doc: %v %v", fs, err)
		}
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			dst := make([]Finding, 0, 16)
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = s.Scan(doc, dst[:0])
			}
		})
	}
}

// htmlDoc is a fetched web page of about size bytes as a result's text,
// without findings: tags with classes, styles and hidden inputs, comments,
// markdown links and images with query strings.
func htmlDoc(size int) []byte {
	items := []string{
		`<div class="card" style="margin: 0 auto; padding: 12px"><h2 id="t">Pancakes</h2><p>Mix the flour, milk and eggs; rest for 10 minutes.</p></div>`,
		`<!-- Begin footer --><footer class="site-footer"><a href="/about?ref=footer">About us</a> | <a href="/contact">Contact</a></footer><!-- End footer -->`,
		`<form action="/search"><input type="hidden" name="csrf" value="8f7a6c1d"><input type="text" name="q" placeholder="Search recipes"></form>`,
		`![photo](https://img.example.com/p/123.jpg?w=600&h=400) See [all recipes](https://example.com/recipes?page=2&sort=new).`,
		`<span aria-hidden="true" class="icon icon-star"></span><ul><li>Flour 200 g</li><li>Milk 300 ml</li><li>Eggs 2</li></ul>`,
	}
	var t strings.Builder
	for i := 0; t.Len() < size-200; i++ {
		t.WriteString(items[i%len(items)])
		t.WriteByte('\n')
	}
	d, _ := json.Marshal(map[string]any{"content": []any{map[string]string{"type": "text", "text": t.String()}}})
	return d
}

// BenchmarkScanAll: BenchmarkScan's documents with every kind on, the
// threat kinds included (AllKinds): the cost of both content issues'
// detectors in one pass; and a 10 KB HTML page, where the markup
// detectors run most. allocs/op is 0.
func BenchmarkScanAll(b *testing.B) {
	s := New(&Options{Kinds: AllKinds()})
	html := htmlDoc(10 << 10)
	if fs, err := s.Scan(html, nil); err != nil || len(fs) > 0 {
		b.Fatalf("html doc: %v %v", fs, err)
	}
	b.Run("html10KB", func(b *testing.B) {
		dst := make([]Finding, 0, 16)
		b.SetBytes(int64(len(html)))
		b.ReportAllocs()
		for b.Loop() {
			dst, _ = s.Scan(html, dst[:0])
		}
	})
	for _, size := range []int{10 << 10, 100 << 10, 1 << 20} {
		doc := benchDoc(size)
		if fs, err := s.Scan(doc, nil); err != nil || len(fs) > 0 {
			b.Fatalf("bench doc: %v %v", fs, err)
		}
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			dst := make([]Finding, 0, 16)
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = s.Scan(doc, dst[:0])
			}
		})
	}
}
