package audit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"testing"
)

// A hash is the same from a fresh keyed state as from a pooled one, for
// many keys (past the pooled ones too) and concurrent use.
func TestParamsHashPooled(t *testing.T) {
	raw := json.RawMessage(`{"name":"echo","arguments":{"b":2,"a":1}}`)
	var keys []ParamsKey
	for range 2 * maxMacPools {
		k, err := GenerateParamsKey()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	want := make([]string, len(keys))
	for i, k := range keys {
		c, _ := Canonical(raw)
		m := hmac.New(sha256.New, k.Secret())
		m.Write(c)
		want[i] = ParamsHashPrefix + k.ID() + ":" + hex.EncodeToString(m.Sum(nil))
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				for i, k := range keys {
					if got := k.Hash(raw); got != want[i] {
						t.Errorf("key %d: %s, want %s", i, got, want[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
