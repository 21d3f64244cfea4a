package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/gateway"
)

// TestGetStreamsBoundedPerKey: one API key holds at most
// gateway.MaxStreamsPerKey GET streams on an instance; the next is 429
// with a body that says so, and a stream that ends gives its slot back.
func TestGetStreamsBoundedPerKey(t *testing.T) {
	e, sid := everythingSession(t)
	get := func(ctx context.Context) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/mcp/everything", nil)
		req.Header.Set("Authorization", "Bearer "+e.KeyA)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		return resp
	}
	cancels := make([]context.CancelFunc, 0, gateway.MaxStreamsPerKey)
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	for i := range gateway.MaxStreamsPerKey {
		ctx, cancel := context.WithCancel(context.Background())
		cancels = append(cancels, cancel)
		if resp := get(ctx); resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: HTTP %d", i+1, resp.StatusCode)
		}
	}
	over := get(context.Background())
	body, _ := io.ReadAll(over.Body)
	over.Body.Close()
	if over.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "too many open streams") || over.Header.Get("Retry-After") == "" {
		t.Fatalf("stream %d: HTTP %d %q (Retry-After %q); want 429 naming the bound", gateway.MaxStreamsPerKey+1, over.StatusCode, body, over.Header.Get("Retry-After"))
	}
	cancels[0]() // the client leaves one stream: its handler ends and gives the slot back
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithCancel(context.Background())
		resp := get(ctx)
		if resp.StatusCode == http.StatusOK {
			cancels = append(cancels, cancel)
			break
		}
		resp.Body.Close()
		cancel()
		if time.Now().After(deadline) {
			t.Fatalf("after one stream ended, a new one is still HTTP %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
