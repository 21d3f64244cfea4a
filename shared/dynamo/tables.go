package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableDefinitions is the one Go source of truth for both tables' key
// schemas (template.yaml declares the same): pk (HASH) and sk (RANGE), both
// strings, on-demand billing. Both tables have TTL on the attribute "ttl"
// (see CreateTables).
func TableDefinitions(t Tables) []*dynamodb.CreateTableInput {
	def := func(name string) *dynamodb.CreateTableInput {
		return &dynamodb.CreateTableInput{
			TableName: aws.String(name),
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String(AttrPK), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String(AttrSK), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(AttrSK), KeyType: types.KeyTypeRange},
			},
			BillingMode: types.BillingModePayPerRequest,
		}
	}
	return []*dynamodb.CreateTableInput{def(t.State), def(t.Audit)}
}

// CreateTables creates both tables if they do not exist, waits until they are
// active and turns TTL on for "ttl". Running it again is harmless.
func CreateTables(ctx context.Context, db *dynamodb.Client, t Tables) error {
	for _, in := range TableDefinitions(t) {
		_, err := db.CreateTable(ctx, in)
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("create table %s: %w", aws.ToString(in.TableName), err)
		}
		w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
			o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second
		})
		if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName}, 2*time.Minute); err != nil {
			return fmt.Errorf("wait for table %s: %w", aws.ToString(in.TableName), err)
		}
		ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: in.TableName})
		if err == nil && ttl.TimeToLiveDescription != nil &&
			(ttl.TimeToLiveDescription.TimeToLiveStatus == types.TimeToLiveStatusEnabled ||
				ttl.TimeToLiveDescription.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
			continue
		}
		if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName: in.TableName,
			TimeToLiveSpecification: &types.TimeToLiveSpecification{
				AttributeName: aws.String(AttrTTL), Enabled: aws.Bool(true),
			},
		}); err != nil {
			return fmt.Errorf("enable TTL on %s: %w", aws.ToString(in.TableName), err)
		}
	}
	return nil
}
