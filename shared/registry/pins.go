package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
)

// Pin is the approved definition of one tool of one tenant's server: the
// defence against a rug pull, a server that changes a tool after it was
// reviewed. A listed definition whose PinHash differs from its pin's Hash
// is refused (-32051) and left out of tools/list until an operator pins it
// again.
type Pin struct {
	Tenant string `json:"tenant"`
	Server string `json:"server"`
	Tool   string `json:"tool"` // the tool's name as its server lists it
	// Hash is PinHash of the pinned definition, and Def its canonical form
	// (CanonicalTool), kept so that an operator sees what changed.
	Hash string          `json:"hash"`
	Def  json.RawMessage `json:"def,omitempty"`
	// By is who pinned it: PinnedOnFirstUse, or the operator's name.
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// PinnedOnFirstUse is Pin.By for a pin made the first time the gateway
// listed the tool (trust on first use).
const PinnedOnFirstUse = "first-use"

// PinStore keeps the pins, shared by every gateway instance of a store.
type PinStore interface {
	// Pins lists tenant's pins, of server only when server is not "",
	// sorted by server then tool.
	Pins(ctx context.Context, tenant, server string) ([]Pin, error)
	// PinIfAbsent stores p unless its tool has a pin already, and returns
	// the pin in force: p, or the one that was there (whose Hash may
	// differ). Two instances pinning at once agree on one pin.
	PinIfAbsent(ctx context.Context, p Pin) (Pin, error)
	// PutPin stores p, replacing the tool's pin (an operator re-pinning).
	PutPin(ctx context.Context, p Pin) error
	// DeletePin drops the tool's pin: store.ErrNotFound when there is
	// none. The next listing pins the tool again on first use.
	DeletePin(ctx context.Context, tenant, server, tool string) error
}

// CanonicalTool returns the canonical form of a tool definition for
// pinning and its hash: an object of the definition's name, description,
// inputSchema and annotations (the members that change what a model is
// told and what it may send; a missing one is left out), re-encoded with
// object keys sorted at every level and no insignificant space, so that
// two servers listing the same tool with members in another order or other
// spacing pin the same hash. The hash is "sha256:" and the hex SHA-256 of
// the canonical form.
func CanonicalTool(def json.RawMessage) (canon json.RawMessage, hash string, err error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(def, &m); err != nil {
		return nil, "", err
	}
	if m == nil {
		return nil, "", errors.New("registry: a tool definition is an object")
	}
	pick := map[string]any{}
	for _, k := range []string{"name", "description", "inputSchema", "annotations"} {
		raw, ok := m[k]
		if !ok {
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, "", err
		}
		pick[k] = v
	}
	// encoding/json sorts map keys and writes no space; numbers keep their
	// float64 value (1.0 and 1 pin alike).
	b, err := json.Marshal(pick)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(b)
	return b, "sha256:" + hex.EncodeToString(sum[:]), nil
}
