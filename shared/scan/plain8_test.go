package scan

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestPlain8: the eight-byte test agrees with strByte on random words
// and on every single byte value at every position.
func TestPlain8(t *testing.T) {
	check := func(b [8]byte) {
		want := true
		for _, c := range b {
			want = want && strByte[c] == 0
		}
		if got := plain8(binary.LittleEndian.Uint64(b[:])); got != want {
			t.Fatalf("plain8(% x) = %v, want %v", b, got, want)
		}
	}
	for pos := range 8 {
		for c := range 256 {
			b := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
			b[pos] = byte(c)
			check(b)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var b [8]byte
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		check(b)
	}
}
