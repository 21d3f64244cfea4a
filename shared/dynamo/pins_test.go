package dynamo_test

import (
	"testing"

	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/storetest"
)

func TestPinsContract(t *testing.T) {
	storetest.Pins(t, func(t *testing.T) registry.PinStore {
		return dynamotest.Start(t).Store(t, dynamo.Options{})
	})
}

func TestPinBoundsContract(t *testing.T) {
	storetest.PinBounds(t, func(t *testing.T, b registry.PinBounds) registry.PinStore {
		return dynamotest.Start(t).Store(t, dynamo.Options{PinBounds: b})
	})
}
