package gateway_test

// The tests of holdnothing_test.go on DynamoDB (moto_server behind
// dynamotest's one-request-at-a-time proxy), two gateway instances with
// their own DynamoDB clients over one pair of tables. Here the checks' store
// work runs on goroutines (backend.InProcess is false), so a breaker that
// took its lease in Prefetch would hold it while the earlier checks'
// requests are in flight: the measured scenario of the issue.

import (
	"testing"

	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
)

// dynStores gives n instances their own clients of env's tables.
func dynStores(env dynamotest.Env) holdStores {
	return func(t *testing.T, n int) []backend.Backend {
		out := make([]backend.Backend, n)
		for i := range out {
			out[i] = env.Store(t, dynamo.Options{})
		}
		return out
	}
}

// freshDynStores gives every call a fresh pair of tables.
func freshDynStores(t *testing.T, n int) []backend.Backend {
	return dynStores(dynamotest.Start(t))(t, n)
}

// TestRefusedCallHoldsNothingOnDynamoDB: limits × refusals, one pair of
// tables, one tenant per cell, cells in parallel.
func TestRefusedCallHoldsNothingOnDynamoDB(t *testing.T) {
	runHoldTable(t, dynStores(dynamotest.Start(t)), true)
}

// TestHundredCallsOneSessionHoldNothingOnDynamoDB is the measured scenario:
// 4, 0 and 5 calls reached the upstream in three trials before the fix.
func TestHundredCallsOneSessionHoldNothingOnDynamoDB(t *testing.T) {
	runHundred(t, freshDynStores(t, 2))
}

func TestRefusedCallHoldsNoSlotWhileDecidingOnDynamoDB(t *testing.T) {
	runNoSlotWhileDeciding(t, freshDynStores, true)
}

func TestMintingCallCountsInItsSessionOnDynamoDB(t *testing.T) {
	runMinting(t, freshDynStores)
}
