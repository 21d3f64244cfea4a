package breaker

import (
	"context"
	"time"
)

// Circuit is the shared record of one circuit (one tenant and server).
// Writes are conditional on Version, so two gateway processes that race on
// a transition cannot both win.
type Circuit struct {
	// State is no longer read, and is written as nil. Earlier versions
	// kept gobreaker's SharedState here as JSON (with OpenUntil and
	// Failures derived from it on every write, so those fields alone
	// describe such a record too).
	State []byte
	// OpenUntil is zero while closed, the end of the cooldown while open,
	// and a past instant once half-open. Failures counts consecutive
	// upstream failures; a success while closed or half-open resets it.
	// See transition (machine.go).
	OpenUntil time.Time
	Failures  int
	// Probe names the call that holds the half-open probe until ProbeUntil
	// ("" = none). A probe whose holder died is free again after ProbeUntil.
	Probe      string
	ProbeUntil time.Time
	// Version is 0 for a circuit never written; each write stores
	// Version+1.
	Version int64
}

// Store keeps circuits and in-flight leases, shared by every gateway
// process (shared/memstore, shared/dynamo). Store errors wrap
// store.ErrUnavailable; a lost condition is store.ErrConflict.
type Store interface {
	// Circuit returns the record for key; a zero Circuit when absent.
	Circuit(ctx context.Context, key string) (Circuit, error)
	// PutCircuit stores c under key if the stored version is still
	// c.Version (0: the record must be absent), as version c.Version+1.
	// store.ErrConflict otherwise.
	PutCircuit(ctx context.Context, key string, c Circuit) error

	// AcquireLease takes one of limit in-flight slots of key for holder,
	// until expires. Leases whose expiry is not after now do not count
	// (a process that died mid-call frees its slot when the lease ends).
	// It reports false when limit live leases are held.
	AcquireLease(ctx context.Context, key, holder string, limit int, now, expires time.Time) (bool, error)
	// ReleaseLease gives holder's slot back; releasing an absent lease is
	// not an error.
	ReleaseLease(ctx context.Context, key, holder string) error
	// InFlight counts the live leases of key at now (read-only, for
	// operators: the admin API's upstream state). Expired leases do not
	// count and are not removed.
	InFlight(ctx context.Context, key string, now time.Time) (int, error)
}
