package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

// testAsked: a session's outstanding server requests are answered once,
// by key, within their expiry, and bounded by MaxAsked (expired entries
// make room); another session, or none, has none of them.
func testAsked(t *testing.T, nb NewBackend) {
	b := nb(t, Options{})
	c := ctx(t)
	for _, id := range []string{"s1", "s2"} {
		if err := b.Create(c, session.Record{ID: id, Tenant: "acme", Caller: "agent", Created: t0, LastSeen: t0}); err != nil {
			t.Fatal(err)
		}
	}
	a := session.Asked{Server: "a", Method: "elicitation/create", Expires: t0.Add(time.Minute)}
	if err := b.Ask(c, "acme", "nosuch", `"a:1"`, a, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Ask(no session) = %v, want ErrNotFound", err)
	}
	if err := b.Ask(c, "acme", "s1", `"a:1"`, a, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Answer(c, "acme", "s2", `"a:1"`, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Answer(other session) = %v, want ErrNotFound", err)
	}
	if _, err := b.Answer(c, "beta", "s1", `"a:1"`, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Answer(other tenant) = %v, want ErrNotFound", err)
	}
	got, err := b.Answer(c, "acme", "s1", `"a:1"`, t0.Add(time.Second))
	if err != nil || got.Server != "a" || got.Method != "elicitation/create" || !got.Expires.Equal(a.Expires) {
		t.Fatalf("Answer = %+v, %v; want %+v", got, err, a)
	}
	if _, err := b.Answer(c, "acme", "s1", `"a:1"`, t0.Add(time.Second)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second Answer = %v, want ErrNotFound", err)
	}
	// Expired: refused, and gone.
	if err := b.Ask(c, "acme", "s1", `"a:2"`, a, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Answer(c, "acme", "s1", `"a:2"`, a.Expires); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Answer(expired) = %v, want ErrNotFound", err)
	}
	// Bounded: MaxAsked at once; the next is refused until one expires.
	short := session.Asked{Server: "a", Method: "roots/list", Expires: t0.Add(time.Second)}
	for i := range session.MaxAsked {
		x := a
		if i == 0 {
			x = short
		}
		if err := b.Ask(c, "acme", "s2", fmt.Sprintf(`"a:%d"`, i), x, t0); err != nil {
			t.Fatalf("Ask %d: %v", i, err)
		}
	}
	if err := b.Ask(c, "acme", "s2", `"a:over"`, a, t0); !errors.Is(err, session.ErrTooManyAsked) {
		t.Fatalf("Ask past MaxAsked = %v, want ErrTooManyAsked", err)
	}
	if err := b.Ask(c, "acme", "s2", `"a:over"`, a, t0.Add(2*time.Second)); err != nil {
		t.Fatalf("Ask once one expired: %v", err)
	}
	if _, err := b.Answer(c, "acme", "s2", `"a:0"`, t0.Add(2*time.Second)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Answer of the expired entry dropped to make room = %v, want ErrNotFound", err)
	}
	// Raced answers: exactly one gets it.
	if err := b.Ask(c, "acme", "s1", `"a:race"`, a, t0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Answer(c, "acme", "s1", `"a:race"`, t0); err == nil {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d of 8 raced answers took the request, want 1", won)
	}
}
