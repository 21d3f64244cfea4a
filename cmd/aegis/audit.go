package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aegis-gw/aegis/shared/auditchain"
	"github.com/aegis-gw/aegis/shared/wiring"
)

// envAuditKeyFile is where `aegis serve` and `aegis wrap` keep the
// Ed25519 key they sign audit checkpoints with (default:
// auditchain.DefaultKeyFile; created on first use, mode 0600).
const envAuditKeyFile = auditchain.EnvKeyFile

// auditKeyFile is the key file in force.
func auditKeyFile() (string, error) { return auditchain.KeyFile(os.Getenv) }

// chainAudit makes b's audit records chained and checkpointed with the
// local key, which it returns (connection tokens are sealed with a key
// derived from it); the returned func signs the last records (at
// shutdown).
func chainAudit(b *store, log *slog.Logger) (signer *auditchain.Ed25519Signer, closeChain func(), err error) {
	path, err := auditKeyFile()
	if err != nil {
		return nil, nil, err
	}
	signer, err = auditchain.LoadOrCreateKey(path)
	if err != nil {
		return nil, nil, err
	}
	chained, w, err := wiring.AuditChain(b.Backend, "serve", signer, log)
	if err != nil {
		return nil, nil, err
	}
	b.Backend = chained
	log.Info("audit checkpoints signed with the local key", "key_file", path, "verifier_file", path+".pub")
	return signer, func() {
		ctx, cancel := context.WithTimeout(context.Background(), auditchain.DefaultTimeout)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			log.Warn("the last audit checkpoint was not written; its records stay an unsigned tail", "err", err)
		}
	}, nil
}
