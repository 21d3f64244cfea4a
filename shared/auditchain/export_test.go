package auditchain_test

import (
	"testing"

	"github.com/aegis-gw/aegis/internal/auditchaintest"
)

// TestTamperExport runs the tamper suite on exports: the edits are made
// to the exported file.
func TestTamperExport(t *testing.T) { auditchaintest.Run(t, auditchaintest.Export) }
