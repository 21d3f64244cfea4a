package dynamo

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/idempotency"
)

// Idempotency item (state table), one per tenant and key:
//
//	pk IDEM#<tenant>#<key>  sk IDEM  hash S  holder S  done N(0|1)  result B  error B  expires N  ttl N
//
// ClaimKey is one PutItem with the condition attribute_not_exists(pk) OR
// expires <= :now (an expired claim or answer is absent, whether or not TTL
// has collected it); a lost condition returns the live record
// (ReturnValuesOnConditionCheckFailure ALL_OLD), so a replay costs one
// round trip. CompleteKey and ReleaseKey are conditional on the holder and
// on done = 0.
const (
	prefixIdem = "IDEM"
	skIdem     = "IDEM"
)

func idemItem(tenant, key string, r idempotency.Record) Item {
	it := Key(JoinKey(prefixIdem, tenant, key), skIdem)
	it["hash"] = S(r.ParamsHash)
	it["holder"] = S(r.Holder)
	done := int64(0)
	if r.Done {
		done = 1
	}
	it["done"] = N(done)
	if len(r.Result) > 0 {
		it["result"] = &types.AttributeValueMemberB{Value: r.Result}
	}
	if len(r.Error) > 0 {
		it["error"] = &types.AttributeValueMemberB{Value: r.Error}
	}
	it["expires"] = N(r.Expires.UnixNano())
	it[AttrTTL] = TTL(r.Expires)
	return it
}

func idemFromItem(it Item) idempotency.Record {
	r := idempotency.Record{ParamsHash: GetS(it, "hash"), Holder: GetS(it, "holder"), Done: GetN(it, "done") == 1, Expires: getTime(it, "expires")}
	if b, ok := it["result"].(*types.AttributeValueMemberB); ok {
		r.Result = b.Value
	}
	if b, ok := it["error"].(*types.AttributeValueMemberB); ok {
		r.Error = b.Value
	}
	return r
}

// ClaimKey implements idempotency.Store.
func (s *Store) ClaimKey(ctx context.Context, tenant, key string, r idempotency.Record, now time.Time) (idempotency.Record, bool, error) {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.tables.State),
		Item:                                idemItem(tenant, key, r),
		ConditionExpression:                 aws.String("attribute_not_exists(pk) OR expires <= :now"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":now": N(now.UnixNano())},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return idemFromItem(ccf.Item), false, nil
	}
	if err != nil {
		return idempotency.Record{}, false, mapErr("ClaimKey", err)
	}
	return idempotency.Record{}, true, nil
}

// CompleteKey implements idempotency.Store.
func (s *Store) CompleteKey(ctx context.Context, tenant, key, holder string, r idempotency.Record) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.tables.State),
		Item:                      idemItem(tenant, key, r),
		ConditionExpression:       aws.String("holder = :h AND done = :zero"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": S(holder), ":zero": N(0)},
	})
	return mapErr("CompleteKey", err)
}

// ReleaseKey implements idempotency.Store.
func (s *Store) ReleaseKey(ctx context.Context, tenant, key, holder string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.tables.State),
		Key:                       Key(JoinKey(prefixIdem, tenant, key), skIdem),
		ConditionExpression:       aws.String("holder = :h AND done = :zero"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": S(holder), ":zero": N(0)},
	})
	if err = mapErr("ReleaseKey", err); isConflict(err) {
		return nil
	}
	return err
}

var _ idempotency.Store = (*Store)(nil)
