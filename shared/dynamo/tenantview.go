package dynamo

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/tenantview"
)

// TenantView implements tenantview.Reader: one consistent Query of the
// tenant's partition from "PINS" (pins: from "PIN#"), which reads, in sk
// order, its pins (when asked), pin tally, policy (skipped: the policy
// check reads it itself), servers, kill switches and record, and none of
// its keys or approvals (which sort before "PIN#"). One page holds it all
// while the tenant's pins are within their bounds (registry.MaxPinBytesPerTenant);
// a larger partition is read page by page.
func (s *Store) TenantView(ctx context.Context, tenant string, pins bool) (tenantview.View, error) {
	from := skPinTally
	if pins {
		from = prefixPin + "#"
	}
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.tables.State),
		KeyConditionExpression: aws.String("pk = :pk AND sk >= :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": S(tenantPK(tenant)), ":p": S(from),
		},
		ConsistentRead: aws.Bool(true),
	}
	var v viewBuilder
	v.PinsRead = pins
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return tenantview.View{}, mapErr("TenantView", err)
		}
		for _, it := range page.Items {
			if err := v.add(it); err != nil {
				return tenantview.View{}, fmt.Errorf("dynamo TenantView: decode %s: %w", GetS(it, AttrSK), err)
			}
		}
	}
	if !v.Found {
		return tenantview.View{}, nil
	}
	slices.SortFunc(v.Pins, registry.ComparePins)
	return v.View, nil
}

// viewBuilder decodes a partition's items into a view.
type viewBuilder struct{ tenantview.View }

func (v *viewBuilder) add(it Item) error {
	sk := GetS(it, AttrSK)
	switch {
	case sk == skPinTally:
		v.Tally = tallyOf(it)
	case sk == skTenant:
		v.Found = true
		return GetDoc(it, &v.Tenant)
	case strings.HasPrefix(sk, prefixPin+"#"):
		var p registry.Pin
		if err := GetDoc(it, &p); err != nil {
			return err
		}
		v.Pins = append(v.Pins, p)
	case strings.HasPrefix(sk, prefixServer+"#"):
		var sv registry.Server
		if err := GetDoc(it, &sv); err != nil {
			return err
		}
		v.Servers = append(v.Servers, sv)
	case strings.HasPrefix(sk, prefixStop+"#"):
		var st killswitch.Stop
		if err := GetDoc(it, &st); err != nil {
			return err
		}
		v.Stops = append(v.Stops, st)
	}
	return nil
}

var _ tenantview.Reader = (*Store)(nil)
