package dynamo

import (
	"context"
	"errors"
	"strconv"
	"strings"
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

// A group (ratelimit.Counter.IncrGroup) is the key's counter item with
// one more number attribute per extra counter, named "x#" + its name (a
// session window's item holds the session's tool windows of that minute):
//
//	pk C#<key>  sk COUNTER  n N  x#<name> N ...  ttl N
//
// IncrGroup is one UpdateItem: ADD n :1, x#a :1, ... with the condition
// that each is absent or below its limit; a lost condition returns the
// item as it was (ALL_OLD), from which the counter at its limit is named.
// The item grows by one attribute per distinct extra counted in its
// window (a tool called in that session's minute, about 30 bytes each).
const extraPrefix = "x#"

// IncrGroup implements ratelimit.Counter.
func (s *Store) IncrGroup(ctx context.Context, key string, limit int64, extras []ratelimit.Extra, expires time.Time) ([]int64, bool, error) {
	names := map[string]string{"#ttl": AttrTTL}
	vals := map[string]types.AttributeValue{":one": N(1), ":ttl": TTL(expires.Add(time.Minute))}
	update := "ADD n :one"
	var cond []string
	if limit > 0 {
		cond = append(cond, "(attribute_not_exists(n) OR n < :limit)")
		vals[":limit"] = N(limit)
	}
	for i, e := range extras {
		id := strconv.Itoa(i)
		names["#x"+id] = extraPrefix + e.Name
		update += ", #x" + id + " :one"
		if e.Limit > 0 {
			cond = append(cond, "(attribute_not_exists(#x"+id+") OR #x"+id+" < :l"+id+")")
			vals[":l"+id] = N(e.Limit)
		}
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.tables.State),
		Key:                       Key(JoinKey("C", key), skCounter),
		UpdateExpression:          aws.String(update + " SET #ttl = if_not_exists(#ttl, :ttl)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
		ReturnValues:              types.ReturnValueUpdatedNew,
	}
	if len(cond) > 0 {
		in.ConditionExpression = aws.String(strings.Join(cond, " AND "))
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	out, err := s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return groupValues(ccf.Item, extras), false, nil
	}
	if err != nil {
		return nil, false, mapErr("IncrGroup", err)
	}
	return groupValues(out.Attributes, extras), true, nil
}

func groupValues(it Item, extras []ratelimit.Extra) []int64 {
	n := make([]int64, 1+len(extras))
	n[0] = GetN(it, "n")
	for i, e := range extras {
		n[1+i] = GetN(it, extraPrefix+e.Name)
	}
	return n
}

// DecrGroup implements ratelimit.Counter: one UpdateItem that takes one
// from n and each named extra that is above zero. DynamoDB cannot decide
// per attribute in one write, so the condition is that all are above
// zero (as they are after the IncrGroup they give back); otherwise each
// is given back on its own.
func (s *Store) DecrGroup(ctx context.Context, key string, extras []string) error {
	names := map[string]string{}
	update, cond := "ADD n :minus", "n > :zero"
	for i, e := range extras {
		id := strconv.Itoa(i)
		names["#x"+id] = extraPrefix + e
		update += ", #x" + id + " :minus"
		cond += " AND #x" + id + " > :zero"
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.tables.State),
		Key:                       Key(JoinKey("C", key), skCounter),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeValues: map[string]types.AttributeValue{":minus": N(-1), ":zero": N(0)},
	}
	if len(names) > 0 {
		in.ExpressionAttributeNames = names
	}
	_, err := s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return mapErr("DecrGroup", err)
	}
	if len(extras) == 0 {
		return nil
	}
	if err := s.Decr(ctx, key); err != nil {
		return err
	}
	for _, e := range extras {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(s.tables.State),
			Key:                       Key(JoinKey("C", key), skCounter),
			UpdateExpression:          aws.String("ADD #x :minus"),
			ConditionExpression:       aws.String("#x > :zero"),
			ExpressionAttributeNames:  map[string]string{"#x": extraPrefix + e},
			ExpressionAttributeValues: map[string]types.AttributeValue{":minus": N(-1), ":zero": N(0)},
		})
		if err != nil && !errors.As(err, &ccf) {
			return mapErr("DecrGroup", err)
		}
	}
	return nil
}

var (
	_ ratelimit.Counter = (*Store)(nil)
	_ quota.Meter       = (*Store)(nil)
)
