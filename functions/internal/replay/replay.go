// Package replay is the functions' recorded-event harness: it lists the
// events of a directory (so that a test can prove it posts every one),
// normalizes a function's API Gateway response (ids, times and counters
// that change from run to run) and compares it with a golden file, which
// the -update flag of the calling test rewrites.
package replay

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// Events returns the names (without .json) of the event files in dir.
func Events(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	sort.Strings(names)
	return names
}

// Golden is what a golden file holds: the response, normalized.
type Golden struct {
	StatusCode      int               `json:"statusCode"`
	Headers         map[string]string `json:"headers,omitempty"`
	Cookies         []string          `json:"cookies,omitempty"`
	IsBase64Encoded bool              `json:"isBase64Encoded"`
	Body            json.RawMessage   `json:"body,omitempty"` // JSON, or a JSON string for other bodies
}

// Stable are values that stay as they are although they look like run-time
// ids (the seeded session ids, a correlation id taken from a recorded
// traceparent, an approval id the test seeded).
type Stable []string

var (
	uuidRE  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE  = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	retryRE = regexp.MustCompile(`"retry_after_ms":\s*\d+`)
	// retryAfterRE is the Retry-After header of a -32004 answer: whole
	// seconds to the next minute, so it changes with the clock.
	retryAfterRE = regexp.MustCompile(`"Retry-After": "\d+"`)
	// retryInRE is the wait a -32004 message names ("retry in 52s"), the
	// header's seconds in words.
	retryInRE = regexp.MustCompile(`retry in \d+s`)
	periodRE  = regexp.MustCompile(`"period":\s*"\d{6}"`)
	monthRE   = regexp.MustCompile(`\b20\d{2}(0[1-9]|1[0-2])\b`)
)

// Normalize returns res as a golden: a JSON body is decoded and indented;
// the correlation id and session ids the function minted, UUIDs (approval
// ids), RFC 3339 times, retry_after_ms (and the Retry-After header) and
// quota periods are replaced by
// placeholders, except values listed in stable.
func Normalize(t testing.TB, res events.APIGatewayV2HTTPResponse, stable Stable) []byte {
	t.Helper()
	g := Golden{StatusCode: res.StatusCode, Headers: res.Headers, Cookies: res.Cookies, IsBase64Encoded: res.IsBase64Encoded}
	if res.Body != "" {
		var v any
		dec := json.NewDecoder(strings.NewReader(res.Body))
		dec.UseNumber()
		if res.IsBase64Encoded || dec.Decode(&v) != nil || dec.More() {
			g.Body, _ = json.Marshal(res.Body)
		} else {
			g.Body, _ = json.Marshal(v)
		}
	}
	out, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	replace := map[string]string{}
	for h, placeholder := range map[string]string{
		"X-Correlation-Id": "<correlation-id>",
		"Mcp-Session-Id":   "<session-id>",
		"X-Session-Id":     "<session-id>",
	} {
		if v := res.Headers[h]; v != "" && !slices.Contains(stable, v) {
			replace[v] = placeholder
		}
	}
	for v, p := range replace {
		s = strings.ReplaceAll(s, v, p)
	}
	s = uuidRE.ReplaceAllStringFunc(s, func(m string) string {
		if slices.Contains(stable, m) {
			return m
		}
		return "<uuid>"
	})
	s = timeRE.ReplaceAllString(s, "<time>")
	s = retryRE.ReplaceAllString(s, `"retry_after_ms": "<ms>"`)
	s = retryAfterRE.ReplaceAllString(s, `"Retry-After": "<secs>"`)
	s = retryInRE.ReplaceAllString(s, "retry in <secs>s")
	s = periodRE.ReplaceAllString(s, `"period": "<yyyymm>"`)
	s = monthRE.ReplaceAllString(s, "<yyyymm>")
	return []byte(s + "\n")
}

// Compare checks got against dir/name.json, or writes it there when update
// is set.
func Compare(t testing.TB, dir, name string, got []byte, update bool) {
	t.Helper()
	path := filepath.Join(dir, name+".json")
	if update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: response differs from %s (run with -update to accept)\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}
