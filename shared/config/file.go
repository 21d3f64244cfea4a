package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/netguard"
	"github.com/aegis-gw/aegis/shared/policy"
	"github.com/aegis-gw/aegis/shared/registry"
)

// File is the YAML configuration of `aegis serve --config FILE`: the
// registry a local gateway starts with. docs/config.md documents each field.
type File struct {
	Tenants []FileTenant `yaml:"tenants"`
}

// FileTenant is one tenant in a config file.
type FileTenant struct {
	ID               string `yaml:"id"`
	Tier             string `yaml:"tier"`
	RefusalShape     string `yaml:"refusal_shape"`
	WebhookURL       string `yaml:"webhook_url"`
	WebhookSecretRef string `yaml:"webhook_secret_ref"`
	// pii_action, egress_action, input_validation, threat_mode: this
	// tenant's overrides of the deployment's settings of the same names.
	Content registry.ContentActions `yaml:",inline"`
	// new_tools: pin (default: trust on first use) or hold (new tools
	// await an operator's pin).
	NewTools string       `yaml:"new_tools"`
	Keys     []FileKey    `yaml:"keys"`
	Servers  []FileServer `yaml:"servers"`
	// Issuers are the OAuth authorization servers whose tokens the
	// tenant accepts on /t/{id}/mcp (docs/oauth.md).
	Issuers []registry.Issuer `yaml:"issuers"`
	// roles, cedar_policies, policy_mode, manifest: the tenant's policy
	// set (policy.go; docs/policy.md).
	Roles         map[string]policy.Role `yaml:"roles"`
	CedarPolicies string                 `yaml:"cedar_policies"`
	PolicyMode    policy.Mode            `yaml:"policy_mode"`
	Manifest      *policy.Manifest       `yaml:"manifest"`
	cedarFile     string                 // the file cedar_policies was read from, if any
}

// FileKey is an API key, stored as its hash: the public id (the part after
// "aegis_") and the hex SHA-256 of the whole key.
type FileKey struct {
	ID     string `yaml:"id"`
	Caller string `yaml:"caller"`
	SHA256 string `yaml:"sha256"`
	// Roles are the tenant's roles the key's caller holds; Manifest
	// narrows the tenant's session manifest for its sessions.
	Roles    []string         `yaml:"roles"`
	Manifest *policy.Manifest `yaml:"manifest"`
}

// FileServer is one upstream MCP server. URL may use ${VAR} to take a value
// from the environment (the demo's upstream port is only known at start).
type FileServer struct {
	Name       string               `yaml:"name"`
	URL        string               `yaml:"url"`
	Credential *registry.Credential `yaml:"credential"`
	// auth: oauth makes each caller connect with their own grant
	// (oauth: the tenant's client at the server's authorization server;
	// docs/connections.md).
	Auth  string                           `yaml:"auth"`
	OAuth *registry.OAuthClient            `yaml:"oauth"`
	Tools map[string]registry.ToolSettings `yaml:"tools"`
}

var (
	hashRE = regexp.MustCompile(`^[0-9a-f]{64}$`)
	keyRE  = regexp.MustCompile(`^[a-z0-9]{4,64}$`)
	hdrRE  = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
)

// LoadFile reads and validates a config file.
func LoadFile(path string, local bool) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	f, err := parseFile(b, os.Getenv, local, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return f, nil
}

// ParseFile decodes and validates YAML; unknown fields are errors. getenv
// expands ${VAR} in server URLs.
// A cedar_policies that names a file (policy.go) is read relative to the
// current directory.
func ParseFile(b []byte, getenv func(string) string, local bool) (*File, error) {
	return parseFile(b, getenv, local, ".")
}

// parseFile is ParseFile with cedar_policies files read relative to dir.
func parseFile(b []byte, getenv func(string) string, local bool, dir string) (*File, error) {
	var f File
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	if errs := unknownFields(&doc); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	d := yaml.NewDecoder(bytes.NewReader(b))
	d.KnownFields(true) // the walk above found none; this stays the backstop
	if err := d.Decode(&f); err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	var unset []error
	for ti := range f.Tenants {
		for si := range f.Tenants[ti].Servers {
			s := &f.Tenants[ti].Servers[si]
			s.URL = os.Expand(s.URL, func(name string) string {
				v := getenv(name)
				if v == "" {
					unset = append(unset, fmt.Errorf("tenants[%d].servers[%d].url: ${%s} is not set in the environment (in %q)", ti, si, name, s.URL))
				}
				return v
			})
		}
	}
	if len(unset) > 0 {
		return nil, errors.Join(unset...)
	}
	if err := f.readCedarFiles(dir); err != nil {
		return nil, err
	}
	return &f, f.Validate(local)
}

