package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/config"
)

// switchable answers 500 while failing is set, and a result otherwise.
type switchable struct {
	mu      sync.Mutex
	failing bool
}

func (s *switchable) set(f bool) { s.mu.Lock(); s.failing = f; s.mu.Unlock() }

func (s *switchable) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	s.mu.Lock()
	f := s.failing
	s.mu.Unlock()
	if f {
		http.Error(w, "down", http.StatusBadGateway)
		return
	}
	okCall("fine")(w, r, body)
}

func breakerSettings(s *config.Settings) {
	s.CircuitFailureThreshold = 3
	s.CircuitCooldown = 10 * time.Second
}

func TestBreakerOpensProbesCloses(t *testing.T) {
	sw := &switchable{failing: true}
	up := startRaw(t, sw.handle)
	e := newUpEnv(t, up.URL, upOpts{settings: breakerSettings})
	for i := range 3 {
		if r := e.invoke(t, "work", `{}`); r.code() != -32000 {
			t.Fatalf("failure %d: %s", i, r.Raw)
		}
	}
	// Open: fast-fail without reaching the upstream.
	for range 2 {
		r := e.invoke(t, "work", `{}`)
		if r.code() != -32063 || !strings.Contains(r.Error.Message, "circuit open") {
			t.Fatalf("open circuit answered %s; want -32063", r.Raw)
		}
		rec := e.Audit.await(t, r.Corr)
		if rec.Outcome != "refused" || rec.Word != "UPSTREAM_UNAVAILABLE" {
			t.Errorf("audit %+v", rec)
		}
	}
	if n := up.calls.Load(); n != 3 {
		t.Fatalf("upstream saw %d calls; want 3 (open circuit fast-fails)", n)
	}
	// Still open just before the cooldown ends.
	e.Clock.Advance(9 * time.Second)
	if r := e.invoke(t, "work", `{}`); r.code() != -32063 {
		t.Fatalf("before cooldown: %s", r.Raw)
	}
	// After the cooldown one probe goes through; it fails: open again.
	e.Clock.Advance(2 * time.Second)
	if r := e.invoke(t, "work", `{}`); r.code() != -32000 {
		t.Fatalf("probe: %s", r.Raw)
	}
	if r := e.invoke(t, "work", `{}`); r.code() != -32063 {
		t.Fatalf("after failed probe: %s; want open again", r.Raw)
	}
	// Next cooldown: the probe succeeds and closes the circuit.
	sw.set(false)
	e.Clock.Advance(11 * time.Second)
	for i := range 3 {
		if r := e.invoke(t, "work", `{}`); r.code() != 0 {
			t.Fatalf("call %d after successful probe: %s", i, r.Raw)
		}
	}
	if n := up.calls.Load(); n != 3+1+1+2 {
		t.Fatalf("upstream saw %d calls; want 7", n)
	}
}

func TestBreakerOneProbeAtATime(t *testing.T) {
	sw := &switchable{failing: true}
	release := make(chan struct{})
	arrived := make(chan struct{}, 8)
	up := startRaw(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		sw.mu.Lock()
		f := sw.failing
		sw.mu.Unlock()
		if f {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		arrived <- struct{}{}
		<-release
		okCall("fine")(w, r, body)
	})
	e := newUpEnv(t, up.URL, upOpts{settings: breakerSettings})
	for range 3 {
		e.invoke(t, "work", `{}`)
	}
	sw.set(false)
	e.Clock.Advance(11 * time.Second)
	done := make(chan upReply, 1)
	go func() { done <- e.invoke(t, "work", `{}`) }()
	<-arrived // the probe is at the upstream
	for range 3 {
		r := e.invoke(t, "work", `{}`)
		if r.code() != -32063 || !strings.Contains(r.Error.Message, "probe") {
			t.Fatalf("while the probe is in flight: %s; want -32063", r.Raw)
		}
	}
	close(release)
	if r := <-done; r.code() != 0 {
		t.Fatalf("probe: %s", r.Raw)
	}
	if r := e.invoke(t, "work", `{}`); r.code() != 0 {
		t.Fatalf("after the probe: %s", r.Raw)
	}
}

