// Package backend names the one value a state store hands the gateway and
// the admin API: every concern's store interface in one. The embedded store
// (shared/memstore) and DynamoDB (shared/dynamo) each implement all of it,
// pinned by compile-time guards in those packages, so a store that lacks a
// capability does not build; nothing is found by a type assertion at run
// time and nothing is silently left out. shared/storetest runs one contract
// over a Backend, on both stores.
//
// The interfaces themselves live next to their users (design §3.4); adding
// a stateful check adds its store interface here, implements it in both
// stores and adds its contract to storetest.
package backend

import (
	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/breaker"
	"github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/idempotency"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/ratelimit"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/tenantview"
)

// Backend is every store the gateway and the admin API need.
type Backend interface {
	registry.Store        // tenants, servers, keys
	session.Store         // gateway sessions and their upstream sessions
	session.Counter       // the session manifest's counters
	session.Admitter      // the session's own rate windows, counted with its touch
	session.Outstanding   // the server requests a session's client owes an answer
	audit.Writer          // one record per decision
	audit.Reader          // the audit trail, for operators
	audit.KeyStore        // the params keys params_hash is keyed with
	audit.CheckpointStore // signed checkpoints of the audit chains (shared/auditchain)
	approval.Store        // calls held for a human
	ratelimit.Counter     // rate windows and the monthly meter (quota.Meter)
	killswitch.Store      // stopped tools and servers
	breaker.Store         // circuits and in-flight leases
	idempotency.Store     // the Idempotency-Key ledger
	registry.PinStore     // rug-pull pins of tool definitions
	tenantview.Reader     // a tenant's record, servers, stops and pins in one read
	connect.Store         // callers' connections to servers with auth: oauth

	// InProcess reports whether every store lives in this process (the
	// embedded store): checks then do their store work inline rather than
	// on goroutines (pipeline.Call.Inline).
	InProcess() bool
}
