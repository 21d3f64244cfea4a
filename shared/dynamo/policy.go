package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// Policy item (state table), one per tenant, beside the tenant's item:
//
//	pk T#<tenant>  sk POLICY  doc (registry.Policy as JSON)
//
// Read with one consistent GetItem when a gateway's cached copy is older
// than its refresh period (shared/policycheck); written by PutPolicy in a
// transaction whose condition is that the tenant exists.
const skPolicy = "POLICY"

// Policy implements registry.PolicyStore.
func (s *Store) Policy(ctx context.Context, tenant string) (registry.Policy, error) {
	var p registry.Policy
	err := s.getDoc(ctx, "Policy", tenantPK(tenant), skPolicy, &p)
	return p, err
}

// PutPolicy implements registry.PolicyStore (condition: the tenant item
// exists; otherwise store.ErrNotFound).
func (s *Store) PutPolicy(ctx context.Context, p registry.Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	it, err := s.docItem(tenantPK(p.Tenant), skPolicy, p)
	if err != nil {
		return err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{
			{ConditionCheck: &types.ConditionCheck{
				TableName: aws.String(s.tables.State), Key: Key(tenantPK(p.Tenant), skTenant),
				ConditionExpression: aws.String("attribute_exists(pk)"),
			}},
			s.put(it),
		},
	})
	if err = mapErr("PutPolicy", err); isConflict(err) {
		return store.ErrNotFound
	}
	return err
}

var _ registry.PolicyStore = (*Store)(nil)
