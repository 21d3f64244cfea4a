package dynamo

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/breaker"
)

// Circuit item (state table), one per tenant and server:
//
//	pk BRK#<key>  sk CIRCUIT  state B  open_until N  failures N  probe S  probe_until N  v N
//
// Times are Unix nanoseconds. PutCircuit is one PutItem conditional on the
// version read (attribute_not_exists(pk) for version 0), so two processes
// racing on a transition cannot both win. Circuit is one strongly
// consistent GetItem. No ttl: a circuit is a few bytes per server.
//
// Lease item (state table), one per tenant and server:
//
//	pk LEASE#<key>  sk LEASES  holders M{holder: expiry N}  ttl N
//
// AcquireLease is one UpdateItem on the happy path: SET holders.#h with
// the condition size(holders) < :limit. When the condition fails on a full
// map, expired holders (a process that died mid-call) are removed with a
// conditional REMOVE and the update is tried again; an absent item is
// created first. ReleaseLease is one UpdateItem REMOVE.
const (
	prefixCircuit = "BRK"
	skCircuit     = "CIRCUIT"
	prefixLease   = "LEASE"
	skLeases      = "LEASES"
)

func nanos(t time.Time) types.AttributeValue {
	if t.IsZero() {
		return N(0)
	}
	return N(t.UnixNano())
}

func getTime(it Item, name string) time.Time {
	n := GetN(it, name)
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Circuit implements breaker.Store.
func (s *Store) Circuit(ctx context.Context, key string) (breaker.Circuit, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.tables.State), Key: Key(JoinKey(prefixCircuit, key), skCircuit), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return breaker.Circuit{}, mapErr("Circuit", err)
	}
	it := out.Item
	if len(it) == 0 {
		return breaker.Circuit{}, nil
	}
	c := breaker.Circuit{
		OpenUntil: getTime(it, "open_until"), Failures: int(GetN(it, "failures")),
		Probe: GetS(it, "probe"), ProbeUntil: getTime(it, "probe_until"), Version: GetN(it, "v"),
	}
	if b, ok := it["state"].(*types.AttributeValueMemberB); ok {
		c.State = b.Value
	}
	return c, nil
}

// PutCircuit implements breaker.Store.
func (s *Store) PutCircuit(ctx context.Context, key string, c breaker.Circuit) error {
	it := Key(JoinKey(prefixCircuit, key), skCircuit)
	if len(c.State) > 0 {
		it["state"] = &types.AttributeValueMemberB{Value: c.State}
	}
	it["open_until"] = nanos(c.OpenUntil)
	it["failures"] = N(int64(c.Failures))
	if c.Probe != "" {
		it["probe"] = S(c.Probe)
	}
	it["probe_until"] = nanos(c.ProbeUntil)
	it["v"] = N(c.Version + 1)
	in := &dynamodb.PutItemInput{TableName: aws.String(s.tables.State), Item: it}
	if c.Version == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(pk)")
	} else {
		in.ConditionExpression = aws.String("v = :v")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": N(c.Version)}
	}
	_, err := s.db.PutItem(ctx, in)
	return mapErr("PutCircuit", err)
}

