// Package store holds what every state implementation shares: the errors a
// caller branches on. The interfaces themselves live next to their users
// (session.Store, registry.Reader, ...); the implementations are
// shared/memstore (embedded, for `aegis serve`) and shared/dynamo (DynamoDB).
package store

import "errors"

var (
	// ErrNotFound: no such item, or it has expired (expiry is part of the
	// lookup's condition, never left to TTL deletion).
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: a conditional write lost (already decided, already
	// exists, limit reached, version moved on).
	ErrConflict = errors.New("store: conflict")
	// ErrUnavailable: the backing store could not be reached or answered
	// with a server-side failure. Callers decide whether to fail open or
	// closed; they must not treat it as "not found".
	ErrUnavailable = errors.New("store: unavailable")
)
