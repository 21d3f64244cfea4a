package dynamo

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/store"
)

// Connection and pending-authorization items (state table), in the
// tenant's partition, so one Query lists a tenant's connections:
//
//	pk T#<tenant>  sk CONN#<caller>#<server>  doc  ver (N: the record's version)
//	pk T#<tenant>  sk CPEND#<state>           doc  exp (N: expiry, epoch ms)  ttl  [opened browser]
//	pk T#<tenant>  sk CLIENT#<server>#<issuer> doc (a client aegis registered, its secret sealed)
//
// A connection is written only over the version before it (ver), so two
// instances refreshing one connection cannot both rotate its refresh
// token. A pending authorization is opened once (condition: not opened,
// not expired) and taken once (a conditional delete); expiry is in the
// conditions, never left to TTL deletion. The doc's sealed member is the
// tokens encrypted by shared/seal: DynamoDB never holds them in the clear.
const (
	prefixConn    = "CONN"
	prefixPending = "CPEND"
	prefixClient  = "CLIENT"
)

// Connection implements connect.Store.
func (s *Store) Connection(ctx context.Context, tenant, caller, server string) (connect.Connection, error) {
	var c connect.Connection
	err := s.getDoc(ctx, "Connection", tenantPK(tenant), JoinKey(prefixConn, caller, server), &c)
	return c, err
}

// PutConnection implements connect.Store: one conditional PutItem.
func (s *Store) PutConnection(ctx context.Context, c connect.Connection) error {
	it, err := s.docItem(tenantPK(c.Tenant), JoinKey(prefixConn, c.Caller, c.Server), c)
	if err != nil {
		return err
	}
	it["ver"] = N(c.Version)
	in := &dynamodb.PutItemInput{TableName: aws.String(s.tables.State), Item: it}
	if c.Version <= 1 {
		in.ConditionExpression = aws.String("attribute_not_exists(pk)")
	} else {
		in.ConditionExpression = aws.String("ver = :prev")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": N(c.Version - 1)}
	}
	_, err = s.db.PutItem(ctx, in)
	return mapErr("PutConnection", err)
}

// Connections implements connect.Store: one strongly consistent Query.
func (s *Store) Connections(ctx context.Context, tenant string) ([]connect.Connection, error) {
	out, err := queryAll[connect.Connection](ctx, s, "Connections", tenantPK(tenant), prefixConn+"#")
	sort.Slice(out, func(i, j int) bool {
		if out[i].Caller != out[j].Caller {
			return out[i].Caller < out[j].Caller
		}
		return out[i].Server < out[j].Server
	})
	return out, err
}

// DeleteConnection implements connect.Store.
func (s *Store) DeleteConnection(ctx context.Context, tenant, caller, server string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.tables.State), Key: Key(tenantPK(tenant), JoinKey(prefixConn, caller, server)),
		ConditionExpression: aws.String("attribute_exists(pk)"),
	})
	if err = mapErr("DeleteConnection", err); isConflict(err) {
		return store.ErrNotFound
	}
	return err
}

// PutPending implements connect.Store.
func (s *Store) PutPending(ctx context.Context, p connect.Pending) error {
	p.Opened, p.Browser = false, ""
	it, err := s.docItem(tenantPK(p.Tenant), JoinKey(prefixPending, p.State), p)
	if err != nil {
		return err
	}
	it["exp"] = N(p.Expires.UnixMilli())
	it[AttrTTL] = TTL(p.Expires)
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.tables.State), Item: it, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	return mapErr("PutPending", err)
}

// pendingOf reads a pending item: its doc, opened and browser.
func pendingOf(it Item) (connect.Pending, error) {
	var p connect.Pending
	if err := GetDoc(it, &p); err != nil {
		return p, err
	}
	_, p.Opened = it["opened"]
	p.Browser = GetS(it, "browser")
	return p, nil
}

// OpenPending implements connect.Store: one conditional UpdateItem; the
// item as it was tells a second opening (ErrConflict) from an absent or
// expired one (ErrNotFound).
func (s *Store) OpenPending(ctx context.Context, tenant, state, browser string, now time.Time) (connect.Pending, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.tables.State), Key: Key(tenantPK(tenant), JoinKey(prefixPending, state)),
		UpdateExpression:    aws.String("SET opened = :t, browser = :b"),
		ConditionExpression: aws.String("attribute_exists(pk) AND exp > :now AND attribute_not_exists(opened)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": &types.AttributeValueMemberBOOL{Value: true}, ":b": S(browser), ":now": N(now.UnixMilli()),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if _, opened := ccf.Item["opened"]; opened && GetN(ccf.Item, "exp") > now.UnixMilli() {
			return connect.Pending{}, store.ErrConflict
		}
		return connect.Pending{}, store.ErrNotFound
	}
	if err != nil {
		return connect.Pending{}, mapErr("OpenPending", err)
	}
	return pendingOf(out.Attributes)
}

// TakePending implements connect.Store: one conditional DeleteItem.
func (s *Store) TakePending(ctx context.Context, tenant, state string, now time.Time) (connect.Pending, error) {
	out, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.tables.State), Key: Key(tenantPK(tenant), JoinKey(prefixPending, state)),
		ConditionExpression:       aws.String("attribute_exists(opened) AND exp > :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": N(now.UnixMilli())},
		ReturnValues:              types.ReturnValueAllOld,
	})
	if err = mapErr("TakePending", err); isConflict(err) {
		return connect.Pending{}, store.ErrNotFound
	}
	if err != nil {
		return connect.Pending{}, err
	}
	return pendingOf(out.Attributes)
}

// Registration implements connect.Store.
func (s *Store) Registration(ctx context.Context, tenant, server, issuer string) (connect.Registration, error) {
	var r connect.Registration
	err := s.getDoc(ctx, "Registration", tenantPK(tenant), JoinKey(prefixClient, server, issuer), &r)
	return r, err
}

// PutRegistration implements connect.Store: one conditional PutItem.
func (s *Store) PutRegistration(ctx context.Context, r connect.Registration) error {
	it, err := s.docItem(tenantPK(r.Tenant), JoinKey(prefixClient, r.Server, r.Issuer), r)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.tables.State), Item: it, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	return mapErr("PutRegistration", err)
}

var _ connect.Store = (*Store)(nil)
