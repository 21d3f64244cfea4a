package registry

import (
	"errors"
	"regexp"
)

// The name rules, one per kind of name, shared by everything that registers
// names (the config file, the admin API). docs/design/names.md gives the
// reasons.
var (
	// nameRE is the rule for tenant ids and server names: they are path
	// segments (/mcp/{server}, /admin/v1/tenants/{tenant}) and parts of
	// composed names ("server.tool" in the aggregate /mcp, store keys).
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	// callerRE is the rule for callers: free-form labels (an agent's name,
	// an e-mail address, an ARN), never composed into other names.
	callerRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@:/+-]{0,127}$`)
)

var (
	errName   = errors.New("want 1 to 63 lower-case letters (a-z), digits and dashes, starting with a letter or digit")
	errCaller = errors.New("want 1 to 128 of A-Z a-z 0-9 . _ @ : / + -, starting with a letter or digit")
)

// ValidateTenantID reports whether id may be a tenant's id (Tenant.ID). The
// rule is ValidateServerName's. The error states the rule, without the id.
func ValidateTenantID(id string) error {
	if !nameRE.MatchString(id) {
		return errName
	}
	return nil
}

// ValidateServerName reports whether name may be a server's name
// (Server.Name): 1 to 63 lower-case ASCII letters, digits and dashes,
// starting with a letter or digit. A name with a dot could not be told
// apart from its tools in "server.tool"; a name with upper case would look
// like another that differs only in case. The error states the rule,
// without the name.
func ValidateServerName(name string) error {
	if !nameRE.MatchString(name) {
		return errName
	}
	return nil
}

// ValidateCaller reports whether caller may name who uses an API key
// (Key.Caller): 1 to 128 ASCII letters, digits and . _ @ : / + -, starting
// with a letter or digit, so that an e-mail address or an IAM ARN fits and
// no space or control character reaches the audit trail. The error states
// the rule, without the caller.
func ValidateCaller(caller string) error {
	if !callerRE.MatchString(caller) {
		return errCaller
	}
	return nil
}
