package registry

import (
	"context"
	"fmt"
	"time"
)

// MaxPolicyBytes bounds a tenant's stored policy source: a DynamoDB item
// holds 400 KB, and a policy this large is already far past what anyone
// reviews.
const MaxPolicyBytes = 256 << 10

// Policy is a tenant's policy set as an operator wrote it (config file or
// admin API): Source is the set as YAML or JSON (shared/policy.ParseSet
// reads it), kept as sent so that GET returns what was PUT. The registry
// stores it and does not read it; whoever writes it has parsed it first.
// Its hash is policy.Hash of the parsed set, computed by its readers: one
// function, never a stored copy that could disagree.
type Policy struct {
	Tenant  string    `json:"tenant"`
	Source  string    `json:"source"`
	Updated time.Time `json:"updated"`
}

// Validate checks what the registry itself requires of p: a valid tenant
// id and a source within MaxPolicyBytes. Whether the source parses is
// shared/policy's to say.
func (p Policy) Validate() error {
	if err := ValidateTenantID(p.Tenant); err != nil {
		return fmt.Errorf("policy: tenant %q: %w", p.Tenant, err)
	}
	if len(p.Source) > MaxPolicyBytes {
		return fmt.Errorf("policy: %d bytes, over the %d-byte limit", len(p.Source), MaxPolicyBytes)
	}
	return nil
}

// PolicyStore keeps each tenant's policy set. Policy returns
// store.ErrNotFound for a tenant with no stored set (the gateway then
// loads the empty set: every call allowed). PutPolicy stores (or
// replaces) a tenant's set; the tenant must exist (store.ErrNotFound
// otherwise). Last writer wins.
type PolicyStore interface {
	Policy(ctx context.Context, tenant string) (Policy, error)
	PutPolicy(ctx context.Context, p Policy) error
}
