package infra

import (
	"testing"

	"github.com/aegis-gw/aegis/internal/testtools"
)

// TestWithoutToolsFails runs the tests that need cfn-lint and make with
// neither on PATH and CI unset: they must fail naming both, not skip or
// pass.
func TestWithoutToolsFails(t *testing.T) {
	testtools.ExpectMissing(t, "^(TestCfnLint|TestFunctionsBuildWithMakefile)$", "cfn-lint", "make")
}
