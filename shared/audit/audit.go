// Package audit defines the audit record: one for every outcome of every
// decidable call, refusals included, at either enforcement boundary. The
// gateway writes Record; `aegis wrap` writes its own line (shared/wrap),
// whose shared fields follow the same rules: one Outcome vocabulary, one
// params_hash format (ParamsKey.Hash, keyed with the deployment's params
// key) and one policy_hash format (PolicyHash), checked by Validate.
// docs/state.md lists the fields.
package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aegis-gw/aegis/shared/refusal"
)

// Outcome is how a decided call ended, the same word at both boundaries.
type Outcome string

// The four outcomes, the whole vocabulary.
const (
	OutcomeAllowed       Outcome = "allowed"       // let through: forwarded and answered (wrap: forwarded to the child); code 0, no word
	OutcomeRefused       Outcome = "refused"       // an aegis check refused it before it ran; code and word from shared/refusal
	OutcomeError         Outcome = "error"         // failed: an internal failure, the upstream unreachable, or the upstream's own JSON-RPC error (its code, no word)
	OutcomeIndeterminate Outcome = "indeterminate" // the upstream got the call and did not answer in time: it may have run
)

// Outcomes is every Outcome, in the order above.
var Outcomes = []Outcome{OutcomeAllowed, OutcomeRefused, OutcomeError, OutcomeIndeterminate}

// Valid reports whether o is one of Outcomes.
func (o Outcome) Valid() bool {
	switch o {
	case OutcomeAllowed, OutcomeRefused, OutcomeError, OutcomeIndeterminate:
		return true
	}
	return false
}

