// Package registry describes who aegis serves: tenants, their upstream MCP
// servers with per-tool settings, and their API keys (stored as hashes).
package registry

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aegis-gw/aegis/shared/policy"
)

// Tiers of the monthly quota.
const (
	TierFree       = "free"
	TierGrowth     = "growth"
	TierEnterprise = "enterprise"
)

// Refusal shapes a tenant can choose for refused tools/call requests.
const (
	ShapeError  = "error"  // JSON-RPC error (default, seed 004)
	ShapeResult = "result" // CallToolResult with isError (seed 002), tools/call only
)

// Tenant is a customer of the gateway.
type Tenant struct {
	ID           string `json:"id"`
	Tier         string `json:"tier"`
	RefusalShape string `json:"refusal_shape,omitempty"`
	WebhookURL   string `json:"webhook_url,omitempty"`
	// WebhookSecretRef names the HMAC secret for approval webhooks
	// (a credential reference, see Credential).
	WebhookSecretRef string    `json:"webhook_secret_ref,omitempty"`
	Disabled         bool      `json:"disabled,omitempty"`
	Created          time.Time `json:"created"`
	// Content overrides the deployment's content actions for this tenant.
	Content ContentActions `json:"content,omitzero"`
	// NewTools says what happens to a tool the rug-pull pins have not met
	// yet: NewToolsPin ("" too) pins it the first time it is listed or
	// called (trust on first use); NewToolsHold keeps it out of tools/list
	// and refuses calls to it until an operator pins it.
	NewTools string `json:"new_tools,omitempty"`
	// Issuers are the OAuth authorization servers whose access tokens
	// this tenant accepts besides its API keys (issuer.go); nil: API
	// keys only.
	Issuers []Issuer `json:"issuers,omitempty"`
}

// The values of Tenant.NewTools, the first the default.
const (
	NewToolsPin  = "pin"
	NewToolsHold = "hold"
)

// NewToolsModes are the values Tenant.NewTools takes ("" is NewToolsPin).
var NewToolsModes = []string{NewToolsPin, NewToolsHold}

// ValidateNewTools reports a value of Tenant.NewTools that is not one of
// NewToolsModes ("" is allowed: the default).
func ValidateNewTools(v string) error {
	if v != "" && !slices.Contains(NewToolsModes, v) {
		return fmt.Errorf("new_tools %q: want one of %s", v, strings.Join(NewToolsModes, ", "))
	}
	return nil
}

// HoldsNewTools reports whether t holds new tools for review.
func (t Tenant) HoldsNewTools() bool { return t.NewTools == NewToolsHold }

// ContentActions are a tenant's choices of the content checks' actions,
// each one of the values the environment setting of the same name takes
// (PIIActions, EgressActions, InputValidations, ThreatModes); "" keeps the
// deployment's setting.
type ContentActions struct {
	PII    string `json:"pii_action,omitempty" yaml:"pii_action"`
	Egress string `json:"egress_action,omitempty" yaml:"egress_action"`
	Input  string `json:"input_validation,omitempty" yaml:"input_validation"`
	Threat string `json:"threat_mode,omitempty" yaml:"threat_mode"`
}

// The values each content action takes, the first the seed's default. The
// environment settings (shared/config) and the tenant overrides are checked
// against these same lists.
var (
	PIIActions       = []string{"redact", "monitor", "block"} // PII_ACTION
	EgressActions    = []string{"block", "monitor", "off"}    // EGRESS_ACTION
	InputValidations = []string{"block", "monitor", "off"}    // INPUT_VALIDATION
	ThreatModes      = []string{"block", "monitor"}           // THREAT_MODE
)

// Validate reports the first override that is not one of its setting's
// values, naming the field.
func (a ContentActions) Validate() error {
	for _, f := range []struct {
		name, v string
		allowed []string
	}{
		{"pii_action", a.PII, PIIActions},
		{"egress_action", a.Egress, EgressActions},
		{"input_validation", a.Input, InputValidations},
		{"threat_mode", a.Threat, ThreatModes},
	} {
		if f.v != "" && !slices.Contains(f.allowed, f.v) {
			return fmt.Errorf("%s %q: want one of %s", f.name, f.v, strings.Join(f.allowed, ", "))
		}
	}
	return nil
}

// Credential is a brokered credential: a header injected on calls to an
// upstream. Ref says where its value lives: "env:NAME", "file:/path",
// "secretsmanager:ARN-or-name" or "ssm:/parameter/name". The value itself is
// never stored in the registry.
type Credential struct {
	Header string `json:"header" yaml:"header"`
	Ref    string `json:"ref" yaml:"ref"`
}

// ToolSettings are an operator's per-tool settings on a server.
type ToolSettings struct {
	RequiresApproval bool `json:"requires_approval,omitempty" yaml:"requires_approval"`
}

// Server is one upstream MCP server of a tenant.
type Server struct {
	Tenant     string      `json:"tenant"`
	Name       string      `json:"name"`
	URL        string      `json:"url"`
	Credential *Credential `json:"credential,omitempty"`
	// Auth says how calls reach the server (AuthModes; "" is
	// AuthBrokered); OAuth is the tenant's client there when it is
	// AuthOAuth (serverauth.go).
	Auth    string                  `json:"auth,omitempty"`
	OAuth   *OAuthClient            `json:"oauth,omitempty"`
	Tools   map[string]ToolSettings `json:"tools,omitempty"`
	Created time.Time               `json:"created"`
}

// Key is an API key record. The secret is never stored: Hash is the hex
// SHA-256 of the whole key as issued.
type Key struct {
	ID      string    `json:"id"`
	Tenant  string    `json:"tenant"`
	Caller  string    `json:"caller"`
	Hash    string    `json:"hash"`
	Created time.Time `json:"created"`
	Revoked bool      `json:"revoked,omitempty"`
	// Roles are the tenant's roles this key's caller holds (the policy's
	// roles layer and Cedar's principal.roles); nil: none.
	Roles []string `json:"roles,omitempty"`
	// Manifest narrows the tenant's session manifest for this key's
	// sessions (policy.Merge: it can only narrow); nil: none.
	Manifest *policy.Manifest `json:"manifest,omitempty"`
}

// Reader is what the request path needs from the registry. Lookups of
// absent items return store.ErrNotFound.
type Reader interface {
	Key(ctx context.Context, id string) (Key, error)
	Tenant(ctx context.Context, id string) (Tenant, error)
	Servers(ctx context.Context, tenant string) ([]Server, error)
}

// Writer is what operators (config loading, the admin API) need.
type Writer interface {
	PutTenant(ctx context.Context, t Tenant) error
	ListTenants(ctx context.Context) ([]Tenant, error)
	PutServer(ctx context.Context, s Server) error
	DeleteServer(ctx context.Context, tenant, name string) error
	PutKey(ctx context.Context, k Key) error
	ListKeys(ctx context.Context, tenant string) ([]Key, error)
	// RevokeKey marks a key revoked; store.ErrNotFound if absent.
	RevokeKey(ctx context.Context, tenant, id string) error
}

// Store is a full registry.
type Store interface {
	Reader
	Writer
	PolicyStore // each tenant's policy set (policy.go)
}
