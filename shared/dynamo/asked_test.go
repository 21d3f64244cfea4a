package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/session"
)

// TestAskOnAnOlderSession: a session item written before the "ask" map
// existed (no such attribute) takes its first outstanding request all the
// same, and answers it once.
func TestAskOnAnOlderSession(t *testing.T) {
	env := dynamotest.Start(t)
	s := env.Store(t, dynamo.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	if err := s.Create(ctx, session.Record{ID: "old", Tenant: "acme", Caller: "agent", Created: now, LastSeen: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client(t).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(env.Tables.State), Key: dynamo.Key(dynamo.JoinKey("S", "acme", "old"), "SESSION"),
		UpdateExpression: aws.String("REMOVE ask"),
	}); err != nil {
		t.Fatal(err)
	}
	a := session.Asked{Server: "a", Method: "roots/list", Expires: now.Add(time.Minute)}
	if err := s.Ask(ctx, "acme", "old", `"a:1"`, a, now); err != nil {
		t.Fatalf("Ask on a session without the map: %v", err)
	}
	if got, err := s.Answer(ctx, "acme", "old", `"a:1"`, now); err != nil || got.Method != "roots/list" {
		t.Fatalf("Answer = %+v, %v", got, err)
	}
	if _, err := s.Answer(ctx, "acme", "old", `"a:1"`, now); err == nil {
		t.Fatal("answered twice")
	}
}
