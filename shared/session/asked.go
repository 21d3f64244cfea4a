package session

import (
	"context"
	"errors"
	"time"
)

// Asked is one request a server sent a session's client (sampling,
// elicitation, roots, ping), relayed and not yet answered: the only thing
// a client's answer may answer. It is kept in the session's record in the
// store, so that an answer that reaches any instance (a Lambda) finds it.
type Asked struct {
	Server  string    // the server that asked
	Method  string    // its request's method
	Expires time.Time // after this the answer is refused
}

// Bounds of a session's outstanding requests: at most MaxAsked at once,
// each named by a key of at most MaxAskedKeyBytes (the id the client was
// given) and a method of at most MaxAskedMethodBytes, each answerable for
// AskedTTL after it was relayed. A server's request past a bound is not
// relayed (the server gets a refusal as the answer).
const (
	MaxAsked            = 16
	MaxAskedKeyBytes    = 256
	MaxAskedMethodBytes = 64
	AskedTTL            = 5 * time.Minute
)

// ErrTooManyAsked: the session has MaxAsked unexpired requests
// outstanding; Ask keeps nothing.
var ErrTooManyAsked = errors.New("session: too many server requests outstanding")

// Outstanding keeps each session's outstanding server requests (Asked),
// bounded by MaxAsked. Both operations check expiry themselves.
type Outstanding interface {
	// Ask records that the client of session tenant/id owes an answer
	// to key, a's request, until a.Expires. Expired entries are dropped
	// to make room; ErrTooManyAsked when MaxAsked unexpired ones remain;
	// store.ErrNotFound when the session does not exist. A key asked
	// again replaces its entry.
	Ask(ctx context.Context, tenant, id, key string, a Asked, now time.Time) error
	// Answer takes key off the session's outstanding set and returns
	// what was asked, once: a second Answer of the same key, a key never
	// asked, one expired at now, or a session that does not exist is
	// store.ErrNotFound.
	Answer(ctx context.Context, tenant, id, key string, now time.Time) (Asked, error)
}
