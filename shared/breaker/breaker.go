// Package breaker is the pipeline's "breaker" slot: a circuit breaker and
// backpressure per tenant and upstream server, with state shared by every
// gateway process through a Store (shared/memstore, shared/dynamo).
//
// Circuit: after Threshold consecutive upstream failures (the -32000 and
// -32064 of the seed; an upstream's own JSON-RPC error is an answer, not a
// failure) the circuit opens and calls fast-fail with -32063 for Cooldown.
// Then exactly one call, the probe, goes through; its success closes the
// circuit and its failure opens it again. The transitions are one pure
// function of the shared record, a result and the injected clock (see
// machine.go). Results reach the breaker from the upstream client
// (upstream.Client.Observe → Check.Observe), so only what really happened
// upstream counts.
//
// Backpressure: at most MaxConcurrent calls in flight per tenant and
// server, counted across processes with leases that expire, so a process
// that dies mid-call frees its slot after LeaseTTL. The next call gets
// -32063.
//
// Reads: a process that read a circuit closed with no failures decides
// the calls of the next Reread (1 s) without reading it again; a failure it
// sees itself makes it read at once. Another process's opening of the
// circuit is so seen up to Reread late (docs/design/cost.md).
//
// When the store cannot be reached the check reports it and its stage fails
// open, like the limiter): the breaker protects upstreams, it is not an
// access control.
package breaker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// Options configure a Check.
type Options struct {
	Store         Store
	Threshold     int           // CIRCUIT_FAILURE_THRESHOLD; 0: 5
	Cooldown      time.Duration // CIRCUIT_COOLDOWN_SECS; 0: 10s
	MaxConcurrent int           // UPSTREAM_MAX_CONCURRENT; 0: no backpressure
	// LeaseTTL bounds how long a slot (and a half-open probe) stays taken
	// by a call whose process died. 0: 5×UpstreamTimeout + 10s, longer than
	// any call the upstream client can make (initialize and call, each
	// with its own deadline).
	LeaseTTL        time.Duration
	UpstreamTimeout time.Duration // for the LeaseTTL default; 0: 10s
	// Reread is how long a circuit this process read closed and clean
	// is taken as still so without reading it again (0: 1s; negative:
	// read on every call). A failure this process sees forgets it at
	// once. docs/design/cost.md, "The circuit read".
	Reread time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// Check is the breaker slot. It is safe for concurrent use.
type Check struct {
	o     Options
	clean cleanSet // circuits this process last read closed and clean, and when
}

// maxClean bounds the circuits a process remembers as clean: past it the
// set starts again empty (each circuit is then read once more). An entry
// is a key (a tenant and server name, at most a few hundred bytes) and a
// time, so the set stays under a few MB.
const maxClean = 4096

// cleanSet is the circuits a process last read closed with no failures,
// with the (injected) time of that read.
type cleanSet struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// fresh reports whether key was read clean less than d before now.
func (s *cleanSet) fresh(key string, now time.Time, d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.m[key]
	return ok && now.Sub(at) < d && !now.Before(at)
}

// has reports whether key is remembered clean, however long ago.
func (s *cleanSet) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[key]
	return ok
}

func (s *cleanSet) put(key string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || (len(s.m) >= maxClean && s.m[key].IsZero()) {
		s.m = make(map[string]time.Time)
	}
	s.m[key] = at
}

