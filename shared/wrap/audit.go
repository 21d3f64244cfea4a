package wrap

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
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

// auditLog appends records to one file. It is used by one goroutine only.
//
// Durability: commit writes a batch of records with a single write(2) on an
// O_APPEND descriptor and then forces it to stable storage (fdatasync on
// Linux, fsync elsewhere) before it returns. Callers act on a decision
// (forward the call, write the refusal frame) only after commit returned
// nil, so a record exists on disk for every decision that had an effect.
type auditLog struct {
	f   *os.File
	seq uint64
	buf []byte
	now func() time.Time
}

// openAudit opens path for appending, creating it (mode 0600) when needed.
// A new file's directory entry is synced too, so the file itself survives
// a power cut.
func openAudit(path string) (*auditLog, error) {
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
	return &auditLog{f: f, now: time.Now}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// commit numbers, encodes, appends and syncs recs as one batch.
func (a *auditLog) commit(recs []Record) error {
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
	return datasync(a.f)
}

func (a *auditLog) close() error {
	if a == nil {
		return nil
	}
	return a.f.Close()
}
