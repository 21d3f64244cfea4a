package wrap

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// Record is one line of wrap's audit file: the decision on one tools/call.
// Field names match the gateway's audit record (shared/audit) where the
// concept is the same.
type Record struct {
	Time       time.Time       `json:"time"`
	Seq        uint64          `json:"seq"`   // 1, 2, ... within one wrap process
	Layer      string          `json:"layer"` // always "wrap"
	Method     string          `json:"method"`
	Tool       string          `json:"tool"` // "" when the name could not be read unambiguously
	ID         json.RawMessage `json:"id"`   // the request id as sent, or null
	ParamsHash string          `json:"params_hash"`
	Outcome    string          `json:"outcome"` // "allowed" or "refused"
	Code       int             `json:"code"`    // -32042 when refused, else 0
	Word       string          `json:"word,omitempty"`
	Rule       string          `json:"rule,omitempty"`
	PolicyHash string          `json:"policy_hash"`
}

// Outcomes of a record.
const (
	OutcomeAllowed = "allowed"
	OutcomeRefused = "refused"
)

// paramsHash is "sha256:" and the hex SHA-256 of the exact bytes of the
// request's params member (of the whole line when it could not be parsed).
func paramsHash(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// auditLog appends records to one file. commit is called by one goroutine.
//
// The durability promise (docs/design/wrap.md):
//
//   - commit returns only after the batch is in the file: one write(2) of
//     whole lines on an O_APPEND descriptor. Callers act on a decision
//     (forward the call, write the refusal frame) only after commit
//     returned nil, so a crash of wrap itself (panic, OOM, kill -9) never
//     loses the record of a decision that had an effect.
//   - For power loss and OS crashes: with syncEach (--audit-sync), commit
//     also forces the batch to stable storage before returning. Without it,
//     a background goroutine starts an fdatasync as soon as records are
//     written (one in flight at a time), and close syncs before returning.
//   - A sync error is returned by the next commit, which fails closed.
type auditLog struct {
	f        *os.File
	seq      uint64
	buf      []byte
	now      func() time.Time
	syncEach bool

	dirty   chan struct{} // cap 1: records written since the last sync began
	stop    chan struct{}
	stopped chan struct{}
	syncErr atomic.Pointer[error]
}

// openAudit opens path for appending, creating it (mode 0600) when needed.
// A new file's directory entry is synced too, so the file itself survives
// a power cut.
func openAudit(path string, syncEach bool) (*auditLog, error) {
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if err := syncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, err
		}
	}
	a := &auditLog{f: f, now: time.Now, syncEach: syncEach}
	if !syncEach {
		a.dirty, a.stop, a.stopped = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		go a.syncer()
	}
	return a, nil
}

func (a *auditLog) syncer() {
	defer close(a.stopped)
	for {
		select {
		case <-a.dirty:
			if err := datasync(a.f); err != nil {
				a.syncErr.CompareAndSwap(nil, &err)
			}
		case <-a.stop:
			return
		}
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// commit numbers, encodes and appends recs as one batch (see auditLog).
func (a *auditLog) commit(recs []Record) error {
	if p := a.syncErr.Load(); p != nil {
		return *p
	}
	a.buf = a.buf[:0]
	now := a.now().UTC()
	for i := range recs {
		a.seq++
		recs[i].Time, recs[i].Seq, recs[i].Layer, recs[i].Method = now, a.seq, "wrap", "tools/call"
		b, err := json.Marshal(&recs[i])
		if err != nil {
			return err
		}
		a.buf = append(append(a.buf, b...), '\n')
	}
	if _, err := a.f.Write(a.buf); err != nil {
		return err
	}
	if a.syncEach {
		return datasync(a.f)
	}
	select {
	case a.dirty <- struct{}{}:
	default: // a sync is already due; it will cover these bytes
	}
	return nil
}

// close syncs every record written and closes the file.
func (a *auditLog) close() error {
	if a == nil {
		return nil
	}
	if a.stop != nil {
		close(a.stop)
		<-a.stopped
	}
	err := datasync(a.f)
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	return err
}
