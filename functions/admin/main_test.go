package main

import (
	"context"
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/functions/internal/replay"
	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/lambdatest"
	"github.com/aegis-gw/aegis/shared/registry"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the function's responses")

func TestMain(m *testing.M) { dynamotest.Main(m) }

const (
	eventsDir = "../../events/admin"
	goldenDir = "testdata/golden"

	// heldID is the pending approval the events list, read and approve.
	heldID = "5f0c6a7e-2b1d-4c3a-9e8f-7a6b5c4d3e2f"
)

// steps is the order events are posted in; every file of events/admin is
// posted.
var steps = []string{
	"no-iam-principal",
	"approvals-list",
	"approval-get",
	"approval-approve",
	"approval-approve-again",
	"unknown-route",
}

// TestFunction runs the AdminFunction's bootstrap under aws-lambda-rie
// against moto_server, with a held call seeded through the DynamoDB store:
// `sam local invoke AdminFunction -e events/admin/<case>.json` without
// Docker. The events carry API Gateway's IAM authorizer context; the one
// without it is refused 401.
func TestFunction(t *testing.T) {
	bin := lambdatest.Build(t, "./functions/admin")
	db := dynamotest.Start(t)
	st := db.Store(t, dynamo.Options{})
	ctx := context.Background()
	now := time.Now().UTC()
	if err := st.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierGrowth, Created: now}); err != nil {
		t.Fatal(err)
	}
	held := approval.Approval{
		ID: heldID, Tenant: "acme", Caller: "ci-agent", Server: "crm", Tool: "transfer",
		ParamsHash: "9b2d5c1e0f4a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c",
		Params:     []byte(`{"amount":2500,"to":"ACME-OPS-4411"}`),
		Status:     approval.Pending, Created: now, Expires: now.Add(time.Hour),
		CorrelationID: "4bf92f3577b34da6a3ce929d0e0e4736",
	}
	if _, created, err := st.HoldApproval(ctx, held, now); err != nil || !created {
		t.Fatalf("seed approval: created %v, %v", created, err)
	}
	fn := lambdatest.Start(t, bin, &lambdatest.Options{
		FunctionName: "aegis-AdminFunction",
		MemoryMB:     128,
		Timeout:      10 * time.Second,
		Env: map[string]string{
			"AWS_ACCESS_KEY_ID":         "test",
			"AWS_SECRET_ACCESS_KEY":     "test",
			"AWS_ENDPOINT_URL_DYNAMODB": db.Endpoint,
			"AWS_EC2_METADATA_DISABLED": "true",
			"AEGIS_STATE_TABLE":         db.Tables.State,
			"AEGIS_AUDIT_TABLE":         db.Tables.Audit,
			"AEGIS_TRACE":               "off",
		},
	})
	posted := map[string]bool{}
	for _, name := range steps {
		t.Run(name, func(t *testing.T) {
			res := fn.InvokeFile(t, filepath.Join(eventsDir, name+".json"))
			posted[name] = true
			replay.Compare(t, goldenDir, name, replay.Normalize(t, res, replay.Stable{heldID, held.CorrelationID}), *update)
		})
	}
	for _, name := range replay.Events(t, eventsDir) {
		if !posted[name] {
			t.Errorf("events/admin/%s.json is not posted by any step", name)
		}
	}
	a, err := st.GetApproval(ctx, heldID)
	if err != nil || a.Status != approval.Approved || a.DecidedBy != "arn:aws:sts::123456789012:assumed-role/AegisOperator/ops-alice" {
		t.Errorf("after approval-approve the store has %+v (%v); want approved by the event's IAM principal", a, err)
	}
	t.Logf("INIT duration under aws-lambda-rie: %v", fn.InitDuration(t))
}
