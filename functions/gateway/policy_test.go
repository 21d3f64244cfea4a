package main

// The policy stage under the emulator (issue 14): the tenants, keys,
// sessions and sets the policy events need, and the checks of the store
// that follow them.

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/policy"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
)

// The policy events' keys, one tenant each.
const (
	auditKey   = "aegis_audittest_H6jK9lZ2xC5vB8nM1qW4eR7t"   // auditing: permitEcho in audit mode
	unreadKey  = "aegis_unreadtest_T3yU6iO9pA2sD5fG8hJ1kL4z"  // unread: a stored set that cannot be read
	boundedKey = "aegis_boundedtest_N8mB5vC2xZ9lK6jH3gF7dS1a" // bounded: boundedPolicy's manifest
	shapedKey  = "aegis_shapedtest_R2tY5uI8oP1aS4dF7gH0jK3l"  // shaped: permitEcho, refusal_shape result
)

// The bounded tenant's sessions, seeded with what each limit needs.
const (
	oldSession   = "sess-bounded-old-01JDQ90A1B2C3D4E5F6G7H8J9K"  // opened 2 h ago: past max_lifetime_secs
	idleSession  = "sess-bounded-idle-01JDQ91A1B2C3D4E5F6G7H8J9K" // no allowed call for 20 min: past max_idle_secs
	callsSession = "sess-bounded-calls-01JDQ92A1B2C3D4E5F6G7H8J9" // one tool call of max_tool_calls 2 spent
	stepsSession = "sess-bounded-steps-01JDQ93A1B2C3D4E5F6G7H8J9" // declares step 3 of max_steps 3
)

// permitEcho permits echo, on every server, and nothing else.
const permitEcho = `cedar_policies: |
  @id("echo-only")
  permit (principal, action == Action::"tools/call", resource)
  when { resource.name == "echo" };
`

// boundedPolicy is the bounded tenant's manifest: every limit but grants.
const boundedPolicy = "manifest: {max_lifetime_secs: 3600, max_idle_secs: 600, max_tool_calls: 2, max_steps: 3}\n"

// seedPolicies writes the policy tenants (each with the demo upstream as
// server crm), their keys and sets, and bounded's sessions.
func (h *harness) seedPolicies(t *testing.T, upstreamURL string, now time.Time) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []struct {
		tenant, key, set string
		shape            string
	}{
		{"auditing", auditKey, permitEcho + "policy_mode: audit\n", ""},
		{"unread", unreadKey, "", ""},
		{"bounded", boundedKey, boundedPolicy, ""},
		{"shaped", shapedKey, permitEcho, registry.ShapeResult},
	} {
		must(h.st.PutTenant(ctx, registry.Tenant{ID: p.tenant, Tier: registry.TierGrowth, RefusalShape: p.shape, Created: now}))
		must(h.st.PutServer(ctx, registry.Server{Tenant: p.tenant, Name: "crm", URL: upstreamURL, Created: now}))
		rec, err := auth.KeyWithSecret(p.tenant, caller, p.key, now)
		must(err)
		must(h.st.PutKey(ctx, rec))
		if p.set != "" {
			if _, err := policy.ParseSet([]byte(p.set)); err != nil {
				t.Fatal(err)
			}
			must(h.st.PutPolicy(ctx, registry.Policy{Tenant: p.tenant, Source: p.set, Updated: now}))
		}
	}
	// unread's stored set is not a document the gateway can read (a
	// damaged item, or a newer writer's): the tenant is never loaded.
	_, err := h.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(h.tables.State),
		Item: dynamo.Item{
			dynamo.AttrPK: dynamo.S(dynamo.JoinKey("T", "unread")), dynamo.AttrSK: dynamo.S("POLICY"),
			dynamo.AttrDoc: dynamo.S(`{"tenant":"unread","source":`),
		},
	})
	must(err)
	for _, r := range []session.Record{
		{ID: oldSession, Created: now.Add(-2 * time.Hour)},
		{ID: idleSession, Created: now.Add(-20 * time.Minute)},
		{ID: callsSession, Created: now},
		{ID: stepsSession, Created: now},
	} {
		r.Tenant, r.Caller, r.LastSeen = "bounded", caller, now
		must(h.st.Create(ctx, r))
	}
	must(h.st.Count(ctx, "bounded", callsSession, session.Use{At: now, ToolCall: true}))
}

// repairPolicy stores a set for unread that loads: its next call is
// decided by it.
func (h *harness) repairPolicy(t *testing.T) {
	if err := h.st.PutPolicy(context.Background(), registry.Policy{Tenant: "unread", Source: permitEcho, Updated: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// intendedDenyRecorded: the audit-mode call ran, and its record holds the
// intended deny, its rule, audit-only, and the set's hash.
func (h *harness) intendedDenyRecorded(t *testing.T) {
	now := time.Now()
	recs, _, err := h.st.Query(context.Background(), audit.Query{Tenant: "auditing", From: now.Add(-time.Hour), To: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	set, _ := policy.ParseSet([]byte(permitEcho + "policy_mode: audit\n"))
	hash, _ := policy.Hash(set)
	for _, r := range recs {
		if r.Tool == "transfer" {
			if r.Outcome != audit.OutcomeAllowed || r.PolicyVerdict != "deny" || r.PolicyRule != policy.RuleNoPermit || !r.PolicyAudit || r.PolicyHash != hash {
				t.Fatalf("audit-mode record = %+v; want allowed, intended deny by %s, audit-only, hash %s", r, policy.RuleNoPermit, hash)
			}
			return
		}
	}
	t.Fatalf("no audit record of transfer for tenant auditing among %d", len(recs))
}