func TestBreakerSharedByTwoGateways(t *testing.T) {
	sw := &switchable{failing: true}
	up := startRaw(t, sw.handle)
	a := newUpEnv(t, up.URL, upOpts{settings: breakerSettings})
	b := newUpEnv(t, up.URL, upOpts{settings: breakerSettings, store: a.Store, clock: a.Clock})
	// Failures seen by both processes add up.
	a.invoke(t, "work", `{}`)
	b.invoke(t, "work", `{}`)
	a.invoke(t, "work", `{}`)
	for _, g := range []*upEnv{a, b} {
		if r := g.invoke(t, "work", `{}`); r.code() != -32063 {
			t.Fatalf("after 3 failures across two gateways: %s; want -32063 from both", r.Raw)
		}
	}
	sw.set(false)
	a.Clock.Advance(11 * time.Second)
	if r := b.invoke(t, "work", `{}`); r.code() != 0 { // b's probe closes it for both
		t.Fatalf("probe through b: %s", r.Raw)
	}
	if r := a.invoke(t, "work", `{}`); r.code() != 0 {
		t.Fatalf("a after b's probe: %s", r.Raw)
	}
	if n := up.calls.Load(); n != 5 {
		t.Fatalf("upstream saw %d calls; want 5", n)
	}
}

func TestTimeoutsCountAgainstBreaker(t *testing.T) {
	up := startRaw(t, func(_ http.ResponseWriter, r *http.Request, _ []byte) { <-r.Context().Done() })
	e := newUpEnv(t, up.URL, upOpts{settings: func(s *config.Settings) { s.CircuitFailureThreshold = 2 }})
	for range 2 {
		if r := e.invoke(t, "work", `{}`); r.code() != -32064 {
			t.Fatal(r.Raw)
		}
	}
	if r := e.invoke(t, "work", `{}`); r.code() != -32063 {
		t.Fatalf("after 2 timeouts: %s; want -32063", r.Raw)
	}
}

func TestBackpressure(t *testing.T) {
	release := make(chan struct{})
	up := startRaw(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), `"name":"work"`) {
			<-release
		}
		okCall("slow")(w, r, body)
	})
	e := newUpEnv(t, up.URL, upOpts{settings: func(s *config.Settings) { s.UpstreamMaxConcurrent = 2 }})
	if r := e.invoke(t, "other", `{}`); r.code() != 0 { // warms the catalog
		t.Fatal(r.Raw)
	}
	results := make(chan upReply, 5)
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() { defer wg.Done(); results <- e.invoke(t, "work", `{}`) }()
	}
	// Three are refused while two wait at the upstream.
	refused := 0
	for refused < 3 {
		r := <-results
		if r.code() != -32063 || !strings.Contains(r.Error.Message, "in flight") {
			t.Fatalf("while 2 are in flight: %s; want -32063", r.Raw)
		}
		refused++
	}
	close(release)
	wg.Wait()
	close(results)
	for r := range results {
		if r.code() != 0 {
			t.Fatalf("admitted call: %s", r.Raw)
		}
	}
	if n := up.calls.Load(); n != 1+2 {
		t.Fatalf("upstream saw %d tools/call; want 2 (+1 warm-up)", n)
	}
	// Slots are given back.
	if r := e.invoke(t, "other", `{}`); r.code() != 0 {
		t.Fatal(r.Raw)
	}
}

