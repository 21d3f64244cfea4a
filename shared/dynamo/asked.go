package dynamo

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

// A session's outstanding server requests (session.Outstanding) are the
// map attribute "ask" of its session item: the client's id → {s server,
// m method, x expiry in Unix nanoseconds}. At most session.MaxAsked
// entries (the condition size(ask) < MaxAsked, asked only of a map:
// size() of an attribute that is not there is an error on moto), so the
// item stays small; they go with the item.
//
// Ask is one UpdateItem in the usual case. When its condition fails, a
// consistent read says why: no session (ErrNotFound), no "ask" map yet (a
// session created before it existed: one conditional SET of the whole
// map), or a full map (its expired entries are removed, and the Ask is
// tried once more). Answer is one UpdateItem that removes the entry under
// the condition that it exists (so exactly one Answer gets it) and
// returns the old value.
const attrAsked = "ask"

func askedValue(a session.Asked) types.AttributeValue {
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"s": S(a.Server), "m": S(a.Method), "x": N(a.Expires.UnixNano()),
	}}
}

func askedFrom(v types.AttributeValue) (session.Asked, bool) {
	m, ok := v.(*types.AttributeValueMemberM)
	if !ok {
		return session.Asked{}, false
	}
	return session.Asked{Server: GetS(m.Value, "s"), Method: GetS(m.Value, "m"), Expires: time.Unix(0, GetN(m.Value, "x")).UTC()}, true
}

// Ask implements session.Outstanding.
func (s *Store) Ask(ctx context.Context, tenant, id, key string, a session.Asked, now time.Time) error {
	for attempt := 0; attempt < 2; attempt++ {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(s.tables.State),
			Key:                       sessionKey(tenant, id),
			UpdateExpression:          aws.String("SET #a.#k = :v"),
			ConditionExpression:       aws.String("attribute_exists(pk) AND (attribute_exists(#a.#k) OR (attribute_type(#a, :map) AND size(#a) < :max))"),
			ExpressionAttributeNames:  map[string]string{"#a": attrAsked, "#k": key},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": askedValue(a), ":max": N(session.MaxAsked), ":map": S("M")},
		})
		if err = mapErr("session Ask", err); !isConflict(err) {
			return err
		}
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(s.tables.State), Key: sessionKey(tenant, id), ConsistentRead: aws.Bool(true),
			ProjectionExpression: aws.String("pk, #a"), ExpressionAttributeNames: map[string]string{"#a": attrAsked},
		})
		if err != nil {
			return mapErr("session Ask", err)
		}
		if out.Item == nil {
			return store.ErrNotFound
		}
		cur, ok := out.Item[attrAsked].(*types.AttributeValueMemberM)
		if !ok {
			_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(s.tables.State),
				Key:                       sessionKey(tenant, id),
				UpdateExpression:          aws.String("SET #a = :m"),
				ConditionExpression:       aws.String("attribute_exists(pk) AND attribute_not_exists(#a)"),
				ExpressionAttributeNames:  map[string]string{"#a": attrAsked},
				ExpressionAttributeValues: map[string]types.AttributeValue{":m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{key: askedValue(a)}}},
			})
			if err = mapErr("session Ask", err); !isConflict(err) {
				return err
			}
			continue // another writer made the map, or the session went: try again
		}
		names := map[string]string{"#a": attrAsked}
		expr := ""
		for k, v := range cur.Value {
			if x, ok := askedFrom(v); ok && now.Before(x.Expires) {
				continue
			}
			n := "#e" + strconv.Itoa(len(names))
			names[n] = k
			if expr != "" {
				expr += ", "
			}
			expr += "#a." + n
		}
		if expr == "" {
			return session.ErrTooManyAsked
		}
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.tables.State), Key: sessionKey(tenant, id),
			UpdateExpression: aws.String("REMOVE " + expr), ConditionExpression: aws.String("attribute_exists(pk)"),
			ExpressionAttributeNames: names,
		})
		if err = mapErr("session Ask", err); err != nil {
			if isConflict(err) {
				return store.ErrNotFound
			}
			return err
		}
	}
	return session.ErrTooManyAsked
}

// Answer implements session.Outstanding.
func (s *Store) Answer(ctx context.Context, tenant, id, key string, now time.Time) (session.Asked, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.tables.State),
		Key:                      sessionKey(tenant, id),
		UpdateExpression:         aws.String("REMOVE #a.#k"),
		ConditionExpression:      aws.String("attribute_exists(#a.#k)"),
		ExpressionAttributeNames: map[string]string{"#a": attrAsked, "#k": key},
		ReturnValues:             types.ReturnValueUpdatedOld,
	})
	if err = mapErr("session Answer", err); err != nil {
		if isConflict(err) {
			return session.Asked{}, store.ErrNotFound
		}
		return session.Asked{}, err
	}
	m, _ := out.Attributes[attrAsked].(*types.AttributeValueMemberM)
	if m == nil {
		return session.Asked{}, store.ErrNotFound
	}
	a, ok := askedFrom(m.Value[key])
	if !ok || !now.Before(a.Expires) {
		return session.Asked{}, store.ErrNotFound
	}
	return a, nil
}

var _ session.Outstanding = (*Store)(nil)
