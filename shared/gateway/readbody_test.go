package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// readBody reads a body whole whether its announced length is below
// exactBodyBytes (one buffer of that size) or above it (read as it
// arrives); a small body shorter than announced is 400 (for a larger one
// net/http's body reader reports it), a longer one than max is 413.
func TestReadBody(t *testing.T) {
	const max = 64 << 10
	for _, n := range []int{1, 100, exactBodyBytes, exactBodyBytes + 1, max} {
		body := bytes.Repeat([]byte("x"), n)
		r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		b, status := readBody(httptest.NewRecorder(), r, max)
		if status != 0 || !bytes.Equal(b, body) {
			t.Fatalf("%d bytes: status %d, read %d bytes", n, status, len(b))
		}
	}
	short := httptest.NewRequest(http.MethodPost, "/mcp", io.NopCloser(strings.NewReader("short")))
	short.ContentLength = 100
	if _, status := readBody(httptest.NewRecorder(), short, max); status != http.StatusBadRequest {
		t.Fatalf("a body shorter than its announced 100 bytes: status %d, want 400", status)
	}
	r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(make([]byte, max+1)))
	if _, status := readBody(httptest.NewRecorder(), r, max); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("over max: status %d, want 413", status)
	}
}
