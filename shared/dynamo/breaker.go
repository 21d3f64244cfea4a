package dynamo

import (
	"context"
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
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
// Lease items (state table): the leases of one tenant and server are
// sharded over S = min(limit, MaxLeaseShards) items, shard i holding at
// most its cap, limit/S (plus one for the first limit mod S), so that the
// caps add up to limit exactly (docs/design/cost.md):
//
//	pk LEASE#<key>#<i>  sk LEASES  n N (holders)  h#<holder> N (its expiry) ...  ttl N
//
// AcquireLease is one UpdateItem on the happy path, on the shard the
// holder id hashes to: SET h#<holder>, ADD n 1, with the condition n <
// cap (an absent item is created by it). When the condition fails, the
// item as it was (ALL_OLD) names the expired holders (a process that died
// mid-call); they are removed in one conditional update and the take is
// tried again. When the shard is full of live holders, every shard is
// read in one consistent BatchGetItem and those with room are tried in
// turn: a call is refused only when each shard was found full. The shard
// a holder got is kept in process (leaseShards) until ReleaseLease, one
// UpdateItem REMOVE h#<holder>, ADD n -1 on the condition that it holds.
// (Items of the unsharded layout, LEASE#<key> with a holders map, are
// no longer read; their ttl collects them.)
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

// MaxLeaseShards bounds the items one key's leases are spread over: at
// 2,000 calls a second each shard takes 500 writes a second, half of
// DynamoDB's per-item limit (docs/design/cost.md).
const MaxLeaseShards = 8

// leaseShardCount is the number of shards of a key under limit.
func leaseShardCount(limit int) int { return min(max(limit, 1), MaxLeaseShards) }

// leaseShardCap is shard i's share of limit over n shards.
func leaseShardCap(limit, n, i int) int {
	c := limit / n
	if i < limit%n {
		c++
	}
	return c
}

// leaseItemKey is shard i's item of key.
func leaseItemKey(key string, i int) Item {
	return Key(JoinKey(prefixLease, key, strconv.Itoa(i)), skLeases)
}

// holderPrefix starts the attribute name of a holder's expiry.
const holderPrefix = "h#"

// leaseShards is the shard each live holder of this process got, from
// AcquireLease to ReleaseLease: at most the calls this process has in
// flight (the breaker releases every lease it takes).
var leaseShards sync.Map // tables.State + "\x00" + key + "\x00" + holder → int

// AcquireLease implements breaker.Store.
func (s *Store) AcquireLease(ctx context.Context, key, holder string, limit int, now, expires time.Time) (bool, error) {
	n := leaseShardCount(limit)
	h := fnv.New32a()
	h.Write([]byte(holder))
	first := int(h.Sum32() % uint32(n))
	ok, err := s.acquireShard(ctx, key, first, holder, leaseShardCap(limit, n, first), now, expires)
	if err != nil || ok || n == 1 {
		return s.leased(key, holder, first, ok, err)
	}
	held, err := s.leaseCounts(ctx, key, n, now)
	if err != nil {
		return false, err
	}
	for d := 1; d < n; d++ {
		i := (first + d) % n
		c := leaseShardCap(limit, n, i)
		if held[i] >= c {
			continue
		}
		if ok, err := s.acquireShard(ctx, key, i, holder, c, now, expires); err != nil || ok {
			return s.leased(key, holder, i, ok, err)
		}
	}
	return false, nil
}

// leased records that holder got shard i of key, when ok.
func (s *Store) leased(key, holder string, i int, ok bool, err error) (bool, error) {
	if ok {
		leaseShards.Store(s.tables.State+"\x00"+key+"\x00"+holder, i)
	}
	return ok, err
}

// leaseCounts reads shards 0..n-1 of key in one consistent BatchGetItem
// and counts their holders live at now.
func (s *Store) leaseCounts(ctx context.Context, key string, n int, now time.Time) ([]int, error) {
	keys := make([]map[string]types.AttributeValue, n)
	for i := range n {
		keys[i] = leaseItemKey(key, i)
	}
	held := make([]int, n)
	req := map[string]types.KeysAndAttributes{s.tables.State: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	for len(req) > 0 {
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, mapErr("AcquireLease", err)
		}
		for _, it := range out.Responses[s.tables.State] {
			for i := range n {
				if GetS(it, "pk") == GetS(keys[i], "pk") {
					held[i] = liveHolders(it, now)
				}
			}
		}
		req = out.UnprocessedKeys
	}
	return held, nil
}

// liveHolders counts the holders of a lease item whose expiry is after now.
func liveHolders(it Item, now time.Time) int {
	n := 0
	for _, h := range holders(it) {
		if h.exp > now.UnixNano() {
			n++
		}
	}
	return n
}

type holder struct {
	attr string
	exp  int64
	v    types.AttributeValue
}

// holders are the holder attributes of a lease item.
func holders(it Item) []holder {
	var hs []holder
	for name, v := range it {
		if !strings.HasPrefix(name, holderPrefix) {
			continue
		}
		if e, ok := v.(*types.AttributeValueMemberN); ok {
			if exp, err := strconv.ParseInt(e.Value, 10, 64); err == nil {
				hs = append(hs, holder{name, exp, v})
			}
		}
	}
	return hs
}

// acquireShard takes one of cap slots of shard i of key for holder.
func (s *Store) acquireShard(ctx context.Context, key string, i int, holder string, limit int, now, expires time.Time) (bool, error) {
	k := leaseItemKey(key, i)
	for range 4 {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           aws.String(s.tables.State),
			Key:                                 k,
			UpdateExpression:                    aws.String("SET #h = :exp, #ttl = :ttl ADD n :one"),
			ConditionExpression:                 aws.String("attribute_not_exists(n) OR n < :cap"),
			ExpressionAttributeNames:            map[string]string{"#h": holderPrefix + holder, "#ttl": AttrTTL},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":exp": N(expires.UnixNano()), ":ttl": TTL(expires.Add(time.Hour)), ":cap": N(int64(limit)), ":one": N(1)},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			if err != nil {
				return false, mapErr("AcquireLease", err)
			}
			return true, nil
		}
		// Full: drop the leases of holders that died, if any.
		names := map[string]string{}
		values := map[string]types.AttributeValue{}
		remove, cond := "REMOVE ", ""
		j := 0
		for _, h := range holders(ccf.Item) {
			if h.exp > now.UnixNano() {
				continue
			}
			id := strconv.Itoa(j)
			names["#h"+id] = h.attr
			values[":e"+id] = h.v
			if j > 0 {
				remove += ", "
				cond += " AND "
			}
			remove += "#h" + id
			cond += "#h" + id + " = :e" + id
			j++
		}
		if j == 0 {
			return false, nil
		}
		values[":gone"] = N(int64(-j))
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.tables.State), Key: k, UpdateExpression: aws.String(remove + " ADD n :gone"),
			ConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		})
		if err != nil && !isConflict(mapErr("AcquireLease", err)) {
			return false, mapErr("AcquireLease", err)
		}
	}
	return false, nil
}

