// Package config parses and validates aegis's settings once, at start. A bad
// value stops start-up with an error naming the variable; nothing downstream
// re-reads the environment.
package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aegis-gw/aegis/shared/registry"
)

// Settings are the environment settings of design §2.3 (seed 004 defaults).
type Settings struct {
	ApprovalTTL             time.Duration // APPROVAL_TTL_SECS=3600
	UpstreamTimeout         time.Duration // UPSTREAM_TIMEOUT_SECS=10
	UpstreamMaxRetries      int           // UPSTREAM_MAX_RETRIES=2 (connection failures only)
	CircuitFailureThreshold int           // CIRCUIT_FAILURE_THRESHOLD=5
	CircuitCooldown         time.Duration // CIRCUIT_COOLDOWN_SECS=10
	UpstreamMaxConcurrent   int           // UPSTREAM_MAX_CONCURRENT=64, 0 = off
	RateLimitPerSession     int           // RATE_LIMIT_PER_SESSION=120 per minute, 0 = off
	RateLimitPerTool        int           // RATE_LIMIT_PER_TOOL=60 per minute, 0 = off
	RateLimitPerKey         int           // RATE_LIMIT_PER_KEY=600 per minute per API key across its sessions, 0 = off
	ThreatMode              string        // THREAT_MODE=block|monitor
	InputValidation         string        // INPUT_VALIDATION=block|monitor|off
	EgressAction            string        // EGRESS_ACTION=block|monitor|off
	PIIAction               string        // PII_ACTION=redact|monitor|block
	BillingEnabled          bool          // BILLING_ENABLED=0|1 (default 0)
	BillingEnforce          bool          // BILLING_ENFORCE=0|1
	SessionLifetime         time.Duration // SESSION_LIFETIME_SECS=86400
	SessionIdle             time.Duration // SESSION_IDLE_SECS=1800
	MaxBodyBytes            int64         // MAX_BODY_BYTES=1048576
	KillSwitchRefresh       time.Duration // KILL_SWITCH_REFRESH_SECS=2 (bound on propagation is 2×)
	PolicyRefresh           time.Duration // POLICY_REFRESH_SECS=5: how old a cached policy set (and key facts) may get
	ServedTenants           []string      // SERVED_TENANTS, comma-separated; empty = every registered tenant
	AllowedOrigins          []string      // ALLOWED_ORIGINS, comma-separated exact origins for browser clients
	AuditRetention          time.Duration // AUDIT_RETENTION_DAYS=90
	// FunctionTimeout is the Lambda function's own Timeout, which Lambda
	// does not expose to the process: the template passes it as
	// FUNCTION_TIMEOUT_SECS. 0 outside Lambda. See Validate.
	FunctionTimeout time.Duration
	LocalMode       bool // set by `aegis serve`: loopback upstreams allowed, http allowed
}

// Content returns the deployment's content actions (THREAT_MODE,
// INPUT_VALIDATION, EGRESS_ACTION, PII_ACTION), which a tenant may
// override (registry.Tenant.Content).
func (s Settings) Content() registry.ContentActions {
	return registry.ContentActions{PII: s.PIIAction, Egress: s.EgressAction, Input: s.InputValidation, Threat: s.ThreatMode}
}

// Defaults returns the settings with every default applied.
func Defaults() Settings {
	return Settings{
		ApprovalTTL:             3600 * time.Second,
		UpstreamTimeout:         10 * time.Second,
		UpstreamMaxRetries:      2,
		CircuitFailureThreshold: 5,
		CircuitCooldown:         10 * time.Second,
		UpstreamMaxConcurrent:   64,
		RateLimitPerSession:     120,
		RateLimitPerTool:        60,
		RateLimitPerKey:         600, // 5× per session: a few busy sessions per key; minting sessions buys no more
		ThreatMode:              "block",
		InputValidation:         "block",
		EgressAction:            "block",
		PIIAction:               "redact",
		SessionLifetime:         24 * time.Hour,
		SessionIdle:             30 * time.Minute,
		MaxBodyBytes:            1 << 20,
		KillSwitchRefresh:       2 * time.Second,
		PolicyRefresh:           5 * time.Second,
		AuditRetention:          90 * 24 * time.Hour,
	}
}

