package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-gw/aegis/shared/audit"
)

// Mode says whether a tenant's rule layers are enforced or only recorded.
type Mode string

// The modes; "" is ModeEnforce.
const (
	ModeEnforce Mode = "enforce"
	ModeAudit   Mode = "audit"
)

// Set is a tenant's whole policy as its config holds it (YAML or JSON):
//
//	roles:          {ops: {allow: ["mock/*"], deny: ["payments/transfer"]}}
//	cedar_policies: |
//	  permit (principal, action == Action::"tools/call", resource)
//	  when { resource.annotations has readOnlyHint && resource.annotations.readOnlyHint };
//	policy_mode:    enforce        # or audit
//	manifest:       {max_tool_calls: 100, max_idle_secs: 900}
//
// Every field is optional. The zero Set has no rules: Build gives a
// decider that allows every decidable call, and its Hash is
// audit.PolicyHashNone.
type Set struct {
	Roles    map[string]Role `json:"roles,omitempty" yaml:"roles,omitempty"`
	Cedar    string          `json:"cedar_policies,omitempty" yaml:"cedar_policies,omitempty"`
	Mode     Mode            `json:"policy_mode,omitempty" yaml:"policy_mode,omitempty"`
	Manifest *Manifest       `json:"manifest,omitempty" yaml:"manifest,omitempty"`
}

// ParseSet decodes a tenant's policy from YAML (JSON is YAML) and
// validates it. An unknown field, a second document or an invalid set is
// an error; a Cedar text that does not parse is a *ParseError.
func ParseSet(src []byte) (*Set, error) {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	var s Set
	if err := dec.Decode(&s); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("policy: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("policy: more than one YAML document")
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate checks s without side effects: the mode, the roles' names and
// patterns, the Cedar text (a *ParseError with its line and column) and
// the manifest. It is what Build checks; a set that validates builds.
func (s *Set) Validate() error {
	_, err := s.compile()
	return err
}

// compiled is a Set ready to decide.
type compiled struct {
	roles  *rolesLayer
	cedar  *cedarLayer
	bounds *Bounds
	audit  bool
}

func (s *Set) compile() (*compiled, error) {
	if s == nil {
		return nil, errors.New("policy: nil set (install DenyAll until the tenant's set is loaded)")
	}
	c := &compiled{}
	switch s.Mode {
	case "", ModeEnforce:
	case ModeAudit:
		c.audit = true
	default:
		return nil, fmt.Errorf("policy: policy_mode %q: want %q or %q", s.Mode, ModeEnforce, ModeAudit)
	}
	var err error
	if c.roles, err = compileRoles(s.Roles); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if c.cedar, err = compileCedar(s.Cedar); err != nil {
		return nil, err
	}
	if c.bounds, err = s.Manifest.compile(); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return c, nil
}

// Build validates set and assembles the tenant's decider: the manifest
// gate over the tenant's manifest (narrowed per call by Request.Bounds),
// over the policy decider of the layers present (roles, then Cedar), in
// audit mode marked Audit. A nil set is an error: a tenant whose set is
// not loaded gets DenyAll, not an empty policy.
func Build(set *Set) (Decider, error) {
	c, err := set.compile()
	if err != nil {
		return nil, err
	}
	var layers []Decider
	if c.roles != nil {
		layers = append(layers, c.roles)
	}
	if c.cedar != nil {
		layers = append(layers, c.cedar)
	}
	var inner Decider = AllowAll{}
	if len(layers) > 0 {
		inner = NewPolicyDecider(layers...)
		if c.audit {
			inner = auditDecider{inner: inner}
		}
	}
	return NewManifestGate(c.bounds, inner), nil
}

// BuildSessionFree assembles the part of set's decider that reads nothing
// of the session's record: the roles, and each request's candidate Cedar
// policies when none of them reads context.session (else that layer
// allows, saying nothing). A refusal of it is a refusal of Build's
// decider whatever the record holds: the manifest gate, the one part
// that reads the record besides Cedar's context.session, can only refuse
// first (-32005), and the layers take the strictest verdict. It is nil
// when it never refuses: no roles and no Cedar, or audit mode (nothing
// is refused). Only a refusal means anything: its allow is no verdict.
func BuildSessionFree(set *Set) (Decider, error) {
	c, err := set.compile()
	if err != nil || c.audit {
		return nil, err
	}
	var layers []Decider
	if c.roles != nil {
		layers = append(layers, c.roles)
	}
	if c.cedar != nil {
		layers = append(layers, sessionFreeCedar{c.cedar})
	}
	if len(layers) == 0 {
		return nil, nil
	}
	return NewPolicyDecider(layers...), nil
}

// canonicalSet is the form Hash covers. Cedar is the text with line
// endings made "\n" and trailing blanks cut from each line and from the
// end: the text itself, not cedar-go's rendering of it, so that a
// dependency upgrade never changes the hash of an unchanged policy.
type canonicalSet struct {
	Version  int                `json:"version"`
	Mode     Mode               `json:"policy_mode"`
	Roles    map[string]Role    `json:"roles"`
	Cedar    string             `json:"cedar_policies"`
	Manifest *canonicalManifest `json:"manifest"`
}

// Hash is the policy_hash of set, the tenant's whole loaded policy (roles,
// Cedar text, mode and manifest): audit.PolicyHash (bare lower-case hex
// SHA-256) of the JSON encoding of
//
//	{"version":1,"policy_mode":"enforce"|"audit","roles":{...}|null,
//	 "cedar_policies":"...","manifest":{...}|null}
//
// with role and grant lists sorted and deduplicated and map keys in
// order, so that two sets that decide alike by construction hash alike. A
// set with no rules and no manifest (whatever its mode), and a nil set,
// hash to audit.PolicyHashNone, the one hash of the empty set. An invalid
// set is an error: only a set that can be loaded has a hash.
func Hash(set *Set) (string, error) {
	if set == nil {
		return audit.PolicyHashNone, nil
	}
	if err := set.Validate(); err != nil {
		return "", err
	}
	cedarText := canonicalCedar(set.Cedar)
	if len(set.Roles) == 0 && cedarText == "" && set.Manifest.isZero() {
		return audit.PolicyHashNone, nil
	}
	mode := set.Mode
	if mode == "" {
		mode = ModeEnforce
	}
	b, err := json.Marshal(canonicalSet{
		Version:  1,
		Mode:     mode,
		Roles:    canonicalRoles(set.Roles),
		Cedar:    cedarText,
		Manifest: set.Manifest.canonical(),
	})
	if err != nil {
		return "", fmt.Errorf("policy: hash: %w", err)
	}
	return audit.PolicyHash(b), nil
}

func canonicalCedar(text string) string {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}
