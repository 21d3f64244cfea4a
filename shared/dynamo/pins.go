package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// Pin item (state table), in the tenant's partition so that one Query
// reads a tenant's pins (or one server's, by the sk prefix):
//
//	pk T#<tenant>  sk PIN#<server>#<tool>          doc   (a tool)
//	pk T#<tenant>  sk PIN#<server>#<kind>#<name>   doc   (a prompt, resource or template)
//
// A tool's key is the one pins had before kinds existed, so those pins
// are found where they are; the other kinds have one component more, and
// since components are escaped (KeyPart) no key of one kind is another's.
//
// PinIfAbsent is a put conditional on attribute_not_exists(pk): of two
// instances pinning one new entry at once, one wins and the other reads
// the winner's pin back (strongly consistent). SwapPin is a put
// conditional on the doc being the old pin's, as it was read. PutPin is
// unconditional: the last operator wins.
const prefixPin = "PIN"

func pinSK(server, kind, name string) string {
	if kind == registry.PinTool {
		return JoinKey(prefixPin, server, name)
	}
	return JoinKey(prefixPin, server, kind, name)
}

// Pins implements registry.PinStore.
func (s *Store) Pins(ctx context.Context, tenant, server string) ([]registry.Pin, error) {
	prefix := prefixPin + "#"
	if server != "" {
		prefix = JoinKey(prefixPin, server) + "#"
	}
	out, err := queryAll[registry.Pin](ctx, s, "Pins", tenantPK(tenant), prefix)
	slices.SortFunc(out, registry.ComparePins)
	return out, err
}

// PinIfAbsent implements registry.PinStore.
func (s *Store) PinIfAbsent(ctx context.Context, p registry.Pin) (registry.Pin, error) {
	pk, sk := tenantPK(p.Tenant), pinSK(p.Server, p.Kind, p.Tool)
	it, err := s.docItem(pk, sk, p)
	if err != nil {
		return registry.Pin{}, err
	}
	err = s.write(ctx, pinWrite{op: "PinIfAbsent", tenant: p.Tenant, dn: 1, db: registry.PinSize(p), item: types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(s.tables.State), Item: it, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}}})
	if err == nil {
		return p, nil
	}
	if !isConflict(err) || errors.Is(err, registry.ErrPinLimit) {
		return registry.Pin{}, err
	}
	var old registry.Pin
	if err := s.getDoc(ctx, "PinIfAbsent", pk, sk, &old); err != nil {
		return registry.Pin{}, err
	}
	return old, nil
}

// SwapPin implements registry.PinStore. The condition compares the stored
// doc with old encoded again: a pin's doc is the JSON encoding of its
// Pin, which decodes and encodes back to the same bytes.
func (s *Store) SwapPin(ctx context.Context, old, p registry.Pin) (registry.Pin, error) {
	pk, sk := tenantPK(p.Tenant), pinSK(p.Server, p.Kind, p.Tool)
	err := s.replacePin(ctx, "SwapPin", &old, p)
	if err == nil {
		return p, nil
	}
	if !isConflict(err) || errors.Is(err, registry.ErrPinLimit) {
		return registry.Pin{}, err
	}
	var cur registry.Pin
	if err := s.getDoc(ctx, "SwapPin", pk, sk, &cur); err != nil {
		return registry.Pin{}, err
	}
	return cur, nil
}

// replacePin writes p over old (nil: over no pin) while the stored pin is
// still old as read: store.ErrConflict when it is not.
func (s *Store) replacePin(ctx context.Context, op string, old *registry.Pin, p registry.Pin) error {
	it, err := s.docItem(tenantPK(p.Tenant), pinSK(p.Server, p.Kind, p.Tool), p)
	if err != nil {
		return err
	}
	put := &types.Put{TableName: aws.String(s.tables.State), Item: it, ConditionExpression: aws.String("attribute_not_exists(pk)")}
	w := pinWrite{op: op, tenant: p.Tenant, dn: 1, db: registry.PinSize(p), item: types.TransactWriteItem{Put: put}}
	if old != nil {
		was, err := Doc(*old)
		if err != nil {
			return err
		}
		put.ConditionExpression = aws.String("#d = :was")
		put.ExpressionAttributeNames = map[string]string{"#d": AttrDoc}
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":was": was}
		w.dn, w.db = 0, w.db-registry.PinSize(*old)
	}
	return s.write(ctx, w)
}

// maxPinRaces bounds PutPin's and DeletePin's read-then-write rounds
// when other writers keep changing the pin between the two.
const maxPinRaces = 5

// current reads the pin at p's key: nil when there is none.
func (s *Store) current(ctx context.Context, op string, tenant, server, kind, name string) (*registry.Pin, error) {
	var cur registry.Pin
	err := s.getDoc(ctx, op, tenantPK(tenant), pinSK(server, kind, name), &cur)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &cur, nil
}

// PutPin implements registry.PinStore: the pin in place is read first,
// so that the tally counts the bytes it replaces, and the write lands
// only while it is still that pin.
func (s *Store) PutPin(ctx context.Context, p registry.Pin) error {
	for range maxPinRaces {
		cur, err := s.current(ctx, "PutPin", p.Tenant, p.Server, p.Kind, p.Tool)
		if err != nil {
			return err
		}
		if err = s.replacePin(ctx, "PutPin", cur, p); !isConflict(err) || errors.Is(err, registry.ErrPinLimit) {
			return err
		}
	}
	return fmt.Errorf("dynamo PutPin: %w: the pin kept changing", store.ErrConflict)
}