// FromEnv reads the settings through getenv (os.Getenv in production),
// starting from Defaults. Every error names its variable.
func FromEnv(getenv func(string) string) (Settings, error) {
	s := Defaults()
	var errs []error
	secs := func(name string, dst *time.Duration, min int) {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < min {
				errs = append(errs, fmt.Errorf("%s=%q: want a whole number of seconds >= %d", name, v, min))
				return
			}
			*dst = time.Duration(n) * time.Second
		}
	}
	num := func(name string, dst *int, min int) {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < min {
				errs = append(errs, fmt.Errorf("%s=%q: want a whole number >= %d", name, v, min))
				return
			}
			*dst = n
		}
	}
	oneOf := func(name string, dst *string, allowed ...string) {
		if v := getenv(name); v != "" {
			for _, a := range allowed {
				if v == a {
					*dst = v
					return
				}
			}
			errs = append(errs, fmt.Errorf("%s=%q: want one of %s", name, v, strings.Join(allowed, ", ")))
		}
	}
	flag := func(name string, dst *bool) {
		switch v := getenv(name); v {
		case "":
		case "0", "false":
			*dst = false
		case "1", "true":
			*dst = true
		default:
			errs = append(errs, fmt.Errorf("%s=%q: want 0 or 1", name, v))
		}
	}
	list := func(name string, dst *[]string) {
		for _, p := range strings.Split(getenv(name), ",") {
			if p = strings.TrimSpace(p); p != "" {
				*dst = append(*dst, p)
			}
		}
	}
	secs("APPROVAL_TTL_SECS", &s.ApprovalTTL, 1)
	secs("UPSTREAM_TIMEOUT_SECS", &s.UpstreamTimeout, 1)
	num("UPSTREAM_MAX_RETRIES", &s.UpstreamMaxRetries, 0)
	num("CIRCUIT_FAILURE_THRESHOLD", &s.CircuitFailureThreshold, 1)
	secs("CIRCUIT_COOLDOWN_SECS", &s.CircuitCooldown, 1)
	num("UPSTREAM_MAX_CONCURRENT", &s.UpstreamMaxConcurrent, 0)
	num("RATE_LIMIT_PER_SESSION", &s.RateLimitPerSession, 0)
	num("RATE_LIMIT_PER_TOOL", &s.RateLimitPerTool, 0)
	num("RATE_LIMIT_PER_KEY", &s.RateLimitPerKey, 0)
	oneOf("THREAT_MODE", &s.ThreatMode, registry.ThreatModes...)
	oneOf("INPUT_VALIDATION", &s.InputValidation, registry.InputValidations...)
	oneOf("EGRESS_ACTION", &s.EgressAction, registry.EgressActions...)
	oneOf("PII_ACTION", &s.PIIAction, registry.PIIActions...)
	flag("BILLING_ENABLED", &s.BillingEnabled)
	flag("BILLING_ENFORCE", &s.BillingEnforce)
	secs("SESSION_LIFETIME_SECS", &s.SessionLifetime, 1)
	secs("SESSION_IDLE_SECS", &s.SessionIdle, 1)
	if v := getenv("MAX_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1024 || n > 6<<20 {
			errs = append(errs, fmt.Errorf("MAX_BODY_BYTES=%q: want a number of bytes from 1024 to 6291456 (API Gateway's payload limit)", v))
		} else {
			s.MaxBodyBytes = n
		}
	}
	secs("KILL_SWITCH_REFRESH_SECS", &s.KillSwitchRefresh, 1)
	secs("POLICY_REFRESH_SECS", &s.PolicyRefresh, 1)
	secs("FUNCTION_TIMEOUT_SECS", &s.FunctionTimeout, 1)
	var days time.Duration
	secs("AUDIT_RETENTION_DAYS", &days, 1)
	if days > 0 {
		s.AuditRetention = days * 24 // seconds parsed as days
	}
	list("SERVED_TENANTS", &s.ServedTenants)
	list("ALLOWED_ORIGINS", &s.AllowedOrigins)
	if err := errors.Join(errs...); err != nil {
		return Settings{}, err
	}
	return s, s.Validate()
}