// AcquireLease implements breaker.Store.
func (s *Store) AcquireLease(ctx context.Context, key, holder string, limit int, now, expires time.Time) (bool, error) {
	k := Key(JoinKey(prefixLease, key), skLeases)
	cacheKey := s.tables.State + "\x00" + key
	if _, ok := leaseItems.Load(cacheKey); !ok {
		if err := s.createLeaseItem(ctx, k, expires); err != nil {
			return false, err
		}
		leaseItems.Store(cacheKey, struct{}{})
	}
	for attempt := range 4 {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           aws.String(s.tables.State),
			Key:                                 k,
			UpdateExpression:                    aws.String("SET holders.#h = :exp, #ttl = :ttl"),
			ConditionExpression:                 aws.String("size(holders) < :limit"),
			ExpressionAttributeNames:            map[string]string{"#h": holder, "#ttl": AttrTTL},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":exp": N(expires.UnixNano()), ":ttl": TTL(expires.Add(time.Hour)), ":limit": N(int64(limit))},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			if err != nil && attempt == 0 {
				// Perhaps the item is gone (moto_server errs instead of
				// failing the condition): create it and try once more.
				leaseItems.Delete(cacheKey)
				if cerr := s.createLeaseItem(ctx, k, expires); cerr == nil {
					continue
				}
			}
			if err != nil {
				return false, mapErr("AcquireLease", err)
			}
			return true, nil
		}
		holders, ok := ccf.Item["holders"].(*types.AttributeValueMemberM)
		if !ok { // the item was collected: create the empty map, then try again
			if err := s.createLeaseItem(ctx, k, expires); err != nil {
				return false, err
			}
			continue
		}
		// Full: drop the leases of holders that died, if any.
		names := map[string]string{}
		values := map[string]types.AttributeValue{}
		remove, cond := "REMOVE ", ""
		i := 0
		for h, v := range holders.Value {
			n, _ := v.(*types.AttributeValueMemberN)
			if n == nil {
				continue
			}
			exp, _ := strconv.ParseInt(n.Value, 10, 64)
			if exp > now.UnixNano() {
				continue
			}
			id := strconv.Itoa(i)
			names["#h"+id] = h
			values[":e"+id] = n
			if i > 0 {
				remove += ", "
				cond += " AND "
			}
			remove += "holders.#h" + id
			cond += "holders.#h" + id + " = :e" + id
			i++
		}
		if i == 0 {
			return false, nil
		}
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.tables.State), Key: k, UpdateExpression: aws.String(remove),
			ConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		})
		if err != nil && !isConflict(mapErr("AcquireLease", err)) {
			return false, mapErr("AcquireLease", err)
		}
	}
	return false, nil
}

// leaseItems remembers the lease items this process knows exist, so the
// create-if-absent PutItem runs once per process and key. (DynamoDB itself
// reports a failed condition for an absent item, which AcquireLease also
// handles; moto_server answers size() of an absent map with an error.)
var leaseItems sync.Map

func (s *Store) createLeaseItem(ctx context.Context, k Item, expires time.Time) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(s.tables.State),
		Item:                mergeItem(k, Item{"holders": &types.AttributeValueMemberM{Value: Item{}}, AttrTTL: TTL(expires.Add(time.Hour))}),
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if err = mapErr("AcquireLease", err); err != nil && !isConflict(err) {
		return err
	}
	return nil
}

// ReleaseLease implements breaker.Store.
func (s *Store) ReleaseLease(ctx context.Context, key, holder string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.tables.State),
		Key:                      Key(JoinKey(prefixLease, key), skLeases),
		UpdateExpression:         aws.String("REMOVE holders.#h"),
		ConditionExpression:      aws.String("attribute_exists(holders)"),
		ExpressionAttributeNames: map[string]string{"#h": holder},
	})
	if err = mapErr("ReleaseLease", err); isConflict(err) {
		return nil
	}
	return err
}

// InFlight implements breaker.Store: one consistent read of the lease
// item, counting the holders whose expiry is after now.
func (s *Store) InFlight(ctx context.Context, key string, now time.Time) (int, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.tables.State), Key: Key(JoinKey(prefixLease, key), skLeases), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return 0, mapErr("InFlight", err)
	}
	holders, _ := out.Item["holders"].(*types.AttributeValueMemberM)
	if holders == nil {
		return 0, nil
	}
	n := 0
	for _, v := range holders.Value {
		if e, ok := v.(*types.AttributeValueMemberN); ok {
			if exp, err := strconv.ParseInt(e.Value, 10, 64); err == nil && exp > now.UnixNano() {
				n++
			}
		}
	}
	return n, nil
}

func mergeItem(a, b Item) Item {
	out := Item{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

var _ breaker.Store = (*Store)(nil)