func TestIdempotencyKey(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	up := startRaw(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var p struct {
			Params struct {
				Arguments struct {
					Block bool `json:"block"`
				} `json:"arguments"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &p)
		if p.Params.Arguments.Block {
			<-release
		}
		okCall("ran")(w, r, body)
	})
	e := newUpEnv(t, up.URL, upOpts{})
	first := e.invoke(t, "work", `{"n":1,"m":2}`, "Idempotency-Key", "pay-42")
	if first.code() != 0 {
		t.Fatal(first.Raw)
	}
	// Same key, same params (other key order): the recorded answer, no
	// second upstream call.
	again := e.invoke(t, "work", `{"m":2, "n":1}`, "Idempotency-Key", "pay-42")
	if again.code() != 0 || string(again.Result) != string(first.Result) {
		t.Fatalf("retry answered %s; want %s", again.Raw, first.Raw)
	}
	if n := up.calls.Load(); n != 1 {
		t.Fatalf("upstream saw %d calls; want 1", n)
	}
	// Same key, other params: -32602.
	if r := e.invoke(t, "work", `{"n":2}`, "Idempotency-Key", "pay-42"); r.code() != -32602 {
		t.Fatalf("other params: %s; want -32602", r.Raw)
	}
	// Another tenant's... same tenant other key: a new call.
	if r := e.invoke(t, "work", `{"n":1,"m":2}`, "Idempotency-Key", "pay-43"); r.code() != 0 || up.calls.Load() != 2 {
		t.Fatalf("other key: %s, %d calls", r.Raw, up.calls.Load())
	}
	// In flight: -32063.
	done := make(chan upReply, 1)
	go func() { done <- e.invoke(t, "work", `{"block":true}`, "Idempotency-Key", "slow-1") }()
	deadline := time.Now().Add(3 * time.Second)
	for up.calls.Load() != 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if r := e.invoke(t, "work", `{"block":true}`, "Idempotency-Key", "slow-1"); r.code() != -32063 {
		t.Fatalf("while in flight: %s; want -32063", r.Raw)
	}
	once.Do(func() { close(release) })
	if r := <-done; r.code() != 0 {
		t.Fatal(r.Raw)
	}
	if r := e.invoke(t, "work", `{"block":true}`, "Idempotency-Key", "slow-1"); r.code() != 0 || up.calls.Load() != 3 {
		t.Fatalf("after completion: %s, %d calls; want the recorded answer", r.Raw, up.calls.Load())
	}
}

func TestIdempotencyAfterTimeoutGoesUpstreamAgain(t *testing.T) {
	var mu sync.Mutex
	hang := true
	up := startRaw(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		mu.Lock()
		h := hang
		mu.Unlock()
		if h {
			<-r.Context().Done()
			return
		}
		okCall("ran")(w, r, body)
	})
	e := newUpEnv(t, up.URL, upOpts{})
	if r := e.invoke(t, "work", `{}`, "Idempotency-Key", "k"); r.code() != -32064 {
		t.Fatal(r.Raw)
	}
	mu.Lock()
	hang = false
	mu.Unlock()
	// The retry with the SAME key (the seed's guidance) reaches the
	// upstream, carrying the key so the upstream can deduplicate.
	if r := e.invoke(t, "work", `{}`, "Idempotency-Key", "k"); r.code() != 0 {
		t.Fatal(r.Raw)
	}
	if n := up.calls.Load(); n != 2 {
		t.Fatalf("upstream saw %d calls; want 2", n)
	}
	hdr, _ := up.lastCall()
	if hdr.Get("Idempotency-Key") != "k" {
		t.Fatal("key not forwarded on the retry")
	}
}

// An open circuit keeps protecting a dead upstream after the tool catalog
// has gone stale: routing keeps the last list it had when a re-list fails
// (and tries again at most every route.MinRefresh), so the breaker answers
// -32063 instead of each call re-listing the dead upstream and getting
// -32000 (with a hanging upstream, twice UPSTREAM_TIMEOUT_SECS per call).
func TestOpenCircuitWithStaleCatalog(t *testing.T) {
	up := startRaw(t, okCall("fine"))
	e := newUpEnv(t, up.URL, upOpts{settings: func(s *config.Settings) {
		s.CircuitFailureThreshold = 3
		s.CircuitCooldown = 10 * time.Minute
	}})
	if r := e.invoke(t, "work", `{}`); r.code() != 0 {
		t.Fatalf("warm-up: %s", r.Raw)
	}
	up.down.Store(true)
	for i := range 3 {
		if r := e.invoke(t, "work", `{}`); r.code() != -32000 {
			t.Fatalf("failure %d: %s", i, r.Raw)
		}
	}
	e.Clock.Advance(2 * time.Minute) // past the catalog's one-minute TTL
	before := up.requests.Load()
	for i := range 3 {
		r := e.invoke(t, "work", `{}`)
		if r.code() != -32063 {
			t.Fatalf("call %d with the circuit open and the catalog stale: %s; want -32063", i, r.Raw)
		}
	}
	// One re-list attempt at most (it failed; the next is MinRefresh away).
	if n := up.requests.Load() - before; n > 3 {
		t.Fatalf("the dead upstream got %d requests from 3 refused calls; want at most one re-list (discover, initialize)", n)
	}
}
