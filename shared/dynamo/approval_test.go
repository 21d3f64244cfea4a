package dynamo_test

import (
	"testing"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/storetest"
)

func TestApprovalContract(t *testing.T) {
	storetest.RunApprovals(t, func(t *testing.T) approval.Store {
		return dynamotest.Start(t).Store(t, dynamo.Options{})
	})
}
