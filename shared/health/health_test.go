package health

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, h http.Handler) (int, Answer) {
	t.Helper()
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var a Answer
	if err := json.Unmarshal(rr.Body.Bytes(), &a); err != nil {
		t.Fatalf("%q: %v", rr.Body.String(), err)
	}
	return rr.Code, a
}

func TestLive(t *testing.T) {
	if code, a := get(t, Live()); code != 200 || a.Status != "alive" {
		t.Fatalf("%d %+v", code, a)
	}
}

func TestReady(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	ok := Probe{"store", func(context.Context) error { return nil }}
	bad := Probe{"registry", func(context.Context) error { return errors.New("tenant secret-tenant-name is not in the store") }}
	if code, a := get(t, Ready(log, time.Second, ok)); code != 200 || a.Status != "ready" || a.Checks["store"] != "ok" {
		t.Fatalf("%d %+v", code, a)
	}
	rr := httptest.NewRecorder()
	Ready(log, time.Second, ok, bad).ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rr.Code != 503 || !strings.Contains(rr.Body.String(), `"registry":"failing"`) || !strings.Contains(rr.Body.String(), `"store":"ok"`) {
		t.Fatalf("%d %s", rr.Code, rr.Body.String())
	}
	// The failure's detail is in the log, not in the public answer.
	if strings.Contains(rr.Body.String(), "secret-tenant-name") || !strings.Contains(logs.String(), "secret-tenant-name") {
		t.Fatalf("answer %s\nlog %s", rr.Body.String(), logs.String())
	}
}

// A probe that outlives the deadline fails, and so do the probes after it
// without being run.
func TestReadyDeadline(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	ran := false
	slow := Probe{"store", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}
	after := Probe{"policies", func(context.Context) error { ran = true; return nil }}
	code, a := get(t, Ready(log, 10*time.Millisecond, slow, after))
	if code != 503 || a.Checks["store"] != "failing" || a.Checks["policies"] != "failing" || ran {
		t.Fatalf("%d %+v ran=%v", code, a, ran)
	}
}
