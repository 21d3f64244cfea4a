package dynamo_test

import (
	"testing"

	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/storetest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o storetest.Options) backend.Backend {
		return dynamotest.Start(t).Store(t, dynamo.Options{AuditRetention: o.AuditRetention, Now: o.Now})
	})
}
