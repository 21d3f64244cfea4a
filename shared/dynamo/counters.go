package dynamo

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/ratelimit"
)

// Counter item (state table), one per counter key (the key names its
// window: a rate-limit minute, a quota month):
//
//	pk C#<key>  sk COUNTER  n N  ttl N
//
// Incr is one UpdateItem: ADD n :1 with the condition
// attribute_not_exists(n) OR n < :limit (no condition without a limit). A
// lost condition returns the current value (ReturnValuesOnConditionCheckFailure
// ALL_OLD), so a refusal can say how much was used with no second read.
const skCounter = "COUNTER"

// Incr implements ratelimit.Counter and quota.Meter.
func (s *Store) Incr(ctx context.Context, key string, limit int64, expires time.Time) (int64, bool, error) {
	in := &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.tables.State),
		Key:                      Key(JoinKey("C", key), skCounter),
		UpdateExpression:         aws.String("ADD n :one SET #ttl = if_not_exists(#ttl, :ttl)"),
		ExpressionAttributeNames: map[string]string{"#ttl": AttrTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": N(1), ":ttl": TTL(expires.Add(time.Minute)),
		},
		ReturnValues: types.ReturnValueUpdatedNew,
	}
	if limit > 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(n) OR n < :limit")
		in.ExpressionAttributeValues[":limit"] = N(limit)
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	out, err := s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return GetN(ccf.Item, "n"), false, nil
	}
	if err != nil {
		return 0, false, mapErr("Incr", err)
	}
	return GetN(out.Attributes, "n"), true, nil
}

// Decr implements ratelimit.Counter and quota.Meter: one conditional ADD -1
// that never takes a counter below zero.
func (s *Store) Decr(ctx context.Context, key string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.tables.State),
		Key:                       Key(JoinKey("C", key), skCounter),
		UpdateExpression:          aws.String("ADD n :minus"),
		ConditionExpression:       aws.String("n > :zero"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":minus": N(-1), ":zero": N(0)},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	if err != nil {
		return mapErr("Decr", err)
	}
	return nil
}

// Value implements ratelimit.Counter and quota.Meter: one consistent
// GetItem of n (1 read unit).
func (s *Store) Value(ctx context.Context, key string) (int64, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:            aws.String(s.tables.State),
		Key:                  Key(JoinKey("C", key), skCounter),
		ConsistentRead:       aws.Bool(true),
		ProjectionExpression: aws.String("n"),
	})
	if err != nil {
		return 0, mapErr("counter read", err)
	}
	return GetN(out.Item, "n"), nil
}

var (
	_ ratelimit.Counter = (*Store)(nil)
	_ quota.Meter       = (*Store)(nil)
)
