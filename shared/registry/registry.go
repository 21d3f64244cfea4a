// Package registry describes who aegis serves: tenants, their upstream MCP
// servers with per-tool settings, and their API keys (stored as hashes).
package registry

import (
	"context"
	"time"
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
	Tenant     string                  `json:"tenant"`
	Name       string                  `json:"name"`
	URL        string                  `json:"url"`
	Credential *Credential             `json:"credential,omitempty"`
	Tools      map[string]ToolSettings `json:"tools,omitempty"`
	Created    time.Time               `json:"created"`
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
}
