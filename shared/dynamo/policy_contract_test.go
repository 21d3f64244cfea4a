package dynamo_test

import (
	"testing"

	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/storetest"
)

func TestPolicyContract(t *testing.T) {
	storetest.RunPolicy(t, func(t *testing.T, o storetest.Options) backend.Backend {
		return dynamotest.Start(t).Store(t, dynamo.Options{AuditRetention: o.AuditRetention, Now: o.Now})
	})
}
