package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-gw/aegis/shared/policy"
	"github.com/aegis-gw/aegis/shared/registry"
)

// CedarFile reports whether a cedar_policies value names a file rather
// than holding the policies: one line, ending in ".cedar". A relative
// path is read relative to the config file's directory.
func CedarFile(v string) bool {
	v = strings.TrimSpace(v)
	return v != "" && !strings.ContainsAny(v, "\n\r") && strings.HasSuffix(v, ".cedar")
}

// readCedarFiles replaces every cedar_policies that names a file with the
// file's text, read relative to dir. A file that cannot be read is an
// error naming the tenant's field.
func (f *File) readCedarFiles(dir string) error {
	for ti := range f.Tenants {
		t := &f.Tenants[ti]
		if !CedarFile(t.CedarPolicies) {
			continue
		}
		path := strings.TrimSpace(t.CedarPolicies)
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("tenants[%d].cedar_policies: %w", ti, err)
		}
		t.CedarPolicies = string(b)
		t.cedarFile = path
	}
	return nil
}

// PolicySet is the tenant's policy set: its roles, Cedar text (a file's
// already read), mode and manifest.
func (t *FileTenant) PolicySet() *policy.Set {
	return &policy.Set{Roles: t.Roles, Cedar: t.CedarPolicies, Mode: t.PolicyMode, Manifest: t.Manifest}
}

// validatePolicy checks the tenant's set and its keys' manifests; each
// error names its field, and a Cedar error its line and column in the
// cedar_policies text (and the file it came from).
func (t *FileTenant) validatePolicy(p string) []error {
	var errs []error
	if err := t.PolicySet().Validate(); err != nil {
		where := p
		if t.cedarFile != "" {
			where += " (cedar_policies from " + t.cedarFile + ")"
		}
		errs = append(errs, fmt.Errorf("%s: %w", where, err))
	}
	for ki, k := range t.Keys {
		if err := k.Manifest.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s.keys[%d].manifest: %w", p, ki, err))
		}
	}
	return errs
}

// Policies returns each tenant's policy set as the registry stores it:
// the set as YAML, the Cedar text inline. Every tenant of the file has
// one; a tenant that configures no policy has the empty set (every call
// allowed), so that a policy removed from the file is removed from the
// store too.
func (f *File) Policies() ([]registry.Policy, error) {
	out := make([]registry.Policy, 0, len(f.Tenants))
	for i := range f.Tenants {
		t := &f.Tenants[i]
		src, err := yaml.Marshal(t.PolicySet())
		if err != nil {
			return nil, fmt.Errorf("tenants[%d]: policy: %w", i, err)
		}
		out = append(out, registry.Policy{Tenant: t.ID, Source: string(src)})
	}
	return out, nil
}
