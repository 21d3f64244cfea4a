package dynamo

import (
	"context"
	"errors"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// Pin item (state table), in the tenant's partition so that one Query
// reads a tenant's pins (or one server's, by the sk prefix):
//
//	pk T#<tenant>  sk PIN#<server>#<tool>  doc
//
// PinIfAbsent is a put conditional on attribute_not_exists(pk): of two
// instances pinning one new tool at once, one wins and the other reads
// the winner's pin back (strongly consistent). PutPin is unconditional:
// the last operator wins.
const prefixPin = "PIN"

// Pins implements registry.PinStore.
func (s *Store) Pins(ctx context.Context, tenant, server string) ([]registry.Pin, error) {
	prefix := prefixPin + "#"
	if server != "" {
		prefix = JoinKey(prefixPin, server) + "#"
	}
	out, err := queryAll[registry.Pin](ctx, s, "Pins", tenantPK(tenant), prefix)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Server != out[j].Server {
			return out[i].Server < out[j].Server
		}
		return out[i].Tool < out[j].Tool
	})
	return out, err
}

// PinIfAbsent implements registry.PinStore.
func (s *Store) PinIfAbsent(ctx context.Context, p registry.Pin) (registry.Pin, error) {
	pk, sk := tenantPK(p.Tenant), JoinKey(prefixPin, p.Server, p.Tool)
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

// PutPin implements registry.PinStore.
func (s *Store) PutPin(ctx context.Context, p registry.Pin) error {
	it, err := s.docItem(tenantPK(p.Tenant), JoinKey(prefixPin, p.Server, p.Tool), p)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.tables.State), Item: it})
	return mapErr("PutPin", err)
}

// DeletePin implements registry.PinStore.
func (s *Store) DeletePin(ctx context.Context, tenant, server, tool string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.tables.State), Key: Key(tenantPK(tenant), JoinKey(prefixPin, server, tool)),
		ConditionExpression: aws.String("attribute_exists(pk)"),
	})
	if err = mapErr("DeletePin", err); errors.Is(err, store.ErrConflict) {
		return store.ErrNotFound
	}
	return err
}

var _ registry.PinStore = (*Store)(nil)
