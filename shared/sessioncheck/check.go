// Package sessioncheck is the pipeline's "session" slot.
package sessioncheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

// Check is the pipeline's "session" slot. A call without a session id gets
// a new session; a known, unexpired one is touched (one store operation);
// anything else — including a session opened by another caller — is the
// -32603 session error. Over MCP (/mcp) a session must have been opened by
// initialize (which always mints one): no Mcp-Session-Id is -32600. When the store cannot be reached
// the check returns the error with a session that carries no upstream
// state (the upstream is initialized afresh), and its stage fails open:
// sessions are not an access control (the API key is), and a DynamoDB
// outage must not stop every tool call — the same choice the seed makes
// for the rate limiter.
type Check struct {
	store  session.Store
	limits session.Limits
	now    func() time.Time
	log    *slog.Logger
}

// NewCheck returns the session check.
func New(s session.Store, l session.Limits, now func() time.Time, log *slog.Logger) *Check {
	return &Check{store: s, limits: l, now: now, log: log}
}

// Check implements pipeline.Check.
func (k *Check) Check(ctx context.Context, c *pipeline.Call) error {
	decide, _ := k.Prefetch(ctx, c)
	return decide()
}

// Prefetch implements pipeline.Prefetcher: the session id is settled at
// once (minted when the client sent none), so later checks can key on it,
// and the store operation runs while they start theirs.
func (k *Check) Prefetch(ctx context.Context, c *pipeline.Call) (func() error, func()) {
	now := k.now()
	if c.MCP && c.SessionID == "" && pipeline.ScopeOf(c.Method) != pipeline.Opening {
		return func() error {
			return refusal.New(refusal.InvalidRequest, "Invalid request: Mcp-Session-Id header is required; send initialize first")
		}, nil
	}
	if c.SessionID == "" {
		r := session.Record{ID: NewID(), Tenant: c.Tenant.ID, Caller: c.Caller, Created: now, LastSeen: now}
		c.SessionID, c.NewSession = r.ID, true
		var err error
		wait := c.Async(func() { err = k.store.Create(ctx, r) })
		return func() error {
			wait()
			c.Session = r
			return err // not stored: the stage fails open
		}, nil
	}
	var res struct {
		r   session.Record
		err error
	}
	tenant, id := c.Tenant.ID, c.SessionID
	wait := c.Async(func() { res.r, res.err = k.store.Touch(ctx, tenant, id, now, k.limits) })
	return func() error {
		wait()
		switch {
		case errors.Is(res.err, store.ErrNotFound):
			return refusal.Session()
		case res.err != nil:
			// Not checked: the stage fails open, without upstream session state.
			c.Session = session.Record{ID: c.SessionID, Tenant: c.Tenant.ID, Caller: c.Caller, Created: now, LastSeen: now}
			return res.err
		case res.r.Caller != c.Caller:
			// A session belongs to the caller that opened it; another key
			// of the same tenant cannot continue it.
			return refusal.Session()
		}
		c.Session = res.r
		return nil
	}, nil
}

// NewID returns a new session id: 128 random bits, hex.
func NewID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("session: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

var _ pipeline.Prefetcher = (*Check)(nil)
