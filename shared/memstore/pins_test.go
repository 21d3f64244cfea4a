package memstore_test

import (
	"testing"

	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/storetest"
)

func TestPinsContract(t *testing.T) {
	storetest.Pins(t, func(*testing.T) registry.PinStore { return memstore.New() })
}

func TestPinBoundsContract(t *testing.T) {
	storetest.PinBounds(t, func(_ *testing.T, b registry.PinBounds) registry.PinStore {
		s := memstore.New()
		s.SetPinBounds(b)
		return s
	})
}
