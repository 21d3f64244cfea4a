package dynamo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
)

// TestAuditSpreadOverShards: one tenant's records are spread over its
// AuditShards partitions (none holds more than a quarter of 160), and a
// query paged 7 at a time returns each record exactly once, in time order,
// across the shards.
func TestAuditSpreadOverShards(t *testing.T) {
	const n = 160
	e := dynamotest.Start(t)
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	st := e.Store(t, dynamo.Options{AuditRetention: 24 * time.Hour, Now: func() time.Time { return now }})
	ctx := context.Background()
	t0 := now.Add(-time.Hour)
	for i := range n {
		// Times repeat (every fourth record shares one) to exercise ties.
		r := audit.Record{Time: t0.Add(time.Duration(i/4) * time.Millisecond), Tenant: "acme", CorrelationID: fmt.Sprintf("c%04d", i),
			Method: "tools/call", Outcome: audit.OutcomeAllowed}
		if err := st.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Write(ctx, audit.Record{Time: t0, Tenant: "acm", CorrelationID: "other", Method: "tools/call", Outcome: audit.OutcomeAllowed}); err != nil {
		t.Fatal(err)
	}
	raw := e.Client(t)
	perShard := map[string]int{}
	for _, pk := range dynamo.AuditPKs("acme") {
		out, err := raw.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(e.Tables.Audit), Select: types.SelectCount,
			KeyConditionExpression:    aws.String("pk = :t"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":t": dynamo.S(pk)}})
		if err != nil {
			t.Fatal(err)
		}
		perShard[pk] = int(out.Count)
	}
	t.Logf("records per shard: %v", perShard)
	total := 0
	for pk, c := range perShard {
		total += c
		if c == 0 || c > n/4 {
			t.Errorf("shard %s holds %d of %d records; want some, at most a quarter", pk, c, n)
		}
	}
	if total != n {
		t.Fatalf("%d records in the shards, want %d", total, n)
	}
	var got []audit.Record
	cursor, pages := "", 0
	for {
		page, next, err := st.Query(ctx, audit.Query{Tenant: "acme", From: t0, To: now, Limit: 7, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 7 {
			t.Fatalf("page of %d, limit 7", len(page))
		}
		got = append(got, page...)
		pages++
		if next == "" {
			break
		}
		cursor = next
		if pages > n {
			t.Fatal("the cursor never ends")
		}
	}
	if len(got) != n {
		t.Fatalf("paged query returned %d records, want %d", len(got), n)
	}
	for i, r := range got {
		if want := fmt.Sprintf("c%04d", i); r.CorrelationID != want {
			t.Fatalf("record %d is %s, want %s (time order, ties by correlation id)", i, r.CorrelationID, want)
		}
	}
	if _, _, err := st.Query(ctx, audit.Query{Tenant: "acme", From: t0, To: now, Cursor: "WyJhIl0"}); err == nil {
		t.Fatal("a cursor with one shard's key for eight: accepted")
	}
}
