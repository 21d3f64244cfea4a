package route

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
	"github.com/aegis-gw/aegis/shared/upstream"
)

type regFake struct{ servers []registry.Server }

func (r *regFake) Key(context.Context, string) (registry.Key, error) {
	return registry.Key{}, store.ErrNotFound
}
func (r *regFake) Tenant(context.Context, string) (registry.Tenant, error) {
	return registry.Tenant{}, store.ErrNotFound
}
func (r *regFake) Servers(context.Context, string) ([]registry.Server, error) {
	out := make([]registry.Server, len(r.servers))
	copy(out, r.servers)
	return out, nil
}

type listerFake struct {
	tools map[string][]string // server name → tool names
	// needs lists a tool only to clients whose set has all its bits, as a
	// server that offers it only to clients it can ask (tool → set).
	needs map[string]upstream.Caps
	calls int
	asked []upstream.Caps // the set of each listing, in order
	fail  error           // when set, every listing fails with it
}

func (l *listerFake) ListTools(_ context.Context, srv *registry.Server, caps upstream.Caps) ([]Tool, error) {
	l.calls++
	l.asked = append(l.asked, caps)
	if l.fail != nil {
		return nil, l.fail
	}
	var out []Tool
	for _, n := range l.tools[srv.Name] {
		if caps&l.needs[n] != l.needs[n] {
			continue
		}
		out = append(out, Tool{Name: n, Def: json.RawMessage(`{"name":"` + n + `"}`)})
	}
	return out, nil
}

func TestCatalogViewIsReusedAndInvalidated(t *testing.T) {
	now := time.Unix(1000, 0)
	reg := &regFake{servers: []registry.Server{
		{Tenant: "a", Name: "one", URL: "https://one", Tools: map[string]registry.ToolSettings{"x": {}, "y": {RequiresApproval: true}}},
		{Tenant: "a", Name: "two", URL: "https://two"},
	}}
	l := &listerFake{tools: map[string][]string{"one": {"x", "y"}, "two": {"y", "z"}}}
	c := NewCatalog(reg, l, time.Minute, func() time.Time { return now })
	ctx := context.Background()
	resolve := func(name string) (Entry, bool) {
		e, ok, errs, err := c.Resolve(ctx, "a", "", name)
		if err != nil || len(errs) > 0 {
			t.Fatal(err, errs)
		}
		return e, ok
	}
	if e, ok := resolve("x"); !ok || e.Server.Name != "one" {
		t.Fatalf("x: %+v %v", e, ok)
	}
	if _, ok := resolve("y"); ok {
		t.Fatal("colliding bare name resolved")
	}
	if e, ok := resolve("two.y"); !ok || e.Server.Name != "two" {
		t.Fatalf("two.y: %+v", e)
	}
	v1, _, _ := c.built(ctx, "a", "", 0, time.Minute)
	v2, _, _ := c.built(ctx, "a", "", 0, time.Minute)
	if v1 != v2 || l.calls != 2 {
		t.Fatalf("view rebuilt (%p vs %p) or lists refetched (%d calls)", v1, v2, l.calls)
	}
	// A changed server (URL, settings) builds a new view with it.
	reg.servers[1].URL = "https://two-new"
	if e, ok := resolve("z"); !ok || e.Server.URL != "https://two-new" {
		t.Fatalf("changed URL not seen: %+v", e)
	}
	reg.servers[0].Tools = map[string]registry.ToolSettings{"x": {RequiresApproval: true}}
	if e, _ := resolve("x"); !e.Server.Tools["x"].RequiresApproval {
		t.Fatal("changed tool settings not seen")
	}
	// Past the TTL the lists are fetched again.
	calls := l.calls
	now = now.Add(2 * time.Minute)
	resolve("x")
	if l.calls <= calls {
		t.Fatal("lists not refetched after the TTL")
	}
}