// DeletePin implements registry.PinStore.
func (s *Store) DeletePin(ctx context.Context, tenant, server, kind, name string) error {
	for range maxPinRaces {
		cur, err := s.current(ctx, "DeletePin", tenant, server, kind, name)
		if err != nil {
			return err
		}
		if cur == nil {
			return store.ErrNotFound
		}
		was, err := Doc(*cur)
		if err != nil {
			return err
		}
		err = s.write(ctx, pinWrite{op: "DeletePin", tenant: tenant, dn: -1, db: -registry.PinSize(*cur), item: types.TransactWriteItem{Delete: &types.Delete{
			TableName: aws.String(s.tables.State), Key: Key(tenantPK(tenant), pinSK(server, kind, name)),
			ConditionExpression:       aws.String("#d = :was"),
			ExpressionAttributeNames:  map[string]string{"#d": AttrDoc},
			ExpressionAttributeValues: map[string]types.AttributeValue{":was": was},
		}}})
		if !isConflict(err) {
			return err
		}
	}
	return fmt.Errorf("dynamo DeletePin: %w: the pin kept changing", store.ErrConflict)
}

var _ registry.PinStore = (*Store)(nil)

// Pin tally item (state table), one per tenant, written in the same
// transaction as every pin write:
//
//	pk T#<tenant>  sk PINS   n (count)  b (bytes, registry.PinSize)  v (version)
//
// A write that adds a pin or grows one is conditional on the tally having
// room (registry.PinTally.Fits, as n <= :n AND b <= :b); every write that
// lands adds 1 to v. Pins written before the tally existed are counted
// once, when the first write finds no tally (initTally). "PINS" sorts
// after every "PIN#…" key and before "POLICY", "SERVER#…", "STOP#…" and
// "TENANT", so that one Query from "PINS" reads the tenant's view without
// its pins and one from "PIN#" reads it with them (TenantView).
const skPinTally = "PINS"

// pinWrite is one pin write: the pin's Put or Delete (with its own
// condition) and its tally's move, dn pins and db bytes.
type pinWrite struct {
	op     string
	tenant string
	item   types.TransactWriteItem
	dn, db int
}

// errNoTally: the tenant has no tally item yet.
var errNoTally = errors.New("no pin tally")

// write runs w: nil, store.ErrConflict when the pin's own condition
// failed, registry.ErrPinLimit when the tally has no room. A tenant
// without a tally gets one first (initTally).
func (s *Store) write(ctx context.Context, w pinWrite) error {
	for range 2 {
		err := s.writeOnce(ctx, w)
		if !errors.Is(err, errNoTally) {
			return err
		}
		if err := s.initTally(ctx, w.tenant); err != nil {
			return err
		}
	}
	return fmt.Errorf("dynamo %s: %w: the pin tally could not be made", w.op, store.ErrUnavailable)
}

func (s *Store) writeOnce(ctx context.Context, w pinWrite) error {
	up := &types.Update{
		TableName:                           aws.String(s.tables.State),
		Key:                                 Key(tenantPK(w.tenant), skPinTally),
		UpdateExpression:                    aws.String("ADD n :dn, b :db, v :one"),
		ConditionExpression:                 aws.String("attribute_exists(n)"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":dn": N(int64(w.dn)), ":db": N(int64(w.db)), ":one": N(1)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if w.dn > 0 || w.db > 0 {
		bounds := s.opt.PinBounds.OrDefault()
		if !(registry.PinTally{}).Fits(w.dn, w.db, bounds) {
			return registry.ErrPinLimit
		}
		up.ConditionExpression = aws.String("attribute_exists(n) AND n <= :maxn AND b <= :maxb")
		up.ExpressionAttributeValues[":maxn"] = N(int64(bounds.Count - w.dn))
		up.ExpressionAttributeValues[":maxb"] = N(int64(bounds.Bytes - w.db))
	}
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{w.item, {Update: up}},
	})
	var tc *types.TransactionCanceledException
	if err == nil || !errors.As(err, &tc) || len(tc.CancellationReasons) != 2 {
		return mapErr(w.op, err)
	}
	pin, tally := tc.CancellationReasons[0], tc.CancellationReasons[1]
	switch {
	case aws.ToString(pin.Code) == "ConditionalCheckFailed":
		return fmt.Errorf("dynamo %s: %w", w.op, store.ErrConflict)
	case aws.ToString(tally.Code) != "ConditionalCheckFailed":
		return mapErr(w.op, err)
	case len(tally.Item) == 0:
		return errNoTally
	}
	return registry.ErrPinLimit
}

// initTally makes tenant's tally from the pins stored (those written
// before tallies existed), unless another writer made it first.
func (s *Store) initTally(ctx context.Context, tenant string) error {
	pins, err := s.Pins(ctx, tenant, "")
	if err != nil {
		return err
	}
	b := 0
	for _, p := range pins {
		b += registry.PinSize(p)
	}
	it := Key(tenantPK(tenant), skPinTally)
	it["n"], it["b"], it["v"] = N(int64(len(pins))), N(int64(b)), N(0)
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.tables.State), Item: it, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if err = mapErr("PinTally", err); isConflict(err) {
		return nil
	}
	return err
}

// PinTally implements registry.PinStore: one consistent GetItem.
func (s *Store) PinTally(ctx context.Context, tenant string) (registry.PinTally, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.tables.State), Key: Key(tenantPK(tenant), skPinTally), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return registry.PinTally{}, mapErr("PinTally", err)
	}
	return tallyOf(out.Item), nil
}

func tallyOf(it Item) registry.PinTally {
	return registry.PinTally{Count: int(GetN(it, "n")), Bytes: int(GetN(it, "b")), Version: GetN(it, "v")}
}
