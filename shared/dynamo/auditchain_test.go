package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/internal/auditchaintest"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
)

// TestAuditChainTamper runs the audit chain's tamper suite on DynamoDB
// (moto_server), editing the audit table with plain PutItem and
// DeleteItem calls as anyone with write access to it could.
func TestAuditChainTamper(t *testing.T) {
	auditchaintest.Run(t, func(t *testing.T) auditchaintest.Env {
		e := dynamotest.Start(t)
		st := e.Store(t, dynamo.Options{AuditRetention: 24 * time.Hour})
		raw := e.Client(t)
		ctx := context.Background()
		items := func(t *testing.T) []map[string]types.AttributeValue {
			var all []map[string]types.AttributeValue
			for _, pk := range dynamo.AuditPKs(auditchaintest.Tenant) {
				out, err := raw.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(e.Tables.Audit),
					KeyConditionExpression:    aws.String("pk = :t"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":t": dynamo.S(pk)}})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, out.Items...)
			}
			return all
		}
		find := func(t *testing.T, match func(it dynamo.Item) bool) dynamo.Item {
			for _, it := range items(t) {
				if match(it) {
					return dynamo.Key(dynamo.GetS(it, "pk"), dynamo.GetS(it, "sk"))
				}
			}
			t.Fatal("item not found")
			return nil
		}
		record := func(r audit.Record) func(dynamo.Item) bool {
			return func(it dynamo.Item) bool {
				return dynamo.GetS(it, "writer") == r.Writer && dynamo.GetS(it, "correlation_id") == r.CorrelationID &&
					dynamo.GetN(it, "seq") == int64(r.Seq)
			}
		}
		cp := func(c audit.Checkpoint) func(dynamo.Item) bool {
			return func(it dynamo.Item) bool {
				return dynamo.GetS(it, "writer") == c.Writer && dynamo.GetN(it, "number") == int64(c.Number)
			}
		}
		put := func(t *testing.T, it dynamo.Item) {
			if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.Tables.Audit), Item: it}); err != nil {
				t.Fatal(err)
			}
		}
		del := func(t *testing.T, key dynamo.Item) {
			if _, err := raw.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(e.Tables.Audit), Key: key}); err != nil {
				t.Fatal(err)
			}
		}
		return auditchaintest.Env{Store: st,
			Replace: func(t *testing.T, old, n audit.Record) {
				key := find(t, record(old))
				it := dynamo.AuditItem(n, 24*time.Hour, "x")
				it["pk"], it["sk"] = key["pk"], key["sk"]
				put(t, it)
			},
			Delete: func(t *testing.T, r audit.Record) { del(t, find(t, record(r))) },
			DeleteCheckpoint: func(t *testing.T, c audit.Checkpoint) {
				del(t, find(t, cp(c)))
			},
			ReplaceCheckpoint: func(t *testing.T, old, n audit.Checkpoint) {
				key := find(t, cp(old))
				put(t, dynamo.Item{"pk": key["pk"], "sk": key["sk"], "writer": dynamo.S(n.Writer),
					"number": dynamo.N(int64(n.Number)), "time": dynamo.S(n.Time.UTC().Format(time.RFC3339Nano)),
					"note": dynamo.S(n.Note), "ttl": dynamo.N(time.Now().Add(time.Hour).Unix())})
			},
		}
	})
}
