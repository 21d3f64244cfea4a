package dynamo

import (
	"context"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aegis-gw/aegis/shared/killswitch"
)

// Kill-switch item (state table), in the tenant's partition so that one
// Query reads every stop of a tenant:
//
//	pk T#<tenant>  sk STOP#<server>#<tool>   ("" tool = the whole server)  doc
//
// Writes are unconditional: a stop is idempotent and the last operator wins.
const prefixStop = "STOP"

// PutStop implements killswitch.Store.
func (s *Store) PutStop(ctx context.Context, st killswitch.Stop) error {
	it, err := s.docItem(tenantPK(st.Tenant), JoinKey(prefixStop, st.Server, st.Tool), st)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.tables.State), Item: it})
	return mapErr("PutStop", err)
}

// DeleteStop implements killswitch.Store.
func (s *Store) DeleteStop(ctx context.Context, tenant, server, tool string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.tables.State), Key: Key(tenantPK(tenant), JoinKey(prefixStop, server, tool)),
	})
	return mapErr("DeleteStop", err)
}

// Stops implements killswitch.Reader: one strongly consistent Query, sorted
// by server then tool.
func (s *Store) Stops(ctx context.Context, tenant string) ([]killswitch.Stop, error) {
	out, err := queryAll[killswitch.Stop](ctx, s, "Stops", tenantPK(tenant), prefixStop+"#")
	sort.Slice(out, func(i, j int) bool {
		if out[i].Server != out[j].Server {
			return out[i].Server < out[j].Server
		}
		return out[i].Tool < out[j].Tool
	})
	return out, err
}

var _ killswitch.Store = (*Store)(nil)