// The timeout rule on Lambda (template.yaml's FunctionTimeout mapping):
//
//	UPSTREAM_TIMEOUT_SECS + FunctionTimeoutMargin <= FUNCTION_TIMEOUT_SECS <= MaxFunctionTimeout
//
// The margin lets the gateway answer a slow upstream with its own -32064
// and audit it (DynamoDB round trips before and after the call) before
// Lambda kills the invocation; the ceiling keeps the function under API
// Gateway's 30-second HTTP API integration limit, so API Gateway never
// answers 503 while the function is still working.
const (
	FunctionTimeoutMargin = 5 * time.Second
	MaxFunctionTimeout    = 29 * time.Second
)

// Validate checks combinations that cannot work. It is pure and fast.
func (s Settings) Validate() error {
	if s.SessionIdle > s.SessionLifetime {
		return fmt.Errorf("SESSION_IDLE_SECS (%v) exceeds SESSION_LIFETIME_SECS (%v)", s.SessionIdle, s.SessionLifetime)
	}
	if s.FunctionTimeout > 0 {
		secs := func(d time.Duration) int { return int(d / time.Second) }
		if s.FunctionTimeout > MaxFunctionTimeout {
			return fmt.Errorf("FUNCTION_TIMEOUT_SECS=%d: must be at most %d, under API Gateway's 30-second integration limit",
				secs(s.FunctionTimeout), secs(MaxFunctionTimeout))
		}
		if s.UpstreamTimeout+FunctionTimeoutMargin > s.FunctionTimeout {
			return fmt.Errorf("UPSTREAM_TIMEOUT_SECS=%d with FUNCTION_TIMEOUT_SECS=%d: the function timeout must be at least UPSTREAM_TIMEOUT_SECS + %d (so the gateway answers -32064 itself); lower UPSTREAM_TIMEOUT_SECS to at most %d",
				secs(s.UpstreamTimeout), secs(s.FunctionTimeout), secs(FunctionTimeoutMargin), secs(s.FunctionTimeout-FunctionTimeoutMargin))
		}
	}
	return nil
}

// ValidateFunction is Validate for the gateway function on Lambda, where
// FUNCTION_TIMEOUT_SECS is required: without it the timeout rule cannot be
// checked.
func (s Settings) ValidateFunction() error {
	if s.FunctionTimeout == 0 {
		return fmt.Errorf("FUNCTION_TIMEOUT_SECS is not set: the template passes the function's Timeout so that UPSTREAM_TIMEOUT_SECS (%d) + %d <= FUNCTION_TIMEOUT_SECS <= %d can be checked",
			int(s.UpstreamTimeout/time.Second), int(FunctionTimeoutMargin/time.Second), int(MaxFunctionTimeout/time.Second))
	}
	return s.Validate()
}

// Served reports whether tenant is served by this deployment.
func (s Settings) Served(tenant string) bool {
	if len(s.ServedTenants) == 0 {
		return true
	}
	for _, t := range s.ServedTenants {
		if t == tenant {
			return true
		}
	}
	return false
}

// CallBudget is the longest a request can take to be answered: initialize
// and the call, each with the upstream timeout, its retries, and 30 s for
// the store and the client. `aegis serve` uses it as its WriteTimeout (an
// answer cannot be written later) and its drain bound at shutdown, and the
// approval stage as the floor of an approval use's lease: 80 s with the
// defaults (UPSTREAM_TIMEOUT_SECS=10, UPSTREAM_MAX_RETRIES=2).
func (s Settings) CallBudget() time.Duration {
	return time.Duration(s.UpstreamMaxRetries+3)*s.UpstreamTimeout + 30*time.Second
}