// ReleaseLease implements breaker.Store, on the shard AcquireLease gave
// holder in this process (shard 0 for a holder it does not know: the
// release of a lease not held is not an error).
func (s *Store) ReleaseLease(ctx context.Context, key, holder string) error {
	i := 0
	if v, ok := leaseShards.LoadAndDelete(s.tables.State + "\x00" + key + "\x00" + holder); ok {
		i = v.(int)
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.tables.State),
		Key:                       leaseItemKey(key, i),
		UpdateExpression:          aws.String("REMOVE #h ADD n :minus"),
		ConditionExpression:       aws.String("attribute_exists(#h)"),
		ExpressionAttributeNames:  map[string]string{"#h": holderPrefix + holder},
		ExpressionAttributeValues: map[string]types.AttributeValue{":minus": N(-1)},
	})
	if err = mapErr("ReleaseLease", err); isConflict(err) {
		return nil
	}
	return err
}

// InFlight implements breaker.Store: one consistent BatchGetItem of every
// shard a key can have (MaxLeaseShards), counting the holders whose
// expiry is after now.
func (s *Store) InFlight(ctx context.Context, key string, now time.Time) (int, error) {
	held, err := s.leaseCounts(ctx, key, MaxLeaseShards, now)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, h := range held {
		n += h
	}
	return n, nil
}

var _ breaker.Store = (*Store)(nil)
