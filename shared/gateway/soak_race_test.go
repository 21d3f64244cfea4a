//go:build race

package gateway_test

// Under the race detector the soak makes a fifth of its calls: each is
// about five times slower there, and the soak is to stay under a minute on
// two cores.
func init() { soakCalls = 4_000 }
