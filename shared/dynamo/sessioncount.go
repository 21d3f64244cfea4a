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

// The session item's manifest counters (session.Counter):
//
//	last_allowed N (Unix nanoseconds), tool_calls N, steps NS (distinct declared steps)
//
// Count is one UpdateItem: SET last_allowed, ADD tool_calls and ADD the
// step to the number set, on the condition that the session exists and
// the set holds fewer than session.MaxSteps steps or holds this one. When
// only the bound fails, the update is made again without the step.
const (
	attrLastAllowed = "last_allowed"
	attrToolCalls   = "tool_calls"
	attrSteps       = "steps"
)

// Count implements session.Counter.
func (s *Store) Count(ctx context.Context, tenant, id string, u session.Use) error {
	calls := int64(0)
	if u.ToolCall {
		calls = 1
	}
	vals := map[string]types.AttributeValue{":at": N(u.At.UnixNano()), ":c": N(calls)}
	update := "SET last_allowed = :at ADD tool_calls :c"
	cond := "attribute_exists(pk)"
	if u.Declared {
		n := strconv.FormatInt(u.Step, 10)
		vals[":s"] = &types.AttributeValueMemberNS{Value: []string{n}}
		vals[":n"] = &types.AttributeValueMemberN{Value: n}
		vals[":max"] = N(session.MaxSteps)
		update += ", steps :s"
		cond += " AND (attribute_not_exists(steps) OR size(steps) < :max OR contains(steps, :n))"
	}
	err := s.count(ctx, tenant, id, update, cond, vals)
	if isConflict(err) && u.Declared {
		// The session is gone, or its steps are at the bound: count the
		// call without recording the step.
		delete(vals, ":s")
		delete(vals, ":n")
		delete(vals, ":max")
		err = s.count(ctx, tenant, id, "SET last_allowed = :at ADD tool_calls :c", "attribute_exists(pk)", vals)
	}
	if isConflict(err) {
		return store.ErrNotFound
	}
	return err
}

// Reserve implements session.Counter: one UpdateItem, ADD tool_calls 1 on
// the condition that the session exists and holds fewer than limit; the
// count before it is the updated value less one. When the condition
// fails, a consistent read tells a missing session from one at its limit.
func (s *Store) Reserve(ctx context.Context, tenant, id string, limit int) (int, bool, error) {
	cond := "attribute_exists(pk)"
	vals := map[string]types.AttributeValue{":one": N(1)}
	if limit > 0 {
		cond += " AND (attribute_not_exists(tool_calls) OR tool_calls < :max)"
		vals[":max"] = N(int64(limit))
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.tables.State),
		Key:                       sessionKey(tenant, id),
		UpdateExpression:          aws.String("ADD tool_calls :one"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeValues: vals,
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	err = mapErr("session Reserve", err)
	switch {
	case err == nil:
		return int(GetN(out.Attributes, attrToolCalls)) - 1, true, nil
	case !isConflict(err):
		return 0, false, err
	}
	got, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:            aws.String(s.tables.State),
		Key:                  sessionKey(tenant, id),
		ConsistentRead:       aws.Bool(true),
		ProjectionExpression: aws.String("pk, tool_calls"),
	})
	if err = mapErr("session Reserve", err); err != nil {
		return 0, false, err
	}
	if len(got.Item) == 0 {
		return 0, false, store.ErrNotFound
	}
	return int(GetN(got.Item, attrToolCalls)), false, nil
}

// Release implements session.Counter: ADD tool_calls -1 while it is above
// zero. A session at zero is left as it is; a missing one is
// store.ErrNotFound.
func (s *Store) Release(ctx context.Context, tenant, id string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.tables.State),
		Key:                       sessionKey(tenant, id),
		UpdateExpression:          aws.String("ADD tool_calls :minus"),
		ConditionExpression:       aws.String("attribute_exists(pk) AND tool_calls > :zero"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":minus": N(-1), ":zero": N(0)},
	})
	if err = mapErr("session Release", err); !isConflict(err) {
		return err
	}
	got, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.tables.State), Key: sessionKey(tenant, id),
		ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("pk"),
	})
	if err = mapErr("session Release", err); err != nil {
		return err
	}
	if len(got.Item) == 0 {
		return store.ErrNotFound
	}
	return nil
}

func (s *Store) count(ctx context.Context, tenant, id, update, cond string, vals map[string]types.AttributeValue) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.tables.State),
		Key:                       sessionKey(tenant, id),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeValues: vals,
	})
	return mapErr("session Count", err)
}

// sessionCounters reads the manifest counters of a session item into r.
func sessionCounters(it Item, r *session.Record) {
	if ns := GetN(it, attrLastAllowed); ns != 0 {
		r.LastAllowed = time.Unix(0, ns).UTC()
	}
	r.ToolCalls = int(GetN(it, attrToolCalls))
	if set, ok := it[attrSteps].(*types.AttributeValueMemberNS); ok {
		for _, v := range set.Value {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				r.Steps = append(r.Steps, n)
			}
		}
	}
}

var _ session.Counter = (*Store)(nil)
