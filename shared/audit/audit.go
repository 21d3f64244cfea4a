// Package audit defines the audit record: one for every outcome of every
// decidable call, refusals included.
package audit

import (
	"context"
	"time"
)

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
	ParamsHash    string    `json:"params_hash,omitempty"`
	Code          int       `json:"code"`           // 0 when allowed
	Word          string    `json:"word,omitempty"` // refusal word, "" when allowed
	Outcome       string    `json:"outcome"`        // allowed, refused, error, indeterminate
	LatencyMs     float64   `json:"latency_ms"`
	PolicyHash    string    `json:"policy_hash"`
	// Degraded names the fail-open checks that could not decide and let
	// the call through (their store was unreachable).
	Degraded []string `json:"degraded,omitempty"`
	// Detail is free text for decisions (who approved, why), never secrets.
	Detail string `json:"detail,omitempty"`
}

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
