// Package nametest holds the example names that the config file's tests and
// the admin API's tests both run, so that the two surfaces are proved to
// follow the one rule of shared/registry (docs/design/names.md) with the
// same cases. It is imported by tests only.
package nametest

import "strings"

// Example is a name and whether the rule accepts it.
type Example struct {
	Name string
	OK   bool
}

// IDs are examples for tenant ids and server names (one rule).
var IDs = []Example{
	{"billing", true},
	{"mock-primary-2", true},
	{strings.Repeat("a", 63), true},
	{"Acme.Tools_1", false},
	{"Billing", false},
	{"acme.tools", false},
	{"acme_tools", false},
	{"-billing", false},
	{strings.Repeat("a", 64), false},
}

// Callers are examples for callers (the name an API key is issued to).
var Callers = []Example{
	{"support-agent", true},
	{"Acme.Tools_1", true},
	{"arn:aws:iam::123456789012:role/agent", true},
	{"support agent", false},
	{"bot\nadmin", false},
}
