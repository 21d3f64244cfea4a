package idempotency_test

import (
	"context"
	"strconv"
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

// An answer over MaxAnswerBytes is not kept (150 keys with 1 MB answers
// held +151 MB, issue 11 item 9): the ledger records that the call
// completed, and a retry gets -32602 instead of a second run, on either
// store (a done record without result or error needs no new attribute).
func TestAnswerCap(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := memstore.New()
	l := idempotency.New(idempotency.Options{Store: st, Now: func() time.Time { return now }})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		size   int
		kept   bool
		errObj bool
	}{
		{"at the cap", idempotency.MaxAnswerBytes, true, false},
		{"one over", idempotency.MaxAnswerBytes + 1, false, false},
		{"a megabyte", 1 << 20, false, false},
		{"an error object over", idempotency.MaxAnswerBytes + 1, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := []byte(`"` + strings.Repeat("a", tc.size-2) + `"`)
			c, ref, err := l.Begin(ctx, "acme", tc.name, "h", idempotency.NewHolder())
			if err != nil || ref != nil {
				t.Fatal(ref, err)
			}
			var res, eo []byte
			if tc.errObj {
				eo = answer
			} else {
				res = answer
			}
			if err := c.Complete(ctx, res, eo); err != nil {
				t.Fatal(err)
			}
			r, ref, err := l.Begin(ctx, "acme", tc.name, "h", idempotency.NewHolder())
			replayed := 0
			if r != nil && r.Replay {
				replayed = len(r.Result) + len(r.ErrObj)
			}
			switch {
			case err != nil:
				t.Fatal(err)
			case tc.kept && (ref != nil || replayed != tc.size):
				t.Fatalf("retry: refusal %v, replayed %d bytes; want the %d-byte answer replayed", ref, replayed, tc.size)
			case !tc.kept && (ref == nil || ref.Code != refusal.CodeInvalidParams || ref.Message != idempotency.NotKeptMessage):
				t.Fatalf("retry: refusal %v; want -32602 %q", ref, idempotency.NotKeptMessage)
			}
		})
	}
	if !strings.Contains(idempotency.NotKeptMessage, "("+strconv.Itoa(idempotency.MaxAnswerBytes)+" bytes)") {
		t.Errorf("NotKeptMessage does not name the cap: %q", idempotency.NotKeptMessage)
	}
	if u := st.Usage(); u.LedgerBytes > 2*idempotency.MaxAnswerBytes {
		t.Errorf("ledger holds %d bytes after one answer at the cap; want about the cap", u.LedgerBytes)
	}
}
