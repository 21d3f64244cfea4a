package dynamo

import (
	"context"
	"errors"
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
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.tables.State), Item: it, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if err = mapErr("PinIfAbsent", err); err == nil {
		return p, nil
	}
	if !isConflict(err) {
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
	was, err := Doc(old)
	if err != nil {
		return registry.Pin{}, err
	}
	it, err := s.docItem(pk, sk, p)
	if err != nil {
		return registry.Pin{}, err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.tables.State), Item: it,
		ConditionExpression:       aws.String("#d = :was"),
		ExpressionAttributeNames:  map[string]string{"#d": AttrDoc},
		ExpressionAttributeValues: map[string]types.AttributeValue{":was": was},
	})
	if err = mapErr("SwapPin", err); err == nil {
		return p, nil
	}
	if !isConflict(err) {
		return registry.Pin{}, err
	}
	var cur registry.Pin
	if err := s.getDoc(ctx, "SwapPin", pk, sk, &cur); err != nil {
		return registry.Pin{}, err
	}
	return cur, nil
}

// PutPin implements registry.PinStore.
func (s *Store) PutPin(ctx context.Context, p registry.Pin) error {
	it, err := s.docItem(tenantPK(p.Tenant), pinSK(p.Server, p.Kind, p.Tool), p)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.tables.State), Item: it})
	return mapErr("PutPin", err)
}

// DeletePin implements registry.PinStore.
func (s *Store) DeletePin(ctx context.Context, tenant, server, kind, name string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.tables.State), Key: Key(tenantPK(tenant), pinSK(server, kind, name)),
		ConditionExpression: aws.String("attribute_exists(pk)"),
	})
	if err = mapErr("DeletePin", err); errors.Is(err, store.ErrConflict) {
		return store.ErrNotFound
	}
	return err
}

var _ registry.PinStore = (*Store)(nil)
