package auditchain

import (
	"context"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/backend"
)

// Backend returns b with every audit record it is given to write chained
// by w (which writes it to b). Everything else is b's.
func Backend(b backend.Backend, w *Writer) backend.Backend { return chainedBackend{b, w} }

type chainedBackend struct {
	backend.Backend
	w *Writer
}

// Write implements audit.Writer through the chain.
func (c chainedBackend) Write(ctx context.Context, r audit.Record) error { return c.w.Write(ctx, r) }

var _ backend.Backend = chainedBackend{}
