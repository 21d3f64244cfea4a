package idempotency_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/idempotency"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/refusal"
)

func TestHash(t *testing.T) {
	a := idempotency.Hash("s", "t", []byte(`{"name":"t","arguments":{"a":1,"b":[1,2]}}`))
	tests := []struct {
		name         string
		server, tool string
		params       string
		same         bool
	}{
		{"key order and spacing", "s", "t", `{"arguments":{ "b":[1,2], "a":1 },"name":"t"}`, true},
		{"_meta does not count", "s", "t", `{"name":"t","arguments":{"a":1,"b":[1,2]},"_meta":{"idempotencyKey":"k"}}`, true},
		{"other arguments", "s", "t", `{"name":"t","arguments":{"a":2,"b":[1,2]}}`, false},
		{"other tool", "s", "u", `{"name":"t","arguments":{"a":1,"b":[1,2]}}`, false},
		{"other server", "s2", "t", `{"name":"t","arguments":{"a":1,"b":[1,2]}}`, false},
	}
	for _, tc := range tests {
		if got := idempotency.Hash(tc.server, tc.tool, []byte(tc.params)) == a; got != tc.same {
			t.Errorf("%s: same = %v; want %v", tc.name, got, tc.same)
		}
	}
}

func TestBegin(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := idempotency.New(idempotency.Options{Store: memstore.New(), Now: func() time.Time { return now }})
	ctx := context.Background()
	if _, ref, _ := l.Begin(ctx, "acme", strings.Repeat("k", 256), "h", "x"); ref == nil || ref.Code != refusal.CodeInvalidParams {
		t.Fatalf("256-character key: %v; want -32602", ref)
	}
	c, ref, err := l.Begin(ctx, "acme", "k", "h", idempotency.NewHolder())
	if err != nil || ref != nil || c.Replay {
		t.Fatalf("first Begin = %+v, %v, %v", c, ref, err)
	}
	if _, ref, _ := l.Begin(ctx, "acme", "k", "h", idempotency.NewHolder()); ref == nil || ref.Code != refusal.CodeUpstreamUnavailable {
		t.Fatalf("in flight: %v; want -32063", ref)
	}
	if err := c.Complete(ctx, []byte(`{"ok":true}`), nil); err != nil {
		t.Fatal(err)
	}
	r, ref, _ := l.Begin(ctx, "acme", "k", "h", idempotency.NewHolder())
	if ref != nil || !r.Replay || string(r.Result) != `{"ok":true}` {
		t.Fatalf("after completion: %+v, %v", r, ref)
	}
	if _, ref, _ := l.Begin(ctx, "acme", "k", "other", idempotency.NewHolder()); ref == nil || ref.Code != refusal.CodeInvalidParams {
		t.Fatalf("other params: %v; want -32602", ref)
	}
	now = now.Add(25 * time.Hour)
	if r, ref, _ := l.Begin(ctx, "acme", "k", "other", idempotency.NewHolder()); ref != nil || r.Replay {
		t.Fatalf("after retention: %+v, %v; want a fresh claim", r, ref)
	}
}
