package memstore_test

import (
	"testing"

	"github.com/aegis-gw/aegis/shared/breaker"
	"github.com/aegis-gw/aegis/shared/idempotency"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/storetest"
)

func TestBreakerContract(t *testing.T) {
	storetest.RunBreaker(t, func(*testing.T) breaker.Store { return memstore.New() })
}

func TestIdempotencyContract(t *testing.T) {
	storetest.RunIdempotency(t, func(*testing.T) idempotency.Store { return memstore.New() })
}
