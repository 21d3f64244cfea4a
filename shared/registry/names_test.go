package registry

import (
	"strings"
	"testing"
)

func TestValidateServerName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"lower-case word", "billing", true},
		{"dashes and digits", "mock-primary-2", true},
		{"starts with a digit", "1password", true},
		{"one character", "a", true},
		{"63 characters", strings.Repeat("a", 63), true},
		{"64 characters", strings.Repeat("a", 64), false},
		{"empty", "", false},
		{"mixed case, dot, underscore", "Acme.Tools_1", false},
		{"upper case", "Billing", false},
		{"dot: ambiguous in server.tool", "acme.tools", false},
		{"underscore", "acme_tools", false},
		{"leading dash", "-billing", false},
		{"slash: a second path segment", "a/b", false},
		{"percent-encoding", "a%2Fb", false},
		{"space", "bill ing", false},
		{"hash: a store key separator", "a#b", false},
		{"non-ASCII look-alike", "bіlling", false}, // Cyrillic і
		{"dot-dot", "..", false},
		{"trailing newline", "billing\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := ValidateServerName(tc.in); (err == nil) != tc.ok {
				t.Errorf("ValidateServerName(%q) = %v; want ok=%v", tc.in, err, tc.ok)
			}
			if err := ValidateTenantID(tc.in); (err == nil) != tc.ok {
				t.Errorf("ValidateTenantID(%q) = %v; want ok=%v (the same rule)", tc.in, err, tc.ok)
			}
		})
	}
}

func TestValidateCaller(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"word", "bot", true},
		{"dashes", "support-agent", true},
		{"mixed case, dot, underscore", "Acme.Tools_1", true},
		{"e-mail address", "ops+agent@example.com", true},
		{"IAM ARN", "arn:aws:iam::123456789012:role/agent", true},
		{"128 characters", strings.Repeat("a", 128), true},
		{"129 characters", strings.Repeat("a", 129), false},
		{"empty", "", false},
		{"space", "support agent", false},
		{"leading dot", ".bot", false},
		{"newline: a forged log line", "bot\nadmin", false},
		{"non-ASCII", "bøt", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := ValidateCaller(tc.in); (err == nil) != tc.ok {
				t.Errorf("ValidateCaller(%q) = %v; want ok=%v", tc.in, err, tc.ok)
			}
		})
	}
}
