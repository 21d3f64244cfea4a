package dynamo_test

import (
	"testing"

	"github.com/aegis-gw/aegis/shared/breaker"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/idempotency"
	"github.com/aegis-gw/aegis/shared/storetest"
)

func TestBreakerContract(t *testing.T) {
	storetest.RunBreaker(t, func(t *testing.T) breaker.Store {
		return dynamotest.Start(t).Store(t, dynamo.Options{})
	})
}

func TestIdempotencyContract(t *testing.T) {
	storetest.RunIdempotency(t, func(t *testing.T) idempotency.Store {
		return dynamotest.Start(t).Store(t, dynamo.Options{})
	})
}