func (s *cleanSet) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// New returns the check; o is copied and defaults filled.
func New(o Options) *Check {
	if o.Threshold <= 0 {
		o.Threshold = 5
	}
	if o.Cooldown <= 0 {
		o.Cooldown = 10 * time.Second
	}
	if o.UpstreamTimeout <= 0 {
		o.UpstreamTimeout = 10 * time.Second
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 5*o.UpstreamTimeout + 10*time.Second
	}
	if o.Reread == 0 {
		o.Reread = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Check{o: o}
}

// Key is the breaker's key for a tenant's server.
func Key(tenant, server string) string { return tenant + "#" + server }

// Check implements pipeline.Check: it refuses with -32063 when the circuit
// is open (or half-open with its probe taken) or when MaxConcurrent calls
// are in flight, and otherwise registers the release of what it took.
func (k *Check) Check(ctx context.Context, c *pipeline.Call) error {
	decide, _ := k.Prefetch(ctx, c)
	return decide()
}

// Prefetch implements pipeline.Prefetcher. Only the circuit read starts
// early, in the same wave as the earlier checks' requests. What is scarce
// (the half-open probe, a concurrency lease) is taken in decide, once every
// earlier check has allowed the call: a call that an earlier check refuses
// never holds a slot that an allowed call then misses. undo (and the
// call's Finish) release what decide took.
func (k *Check) Prefetch(ctx context.Context, c *pipeline.Call) (func() error, func()) {
	if c.Server == nil {
		return func() error { return nil }, nil
	}
	// One record of what the closures below share: one allocation, not one
	// per variable they capture.
	p := &prefetched{key: Key(c.Tenant.ID, c.Server.Name), server: c.Server.Name, holder: newHolder(), now: k.o.Now()}
	waitRead := func() {}
	// A circuit this process read closed and clean within Reread is not
	// read again: the call is decided as the zero (closed, clean) record.
	if p.cached = k.clean.fresh(p.key, p.now, k.o.Reread); !p.cached {
		waitRead = c.Async(func() { p.first, p.firstErr = k.o.Store.Circuit(ctx, p.key) })
	}
	release := func() {
		p.released.Do(func() {
			bg := context.WithoutCancel(ctx)
			if p.leased {
				if err := k.o.Store.ReleaseLease(bg, p.key, p.holder); err != nil {
					k.o.Logger.WarnContext(bg, "breaker: lease not released; it expires on its own", "key", p.key, "err", err)
				}
			}
			if p.probe {
				k.giveBackProbe(bg, p.key, p.holder)
			}
		})
	}
	decide := func() error {
		waitRead()
		p.decided = true
		var ref *refusal.Refusal
		var unavailable error // the store could not answer: the stage fails open
		if !p.cached {
			p.probe, ref, unavailable = k.admit(ctx, p.key, p.server, p.holder, p.now, p.first, p.firstErr)
		}
		if ref != nil {
			release()
			return ref
		}
		if k.o.MaxConcurrent > 0 {
			ok, err := k.o.Store.AcquireLease(ctx, p.key, p.holder, k.o.MaxConcurrent, p.now, p.now.Add(k.o.LeaseTTL))
			switch {
			case err != nil:
				unavailable = errors.Join(unavailable, err)
			case !ok:
				release()
				return refusal.New(refusal.UpstreamUnavailable, fmt.Sprintf(
					"Upstream unavailable: %d calls to %s are in flight (UPSTREAM_MAX_CONCURRENT); retry shortly", k.o.MaxConcurrent, p.server))
			default:
				p.leased = true
			}
		}
		if p.leased || p.probe {
			p.handedOff = true
			// Its own store write, independent of the others that settle
			// the call (the audit record, an approval's settlement): they
			// run together.
			c.OnDoneAsync(func(audit.Outcome) { release() })
		}
		return unavailable
	}
	undo := func() {
		if !p.decided {
			waitRead() // nothing taken before decide
			return
		}
		if !p.handedOff { // else the call's Finish releases it
			release()
		}
	}
	return decide, undo
}

// prefetched is one call's state between Prefetch and its decide and
// undo: the circuit read, and what decide took (the probe, a lease).
type prefetched struct {
	key, server, holder string
	now                 time.Time
	first               Circuit
	firstErr            error
	probe, leased       bool
	cached              bool // decided from the clean set, not read
	decided             bool
	handedOff           bool // decide registered the release with the call
	released            sync.Once
}

// admit decides from the circuit record, read first (the prefetched read)
// and re-read after a lost race for the probe. probe is true when this call
// took the half-open probe; err is set when the store could not answer.
func (k *Check) admit(ctx context.Context, key, server, holder string, now time.Time, c Circuit, err error) (probe bool, ref *refusal.Refusal, _ error) {
	for round := range 3 {
		if round > 0 {
			c, err = k.o.Store.Circuit(ctx, key)
		}
		if err != nil {
			return false, nil, err
		}
		st := stateAt(c, now)
		if st == closed {
			if c.Failures == 0 {
				k.clean.put(key, now)
			} else {
				k.clean.forget(key)
			}
			return false, nil, nil
		}
		k.clean.forget(key)
		if st == open {
			secs := int(math.Ceil(c.OpenUntil.Sub(now).Seconds()))
			return false, refusal.New(refusal.UpstreamUnavailable, fmt.Sprintf(
				"Upstream unavailable: circuit open for %s after repeated upstream failures; retry in %ds", server, secs)), nil
		}
		if c.Probe != "" && now.Before(c.ProbeUntil) {
			return false, refusal.New(refusal.UpstreamUnavailable, fmt.Sprintf(
				"Upstream unavailable: circuit half-open for %s; a probe call is in flight", server)), nil
		}
		c.Probe, c.ProbeUntil = holder, now.Add(k.o.LeaseTTL)
		err = k.o.Store.PutCircuit(ctx, key, c)
		if err == nil {
			return true, nil, nil
		}
		if !isConflict(err) {
			return false, nil, err
		}
		err = nil
	}
	return false, refusal.New(refusal.UpstreamUnavailable, fmt.Sprintf(
		"Upstream unavailable: circuit half-open for %s; a probe call is in flight", server)), nil
}

// giveBackProbe frees the probe if holder still has it: the call ended
// without a result reaching the breaker (answered from the idempotency
// ledger, or abandoned by its client).
func (k *Check) giveBackProbe(ctx context.Context, key, holder string) {
	for range 3 {
		c, err := k.o.Store.Circuit(ctx, key)
		if err != nil || c.Probe != holder {
			return
		}
		c.Probe, c.ProbeUntil = "", time.Time{}
		if err := k.o.Store.PutCircuit(ctx, key, c); err == nil || !isConflict(err) {
			return
		}
	}
}

// Observe records an upstream result; wire it as upstream.Client.Observe.
// Failures (upstream.IsFailure) count; anything else that came back is a
// success. Errors of the store are logged: a lost result only delays the
// circuit's reaction.
func (k *Check) Observe(srv *registry.Server, err error) {
	key := Key(srv.Tenant, srv.Name)
	failed := upstream.IsFailure(err)
	if !failed {
		if err != nil {
			return // not the upstream's doing (e.g. credential unavailable)
		}
		if k.clean.has(key) {
			return // closed and clean when this call was admitted: nothing to reset
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if failed {
		k.clean.forget(key)
	}
	if rerr := k.record(ctx, key, failed); rerr != nil {
		k.o.Logger.WarnContext(ctx, "breaker: result not recorded", "key", key, "failed", failed, "err", rerr)
	}
}

func newHolder() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var _ pipeline.Prefetcher = (*Check)(nil)