// Validate checks every field; each error names its field's path.
func (f *File) Validate(local bool) error {
	var errs []error
	bad := func(path, msg string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(msg, args...)))
	}
	tenants := map[string]bool{}
	keys := map[string]bool{}
	for ti, t := range f.Tenants {
		p := fmt.Sprintf("tenants[%d]", ti)
		if err := registry.ValidateTenantID(t.ID); err != nil {
			bad(p+".id", "%q: %v", t.ID, err)
		} else if tenants[t.ID] {
			bad(p+".id", "%q: duplicate tenant", t.ID)
		}
		tenants[t.ID] = true
		switch t.Tier {
		case registry.TierFree, registry.TierGrowth, registry.TierEnterprise:
		case "":
			bad(p+".tier", "required: free, growth or enterprise")
		default:
			bad(p+".tier", "%q: want free, growth or enterprise", t.Tier)
		}
		switch t.RefusalShape {
		case "", registry.ShapeError, registry.ShapeResult:
		default:
			bad(p+".refusal_shape", "%q: want error or result", t.RefusalShape)
		}
		// One rule with the admin API and the notifier: a webhook_url needs
		// a webhook_secret_ref (approval.ValidateWebhook).
		var we *approval.WebhookError
		if err := approval.ValidateWebhook(t.WebhookURL, t.WebhookSecretRef, local); errors.As(err, &we) {
			bad(p+"."+we.Field, "%s", we.Reason)
		} else if err != nil {
			bad(p+".webhook_url", "%v", err)
		}
		if err := t.Content.Validate(); err != nil {
			bad(p, "%v", err)
		}
		if err := registry.ValidateNewTools(t.NewTools); err != nil {
			bad(p+".new_tools", "%v", err)
		}
		errs = append(errs, t.validatePolicy(p)...)
		var ie *registry.IssuerError
		if err := registry.ValidateIssuers(t.Issuers, local); errors.As(err, &ie) {
			bad(fmt.Sprintf("%s.issuers[%d].%s", p, ie.Index, ie.Field), "%s", ie.Reason)
		} else if err != nil {
			bad(p+".issuers", "%v", err)
		}
		if t.WebhookSecretRef != "" {
			if err := ValidateCredentialRef(t.WebhookSecretRef); err != nil {
				bad(p+".webhook_secret_ref", "%v", err)
			}
		}
		for ki, k := range t.Keys {
			kp := fmt.Sprintf("%s.keys[%d]", p, ki)
			if !keyRE.MatchString(k.ID) {
				bad(kp+".id", "%q: want the key's public id (4-64 lower-case letters and digits)", k.ID)
			} else if keys[k.ID] {
				bad(kp+".id", "%q: duplicate key id", k.ID)
			}
			keys[k.ID] = true
			if !hashRE.MatchString(k.SHA256) {
				bad(kp+".sha256", "want 64 lower-case hex digits (the SHA-256 of the key, never the key itself)")
			}
			if k.Caller == "" {
				bad(kp+".caller", "required: a name for who uses this key")
			} else if err := registry.ValidateCaller(k.Caller); err != nil {
				bad(kp+".caller", "%q: %v", k.Caller, err)
			}
		}
		servers := map[string]bool{}
		for si, s := range t.Servers {
			sp := fmt.Sprintf("%s.servers[%d]", p, si)
			if err := registry.ValidateServerName(s.Name); err != nil {
				bad(sp+".name", "%q: %v", s.Name, err)
			} else if servers[s.Name] {
				bad(sp+".name", "%q: duplicate server", s.Name)
			}
			servers[s.Name] = true
			if err := netguard.ValidateURL(s.URL, local); err != nil {
				bad(sp+".url", "%v", err)
			}
			if c := s.Credential; c != nil {
				if !hdrRE.MatchString(c.Header) {
					bad(sp+".credential.header", "%q: want an HTTP header name", c.Header)
				}
				if err := ValidateCredentialRef(c.Ref); err != nil {
					bad(sp+".credential.ref", "%v", err)
				}
			}
			var ae *registry.AuthError
			if err := registry.ValidateServerAuth(s.Auth, s.OAuth, s.Credential); errors.As(err, &ae) {
				bad(sp+"."+ae.Field, "%s", ae.Reason)
			} else if err != nil {
				bad(sp+".auth", "%v", err)
			}
			for name := range s.Tools {
				if name == "" || len(name) > 128 {
					bad(sp+".tools", "%q: want a tool name of 1-128 characters", name)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// ValidateCredentialRef checks the form of a credential reference
// (registry.ValidateCredentialRef, the one rule).
func ValidateCredentialRef(ref string) error { return registry.ValidateCredentialRef(ref) }

// Registry returns the file's tenants, servers and keys as registry records.
func (f *File) Registry() ([]registry.Tenant, []registry.Server, []registry.Key) {
	var ts []registry.Tenant
	var ss []registry.Server
	var ks []registry.Key
	for _, t := range f.Tenants {
		shape := t.RefusalShape
		if shape == "" {
			shape = registry.ShapeError
		}
		ts = append(ts, registry.Tenant{ID: t.ID, Tier: t.Tier, RefusalShape: shape, WebhookURL: t.WebhookURL, WebhookSecretRef: t.WebhookSecretRef, Content: t.Content, NewTools: t.NewTools, Issuers: t.Issuers})
		for _, s := range t.Servers {
			ss = append(ss, registry.Server{Tenant: t.ID, Name: s.Name, URL: s.URL, Credential: s.Credential, Auth: s.Auth, OAuth: s.OAuth, Tools: s.Tools})
		}
		for _, k := range t.Keys {
			ks = append(ks, registry.Key{ID: k.ID, Tenant: t.ID, Caller: k.Caller, Hash: k.SHA256, Roles: k.Roles, Manifest: k.Manifest})
		}
	}
	return ts, ss, ks
}
