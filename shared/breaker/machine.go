package breaker

import (
	"context"
	"errors"
	"time"

	"github.com/aegis-gw/aegis/shared/store"
)

// The circuit's state machine is transition, a pure function of the stored
// record, one upstream result and the gateway clock's reading (Options.Now,
// the only time source). A result is recorded by one conditional
// read-modify-write of the record (Check.record); admission reads the same
// record (Check.admit) through stateAt, so both agree on every instant.

// state is a circuit's state at an instant, derived from its record.
type state int

const (
	closed   state = iota // OpenUntil zero: calls go through, failures count
	open                  // now before OpenUntil: calls fast-fail
	halfOpen              // OpenUntil reached: one probe call goes through
)

func (s state) String() string {
	switch s {
	case closed:
		return "closed"
	case open:
		return "open"
	default:
		return "half-open"
	}
}

// stateAt is c's state at now. Only OpenUntil decides: it is written with
// every transition, also by earlier versions that kept gobreaker's JSON in
// State, which is no longer read.
func stateAt(c Circuit, now time.Time) state {
	switch {
	case c.OpenUntil.IsZero():
		return closed
	case now.Before(c.OpenUntil):
		return open
	default:
		return halfOpen
	}
}

// transition returns the record after one upstream result (failed or a
// success) observed at now, and whether it differs from c (false: nothing
// to write).
//
//	closed    success  → closed, Failures 0
//	closed    failure  → closed, Failures+1; open for cooldown once Failures ≥ threshold
//	open      any      → unchanged: the result of a call admitted before the circuit opened
//	half-open success  → closed, Failures 0
//	half-open failure  → open for cooldown from now
//
// Every change frees the probe (only leaving half-open can have one).
// Failures counts the consecutive failures, the ones that opened the
// circuit included.
func transition(c Circuit, failed bool, now time.Time, threshold int, cooldown time.Duration) (Circuit, bool) {
	next := c
	next.State = nil // gobreaker's, from earlier versions: stale once written over
	next.Probe, next.ProbeUntil = "", time.Time{}
	switch st := stateAt(c, now); {
	case st == open:
		return c, false
	case !failed && st == closed && c.Failures == 0:
		return c, false // closed and clean (or never written)
	case !failed:
		next.Failures, next.OpenUntil = 0, time.Time{}
	case st == halfOpen || c.Failures+1 >= threshold:
		next.Failures, next.OpenUntil = c.Failures+1, now.Add(cooldown)
	default:
		next.Failures++
	}
	return next, true
}

// record stores one result (failed or not) on the circuit of key, retrying
// a lost race a few times: each attempt reads the record again and applies
// transition to what another process left.
func (k *Check) record(ctx context.Context, key string, failed bool) error {
	var err error
	for range 4 {
		var c Circuit
		c, err = k.o.Store.Circuit(ctx, key)
		if err != nil {
			return err
		}
		next, changed := transition(c, failed, k.o.Now(), k.o.Threshold, k.o.Cooldown)
		if !changed {
			return nil
		}
		if err = k.o.Store.PutCircuit(ctx, key, next); !isConflict(err) {
			return err
		}
	}
	return err
}

func isConflict(err error) bool { return errors.Is(err, store.ErrConflict) }

// StateAt is the name of c's state at now: "closed", "open" or
// "half-open", as the check decides on it (for operators: metrics, the
// admin API).
func StateAt(c Circuit, now time.Time) string { return stateAt(c, now).String() }
