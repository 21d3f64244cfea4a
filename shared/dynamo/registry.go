package dynamo

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// Registry items (state table), each with the record as JSON in doc:
//
//	tenant        pk T#<tenant>   sk TENANT
//	tenant index  pk TENANTS      sk <tenant>        (ListTenants; written with the tenant)
//	server        pk T#<tenant>   sk SERVER#<name>
//	key           pk K#<id>       sk KEY             (lookup by id on every call)
//	key by tenant pk T#<tenant>   sk KEY#<id>        (ListKeys; written with the key)
const (
	skTenant     = "TENANT"
	pkTenants    = "TENANTS"
	skKey        = "KEY"
	prefixServer = "SERVER"
	prefixKey    = "KEY"
)

func tenantPK(tenant string) string { return JoinKey("T", tenant) }
func keyPK(id string) string        { return JoinKey("K", id) }

func (s *Store) docItem(pk, sk string, v any) (Item, error) {
	d, err := Doc(v)
	if err != nil {
		return nil, err
	}
	it := Key(pk, sk)
	it[AttrDoc] = d
	return it, nil
}

func (s *Store) getDoc(ctx context.Context, op, pk, sk string, v any) error {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.tables.State), Key: Key(pk, sk), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return mapErr(op, err)
	}
	if out.Item == nil {
		return store.ErrNotFound
	}
	return GetDoc(out.Item, v)
}

// queryDocs reads every item of partition pk whose sk begins with prefix,
// decoding each doc with decode, in sk order.
// queryAll is queryDocs decoding every item's document into a T.
func queryAll[T any](ctx context.Context, s *Store, op, pk, prefix string) ([]T, error) {
	var out []T
	err := s.queryDocs(ctx, op, pk, prefix, func(it Item) error {
		var v T
		if err := GetDoc(it, &v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

func (s *Store) queryDocs(ctx context.Context, op, pk, prefix string, decode func(Item) error) error {
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.tables.State),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": S(pk), ":p": S(prefix),
		},
		ConsistentRead: aws.Bool(true),
	}
	if prefix == "" {
		in.KeyConditionExpression = aws.String("pk = :pk")
		delete(in.ExpressionAttributeValues, ":p")
	}
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return mapErr(op, err)
		}
		for _, it := range page.Items {
			if err := decode(it); err != nil {
				return fmt.Errorf("dynamo %s: decode %s: %w", op, GetS(it, AttrSK), err)
			}
		}
	}
	return nil
}

func (s *Store) put(it Item) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.tables.State), Item: it}}
}

// Key implements registry.Reader.
func (s *Store) Key(ctx context.Context, id string) (registry.Key, error) {
	var k registry.Key
	err := s.getDoc(ctx, "Key", keyPK(id), skKey, &k)
	return k, err
}

// Tenant implements registry.Reader.
func (s *Store) Tenant(ctx context.Context, id string) (registry.Tenant, error) {
	var t registry.Tenant
	err := s.getDoc(ctx, "Tenant", tenantPK(id), skTenant, &t)
	return t, err
}

// Servers implements registry.Reader; sorted by name (sk order).
func (s *Store) Servers(ctx context.Context, tenant string) ([]registry.Server, error) {
	out, err := queryAll[registry.Server](ctx, s, "Servers", tenantPK(tenant), prefixServer+"#")
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// PutTenant implements registry.Writer: the tenant and its index item in one
// transaction. A new tenant gets its pin tally (pins.go) in the same
// transaction, conditional on the tenant being new, so that its first pin
// write need not make one; when the tenant exists the transaction is
// cancelled and the tenant is written without it.
func (s *Store) PutTenant(ctx context.Context, t registry.Tenant) error {
	a, err := s.docItem(tenantPK(t.ID), skTenant, t)
	if err != nil {
		return err
	}
	b, _ := s.docItem(pkTenants, t.ID, t)
	tally := Key(tenantPK(t.ID), skPinTally)
	tally["n"], tally["b"], tally["v"] = N(0), N(0), N(0)
	isNew, hasNoTally := s.put(a), s.put(tally)
	isNew.Put.ConditionExpression = aws.String("attribute_not_exists(pk)")
	hasNoTally.Put.ConditionExpression = aws.String("attribute_not_exists(pk)")
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{isNew, s.put(b), hasNoTally},
	})
	if err = mapErr("PutTenant", err); !isConflict(err) {
		return err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{s.put(a), s.put(b)},
	})
	return mapErr("PutTenant", err)
}

// ListTenants implements registry.Writer; sorted by id.
func (s *Store) ListTenants(ctx context.Context) ([]registry.Tenant, error) {
	out, err := queryAll[registry.Tenant](ctx, s, "ListTenants", pkTenants, "")
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}

// PutServer implements registry.Writer: conditional on the tenant existing
// (a ConditionCheck in the same transaction).
func (s *Store) PutServer(ctx context.Context, sv registry.Server) error {
	it, err := s.docItem(tenantPK(sv.Tenant), JoinKey(prefixServer, sv.Name), sv)
	if err != nil {
		return err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{
			{ConditionCheck: &types.ConditionCheck{
				TableName:           aws.String(s.tables.State),
				Key:                 Key(tenantPK(sv.Tenant), skTenant),
				ConditionExpression: aws.String("attribute_exists(pk)"),
			}},
			s.put(it),
		},
	})
	if err = mapErr("PutServer", err); isConflict(err) {
		return store.ErrNotFound
	}
	return err
}

// DeleteServer implements registry.Writer.
func (s *Store) DeleteServer(ctx context.Context, tenant, name string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.tables.State), Key: Key(tenantPK(tenant), JoinKey(prefixServer, name)),
	})
	return mapErr("DeleteServer", err)
}

// PutKey implements registry.Writer: the key and its per-tenant copy in one
// transaction.
func (s *Store) PutKey(ctx context.Context, k registry.Key) error {
	return s.writeKey(ctx, "PutKey", k, "")
}

func (s *Store) writeKey(ctx context.Context, op string, k registry.Key, cond string) error {
	a, err := s.docItem(keyPK(k.ID), skKey, k)
	if err != nil {
		return err
	}
	b, _ := s.docItem(tenantPK(k.Tenant), JoinKey(prefixKey, k.ID), k)
	pa, pb := s.put(a), s.put(b)
	if cond != "" {
		pa.Put.ConditionExpression = aws.String(cond)
		pb.Put.ConditionExpression = aws.String(cond)
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{pa, pb},
	})
	return mapErr(op, err)
}

// ListKeys implements registry.Writer; sorted by id.
func (s *Store) ListKeys(ctx context.Context, tenant string) ([]registry.Key, error) {
	out, err := queryAll[registry.Key](ctx, s, "ListKeys", tenantPK(tenant), prefixKey+"#")
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}

// RevokeKey implements registry.Writer: both copies rewritten, conditional
// on both existing.
func (s *Store) RevokeKey(ctx context.Context, tenant, id string) error {
	k, err := s.Key(ctx, id)
	if err != nil {
		return err
	}
	if k.Tenant != tenant {
		return store.ErrNotFound
	}
	k.Revoked = true
	err = s.writeKey(ctx, "RevokeKey", k, "attribute_exists(pk)")
	if errors.Is(err, store.ErrConflict) {
		return store.ErrNotFound
	}
	return err
}

var _ registry.Store = (*Store)(nil)