// A failed re-list keeps the last good list and is not tried again before
// MinRefresh; with no good list, the failure itself is kept as long.
func TestCatalogKeepsStaleListWhenRelistFails(t *testing.T) {
	now := time.Unix(1000, 0)
	reg := &regFake{servers: []registry.Server{{Tenant: "a", Name: "one", URL: "https://one"}}}
	l := &listerFake{tools: map[string][]string{"one": {"x"}}}
	c := NewCatalog(reg, l, time.Minute, func() time.Time { return now })
	ctx := context.Background()
	resolve := func() (bool, []error) {
		t.Helper()
		_, ok, errs, err := c.Resolve(ctx, "a", "", "x")
		if err != nil {
			t.Fatal(err)
		}
		return ok, errs
	}
	if ok, _ := resolve(); !ok || l.calls != 1 {
		t.Fatalf("first resolve: %v, %d listings", ok, l.calls)
	}
	l.fail = errors.New("upstream down")
	now = now.Add(2 * time.Minute)
	for range 5 {
		if ok, errs := resolve(); !ok || len(errs) != 0 {
			t.Fatalf("stale list not served: %v %v", ok, errs)
		}
	}
	if l.calls != 2 {
		t.Fatalf("%d listings; want 2 (one failed re-list, then none for MinRefresh)", l.calls)
	}
	now = now.Add(MinRefresh)
	resolve()
	if l.calls != 3 {
		t.Fatalf("%d listings after MinRefresh; want 3", l.calls)
	}
	l.fail = nil
	now = now.Add(MinRefresh)
	resolve()
	if l.calls != 4 {
		t.Fatalf("%d listings once the upstream is back; want 4", l.calls)
	}

	// A server never listed: the failure is answered (and kept) for MinRefresh.
	reg.servers = append(reg.servers, registry.Server{Tenant: "a", Name: "two", URL: "https://two"})
	l.fail = errors.New("upstream down")
	calls := l.calls
	for range 3 {
		if _, errs, _ := c.View(ctx, "a", "two"); len(errs) != 1 {
			t.Fatalf("want the listing error reported: %v", errs)
		}
	}
	if l.calls != calls+1 {
		t.Fatalf("%d listings of a failing new server; want 1 within MinRefresh", l.calls-calls)
	}
}

// blockingLister lists after release is closed, counting listings.
type blockingLister struct {
	release chan struct{}
	mu      sync.Mutex
	calls   int
}

func (l *blockingLister) ListTools(ctx context.Context, _ *registry.Server, _ upstream.Caps) ([]Tool, error) {
	l.mu.Lock()
	l.calls++
	l.mu.Unlock()
	select {
	case <-l.release:
		return []Tool{{Name: "x", Def: json.RawMessage(`{"name":"x"}`)}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// One listing per server at a time, whoever asks; and a caller that gives
// up does not turn into a recorded failure of the server.
func TestCatalogListsOnceAndSurvivesCallerCancel(t *testing.T) {
	now := time.Unix(1000, 0)
	reg := &regFake{servers: []registry.Server{{Tenant: "a", Name: "one", URL: "https://one"}}}
	l := &blockingLister{release: make(chan struct{})}
	c := NewCatalog(reg, l, time.Minute, func() time.Time { return now })

	// The first caller gives up while the listing runs.
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan bool, 1)
	go func() {
		_, ok, _, _ := c.Resolve(ctx, "a", "", "x")
		gaveUp <- ok
	}()
	for l.count() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if ok := <-gaveUp; ok {
		t.Fatal("the cancelled caller resolved a tool nobody has listed yet")
	}
	// Others arrive while the same listing still runs, then it finishes.
	var wg sync.WaitGroup
	found := make(chan bool, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, _, err := c.Resolve(context.Background(), "a", "", "x")
			found <- ok && err == nil
		}()
	}
	time.Sleep(20 * time.Millisecond)
	close(l.release)
	wg.Wait()
	close(found)
	for ok := range found {
		if !ok {
			t.Fatal("a caller did not get the tool once the listing finished")
		}
	}
	if n := l.count(); n != 1 {
		t.Fatalf("%d listings for 9 callers; want 1", n)
	}
}

func (l *blockingLister) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}
