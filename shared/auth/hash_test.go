package auth

import (
	"strings"
	"testing"
)

// hashIs agrees with Hash: the stored hash of a key matches it, and no
// other key, a changed hash, a cut one or an upper-case one does.
func TestHashIs(t *testing.T) {
	key := "aegis_k3v9q2x7_" + strings.Repeat("s", 32)
	h := Hash(key)
	if !hashIs(key, h) {
		t.Fatal("a key does not match its own hash")
	}
	flipped := []byte(h)
	flipped[len(flipped)-1] ^= 1
	for _, c := range []struct{ key, stored string }{
		{key + "x", h},
		{key, string(flipped)},
		{key, h[:len(h)-1]},
		{key, h + "0"},
		{key, strings.ToUpper(h)},
		{key, ""},
	} {
		if hashIs(c.key, c.stored) {
			t.Errorf("hashIs(%q, %q) = true", c.key, c.stored)
		}
	}
}
