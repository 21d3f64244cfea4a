package breaker

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/aegis-gw/aegis/shared/store"
)

// The circuit's transitions are gobreaker's: a result is recorded by
// loading the shared record into a gobreaker.DistributedCircuitBreaker
// whose SharedDataStore is one conditional read-modify-write on Store
// (shared below), and running Execute with a function that only returns
// the result. gobreaker never wraps the upstream call itself: its lock
// would be held for the whole call, and it takes no context. Admission is
// read straight from the derived fields of Circuit (Check.admit).
//
// gobreaker reads time.Now; the shared record keeps the gateway clock's
// times, and shared shifts them by (time.Now() - clock) on the way in and
// back on the way out, so an injected clock drives the cooldown.

// errRecorded tells Execute the result was stored as a success or failure;
// nothing else flows through gobreaker.
var errFailure = errors.New("upstream failure")

// shared is a gobreaker.SharedDataStore over one circuit record, for one
// recording.
type shared struct {
	ctx   context.Context
	st    Store
	key   string
	now   func() time.Time
	c     Circuit // as last read or written
	shift time.Duration
}

func (s *shared) Lock(string) error   { return nil } // writes are conditional instead
func (s *shared) Unlock(string) error { return nil }

func (s *shared) GetData(string) ([]byte, error) {
	if len(s.c.State) == 0 {
		return nil, nil
	}
	var ss gobreaker.SharedState
	if err := json.Unmarshal(s.c.State, &ss); err != nil {
		return nil, nil // unreadable state: start closed
	}
	ss.Start = shiftTime(ss.Start, s.shift)
	ss.Expiry = shiftTime(ss.Expiry, s.shift)
	return json.Marshal(ss)
}

func (s *shared) SetData(_ string, data []byte) error {
	var ss gobreaker.SharedState
	if err := json.Unmarshal(data, &ss); err != nil {
		return err
	}
	ss.Start = shiftTime(ss.Start, -s.shift)
	ss.Expiry = shiftTime(ss.Expiry, -s.shift)
	b, err := json.Marshal(ss)
	if err != nil {
		return err
	}
	next := s.c
	next.State = b
	next.Failures = int(ss.Counts.ConsecutiveFailures)
	switch ss.State {
	case gobreaker.StateClosed:
		next.OpenUntil = time.Time{}
	case gobreaker.StateOpen:
		next.OpenUntil = ss.Expiry
	default: // half-open
		next.OpenUntil = ss.Start
	}
	if ss.State != gobreaker.StateHalfOpen {
		next.Probe, next.ProbeUntil = "", time.Time{}
	}
	if err := s.st.PutCircuit(s.ctx, s.key, next); err != nil {
		return err
	}
	next.Version++
	s.c = next
	return nil
}

func shiftTime(t time.Time, d time.Duration) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(d)
}

// record stores one result (failed or not) on the circuit of key through
// gobreaker's state machine, retrying a lost race a few times.
func (k *Check) record(ctx context.Context, key string, failed bool) error {
	var err error
	for range 4 {
		var c Circuit
		c, err = k.o.Store.Circuit(ctx, key)
		if err != nil {
			return err
		}
		if !failed && c.Version != 0 && c.OpenUntil.IsZero() && c.Failures == 0 {
			return nil // closed and clean: nothing to write
		}
		if !failed && c.Version == 0 {
			return nil
		}
		sh := &shared{ctx: ctx, st: k.o.Store, key: key, now: k.o.Now, c: c, shift: time.Since(k.o.Now())}
		var dcb *gobreaker.DistributedCircuitBreaker[struct{}]
		dcb, err = gobreaker.NewDistributedCircuitBreaker[struct{}](sh, k.settings)
		if err == nil {
			_, err = dcb.Execute(func() (struct{}, error) {
				if failed {
					return struct{}{}, errFailure
				}
				return struct{}{}, nil
			})
		}
		switch {
		case err == nil, errors.Is(err, errFailure),
			errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests):
			// Recorded, or ignored by gobreaker (a result arriving while
			// the circuit is open belongs to an older generation).
			return nil
		case errors.Is(err, store.ErrConflict):
			continue // another process moved the circuit on: reload
		default:
			return err
		}
	}
	return err
}

func isConflict(err error) bool { return errors.Is(err, store.ErrConflict) }