// Record is one audit record. Params are never stored, only their hash.
type Record struct {
	Time          time.Time `json:"time"`
	Tenant        string    `json:"tenant"`
	Caller        string    `json:"caller"`
	Session       string    `json:"session,omitempty"`
	CorrelationID string    `json:"correlation_id"`
	Layer         string    `json:"layer"` // "gateway" or "wrap"
	Method        string    `json:"method"`
	Server        string    `json:"server,omitempty"`
	Tool          string    `json:"tool,omitempty"`
	ParamsHash    string    `json:"params_hash,omitempty"` // ParamsKey.Hash of the tools/call arguments
	Code          int       `json:"code"`                  // 0 when allowed
	Word          string    `json:"word,omitempty"`        // refusal word, "" when allowed
	// Slot names the check that refused: a stage of the order of checks
	// (shared/pipeline: "session" ... "results"), or one of the Slot*
	// names below for a refusal made outside it. Set with every word, ""
	// when allowed. Both boundaries write it.
	Slot       string  `json:"slot,omitempty"`
	Outcome    Outcome `json:"outcome"`
	LatencyMs  float64 `json:"latency_ms"`
	PolicyHash string  `json:"policy_hash"` // PolicyHash of the set in force; PolicyHashNone for none
	// Degraded names the fail-open checks that could not decide and let
	// the call through (their store was unreachable).
	Degraded []string `json:"degraded,omitempty"`
	// Findings are what the content checks found and did (kinds and rule
	// ids, never values), at most MaxFindings; FindingsCut counts the
	// distinct findings past that bound.
	Findings    []Finding `json:"findings,omitempty"`
	FindingsCut int       `json:"findings_cut,omitempty"`
	// Detail is free text for decisions (who approved, why), never secrets.
	Detail string `json:"detail,omitempty"`
	// PolicyVerdict is the policy's verdict on the call ("allow",
	// "approve" or "deny"; "" when no policy decided it) and PolicyRule
	// the rule that decided (shared/policy's attribution, never shown to
	// the client). PolicyAudit: the tenant's policy is in audit mode, the
	// verdict is the intended one and was not enforced.
	PolicyVerdict string `json:"policy_verdict,omitempty"`
	PolicyRule    string `json:"policy_rule,omitempty"`
	PolicyAudit   bool   `json:"policy_audit,omitempty"`
	// Connection is the id of the caller's connection whose token the
	// call carried to a server with auth: oauth, or that a connection.*
	// event is about (shared/connect); never a token.
	Connection string `json:"connection,omitempty"`

	// The chain (shared/auditchain, docs/design/audit.md): the writer
	// that wrote the record (one process or Lambda execution environment,
	// per tenant), the record's sequence number in that writer's chain
	// (from 1), the hash of the writer's previous record (64 zeros for
	// the first) and this record's hash, each hash hex SHA-256. Set by
	// the chaining writer; empty on a record that was not chained.
	Writer string `json:"writer,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Prev   string `json:"prev,omitempty"`
	Hash   string `json:"hash,omitempty"`
}

// Validate reports the first rule r breaks, or nil. It is pure and cheap
// (no allocation on success), so writers may call it on every record.
//
//   - time, layer ("gateway" or "wrap"), method and policy_hash are set;
//     a gateway record also names its tenant, caller and correlation id
//     (wrap has none of them: shared/wrap validates its records by
//     projecting their shared fields onto a Record with layer "wrap");
//   - outcome is one of Outcomes;
//   - policy_hash is a hex SHA-256 (PolicyHash); params_hash, when set,
//     is keyed, "hmac-sha256:<key id>:<hex>" (ParamsKey.Hash); a
//     tools/call record has a params_hash;
//   - allowed has code 0, no word and no slot; refused and indeterminate
//     have a word; a record with a word names its slot; any word is a row of refusal.Table, and the code is that
//     row's code, or -32042 (refusal.CodeWrapRefused) at layer wrap. An
//     error without a word is the upstream's own JSON-RPC error, whose
//     code is passed through as it is.
func (r Record) Validate() error {
	switch {
	case r.Time.IsZero():
		return errors.New("audit: record has no time")
	case r.Method == "":
		return errors.New("audit: record has no method")
	case !r.Outcome.Valid():
		return fmt.Errorf("audit: unknown outcome %q", r.Outcome)
	case r.LatencyMs < 0:
		return fmt.Errorf("audit: negative latency_ms %g", r.LatencyMs)
	}
	switch refusal.Layer(r.Layer) {
	case refusal.LayerGateway:
		switch {
		case r.Tenant == "":
			return errors.New("audit: gateway record has no tenant")
		case r.Caller == "":
			return errors.New("audit: gateway record has no caller")
		case r.CorrelationID == "":
			return errors.New("audit: gateway record has no correlation_id")
		}
	case refusal.LayerWrap:
	default:
		return fmt.Errorf("audit: unknown layer %q (want gateway or wrap)", r.Layer)
	}
	if !IsHash(r.PolicyHash) {
		return fmt.Errorf("audit: policy_hash %q is not a hex SHA-256", r.PolicyHash)
	}
	if (r.ParamsHash != "" || r.Method == "tools/call") && !IsParamsHash(r.ParamsHash) {
		return fmt.Errorf("audit: params_hash %q is not a keyed hash (hmac-sha256:<key id>:<hex>)", r.ParamsHash)
	}
	return r.checkCode()
}

// checkCode is Validate's rule for code and word.
func (r Record) checkCode() error {
	if r.Outcome == OutcomeAllowed {
		if r.Code != 0 || r.Word != "" || r.Slot != "" {
			return fmt.Errorf("audit: allowed record has code %d word %q slot %q; want 0 and none", r.Code, r.Word, r.Slot)
		}
		return nil
	}
	if r.Word == "" {
		if r.Outcome != OutcomeError {
			return fmt.Errorf("audit: %s record has no word", r.Outcome)
		}
		return nil // the upstream's own error code
	}
	if r.Slot == "" {
		return fmt.Errorf("audit: %s record for %s names no slot", r.Outcome, r.Word)
	}
	var e *refusal.Entry
	for i := range refusal.Table {
		if string(refusal.Table[i].Word) == r.Word {
			e = &refusal.Table[i]
			break
		}
	}
	if e == nil {
		return fmt.Errorf("audit: word %q is not in the refusal table", r.Word)
	}
	want := e.Code
	if refusal.Layer(r.Layer) == refusal.LayerWrap {
		want = refusal.CodeWrapRefused
	}
	if refusal.Code(r.Code) != want {
		return fmt.Errorf("audit: %s record has code %d for %s; want %d", r.Layer, r.Code, r.Word, want)
	}
	return nil
}

// The slots of refusals made outside the gateway's order of checks. The
// order's own stages are named by shared/pipeline's Slot.String.
const (
	// SlotMethod: the gateway serves no such method (-32601), or serves it
	// on another endpoint.
	SlotMethod = "method"
	// SlotIdempotency: the idempotency ledger refused the key (-32602
	// other params, -32063 in flight).
	SlotIdempotency = "idempotency"
	// SlotSend: an allowed call was dropped before it was sent (-32603).
	SlotSend = "send"
	// SlotUpstream: the upstream call failed (-32000) or did not answer in
	// time (-32064).
	SlotUpstream = "upstream"
	// SlotStreams: the bound on the event streams one API key holds open
	// on an instance (-32004, scope "streams").
	SlotStreams = "streams"
	// SlotAsked: a client's answer that answers no outstanding request
	// of its session (-32600), or a server's request past the session's
	// bound on outstanding ones (-32004, scope "outstanding").
	SlotAsked = "asked"
	// SlotWrapPolicy: `aegis wrap`'s --policy gate (POLICY_DENIED,
	// PENDING_APPROVAL), an unreadable tool name included.
	SlotWrapPolicy = "policy"
	// SlotWrapAudit: `aegis wrap` could not write its audit file and
	// refused what it would have let through (INTERNAL_ERROR).
	SlotWrapAudit = "audit"
)

// Writer stores audit records. Write must not block a call for long; an
// implementation that cannot write logs the record to the structured log
// instead and returns the error.
type Writer interface {
	Write(ctx context.Context, r Record) error
}

// Query is a time-range read of one tenant's records.
type Query struct {
	Tenant string
	From   time.Time // inclusive
	To     time.Time // exclusive
	Limit  int
	Cursor string // opaque, from a previous page
}

// Reader answers audit queries, oldest first.
type Reader interface {
	Query(ctx context.Context, q Query) (recs []Record, next string, err error)
}
