package wrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/auditchain"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// Record is one line of wrap's audit file: the decision on one tools/call.
// The fields it shares with the gateway's record (shared/audit) have the
// same names, the same vocabulary and the same hash formats, so the two
// boundaries' records of one call join on params_hash. It stays its own
// type because the rest differs: wrap adds seq, id and rule, and has no
// tenant, caller, session, correlation id or latency to record.
type Record struct {
	Time       time.Time       `json:"time"`
	Seq        uint64          `json:"seq"`   // 1, 2, ... within one wrap process
	Layer      string          `json:"layer"` // always "wrap"
	Method     string          `json:"method"`
	Tool       string          `json:"tool"` // "" when the name could not be read unambiguously
	ID         json.RawMessage `json:"id"`   // the request id as sent, or null
	ParamsHash string          `json:"params_hash"`
	Outcome    audit.Outcome   `json:"outcome"` // allowed or refused
	Code       int             `json:"code"`    // -32042 when refused, else 0
	Word       string          `json:"word,omitempty"`
	Slot       string          `json:"slot,omitempty"` // audit.SlotWrapPolicy or audit.SlotWrapAudit when refused
	Rule       string          `json:"rule,omitempty"`
	PolicyHash string          `json:"policy_hash"`
	// The audit chain (docs/design/audit.md): this wrap run's writer id,
	// the previous line's hash and this line's, over the line without
	// these three fields and seq. Set when the file is chained (always
	// under `aegis wrap --audit`); checkpoints go to <file>.checkpoints.
	Writer string `json:"writer,omitempty"`
	Prev   string `json:"prev,omitempty"`
	Hash   string `json:"hash,omitempty"`
}

// Digest is r's content digest in the audit chain: its JSON, keys
// sorted, without seq and the chain fields.
func (r Record) Digest() ([32]byte, error) {
	r.Seq, r.Writer, r.Prev, r.Hash = 0, "", "", ""
	r.Time = r.Time.UTC()
	return auditchain.DigestJSON(r)
}

// Validate reports the first rule r breaks, or nil: the fields shared with
// the gateway pass audit.Record.Validate at layer wrap (known outcome,
// code -32042 and a word of the refusal table when refused, both hashes
// in the one format), and wrap's own hold: method tools/call, outcome
// allowed or refused (wrap does not see how a forwarded call ends), seq
// from 1, id null, a string or a number. commit writes only records that
// pass.
func (r Record) Validate() error {
	shared := audit.Record{
		Time: r.Time, Layer: r.Layer, Method: r.Method, Tool: r.Tool, ParamsHash: r.ParamsHash,
		Code: r.Code, Word: r.Word, Slot: r.Slot, Outcome: r.Outcome, PolicyHash: r.PolicyHash,
	}
	if err := shared.Validate(); err != nil {
		return err
	}
	switch {
	case r.Layer != string(refusal.LayerWrap):
		return fmt.Errorf("wrap: record has layer %q", r.Layer)
	case r.Method != "tools/call":
		return fmt.Errorf("wrap: record has method %q", r.Method)
	case r.Outcome != audit.OutcomeAllowed && r.Outcome != audit.OutcomeRefused:
		return fmt.Errorf("wrap: record has outcome %q; wrap decides allowed or refused", r.Outcome)
	case r.Seq == 0:
		return errors.New("wrap: record has no seq")
	case !validID(r.ID):
		return fmt.Errorf("wrap: record has id %s; want null, a string or a number", r.ID)
	}
	return nil
}

func validID(id json.RawMessage) bool {
	if len(id) == 0 || !json.Valid(id) {
		return false
	}
	return string(id) == "null" || id[0] == '"' || id[0] == '-' || ('0' <= id[0] && id[0] <= '9')
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
//   - A failed background sync is reported through warn at once, and the
//     next commit syncs before it returns: if that sync fails, the commit
//     fails (its batch fails closed) and the commit after it tries again;
//     once a sync succeeds, commits go back to the background sync. A sync
//     error is therefore never permanent, but records written before it
//     may not survive a power loss even after a later sync succeeds (the
//     kernel may have dropped the pages it could not write), which is why
//     it is reported.
//   - A write that fails part way (disk full, file size limit) leaves the
//     start of a record without its newline. commit cuts the file back to
//     its size before the write, so the next record is not glued onto the
//     fragment. When that fails (or another process appended to the file
//     meanwhile, so the fragment is not the file's end alone), the
//     fragment stays, warn says so, and the next write starts with "\n":
//     the fragment is one bad line and every later record a whole one.
type auditLog struct {
	f        *os.File
	seq      uint64
	buf      []byte
	now      func() time.Time
	sync     func(*os.File) error        // datasync; tests replace it
	truncate func(*os.File, int64) error // (*os.File).Truncate; tests replace it
	warn     func(msg string)            // set before the first commit; nil: dropped
	syncEach bool
	size     int64 // the file's size after this log's last write, -1 when unknown
	torn     bool  // the file ends in a fragment: the next write starts with "\n"

	dirty   chan struct{} // cap 1: records written since the last sync began
	stop    chan struct{}
	stopped chan struct{}
	syncErr atomic.Pointer[error] // a background sync failed; the next commit syncs
	key     audit.ParamsKey       // keys params_hash (audit_key.go)
	// chain links each record (nil: not chained) and cps receives its
	// signed checkpoints (<file>.checkpoints, JSON lines of
	// audit.Checkpoint), made when due after a commit and at close.
	chain *auditchain.Local
	cps   *os.File
}

// openAudit opens path for appending, creating it (mode 0600) when needed.
// path must be, or become, a regular file: a device (/dev/null, a
// terminal), a pipe (/dev/stderr under an MCP client) or a directory
// cannot be synced and is refused here rather than on the first call. The
// file is synced once at open, so a file system that cannot sync it is
// found now too. A new file's directory entry is synced as well, so the
// file itself survives a power cut.
func openAudit(path string, syncEach bool) (*auditLog, error) {
	key, _, err := loadParamsKey(os.Getenv)
	if err != nil {
		return nil, err
	}
	st, statErr := os.Stat(path)
	if statErr == nil && !st.Mode().IsRegular() {
		return nil, notRegular(path, st.Mode())
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() { // replaced since os.Stat
		f.Close()
		if err != nil {
			return nil, err
		}
		return nil, notRegular(path, st.Mode())
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if err := syncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := datasync(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot sync %s: %w", path, err)
	}
	a := newAuditLog(f, syncEach)
	a.key = key
	if err := a.chainTo(path); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

// chainTo chains a's records with the local signing key
// (auditchain.KeyFile) and opens path's checkpoint file.
func (a *auditLog) chainTo(path string) error {
	kf, err := auditchain.KeyFile(os.Getenv)
	if err != nil {
		return err
	}
	signer, err := auditchain.LoadOrCreateKey(kf)
	if err != nil {
		return err
	}
	cps, err := os.OpenFile(path+CheckpointSuffix, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	a.chain, a.cps = auditchain.NewLocal("wrap", signer), cps
	return nil
}

// CheckpointSuffix names an audit file's checkpoint file.
const CheckpointSuffix = ".checkpoints"

// checkpoint writes the chain's checkpoint when due (or with force),
// and reports a failure through warn: the records stay covered by the
// next one.
func (a *auditLog) checkpoint(force bool) {
	if a.chain == nil || (!force && !a.chain.Due()) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), auditchain.DefaultTimeout)
	defer cancel()
	c, ok, err := a.chain.Checkpoint(ctx, a.now().UTC())
	if err == nil && ok {
		var b []byte
		if b, err = json.Marshal(c); err == nil {
			_, err = a.cps.Write(append(b, '\n'))
		}
	}
	if err != nil && a.warn != nil {
		a.warn("audit checkpoint not written: " + err.Error())
	}
}

func notRegular(path string, m os.FileMode) error {
	what := "not a regular file"
	switch {
	case m&os.ModeDevice != 0:
		what += " but a device"
	case m&os.ModeNamedPipe != 0:
		what += " but a pipe"
	case m&os.ModeSocket != 0:
		what += " but a socket"
	case m.IsDir():
		what += " but a directory"
	}
	return fmt.Errorf("%s is %s: --audit needs a file wrap can append to and sync", path, what)
}

// newAuditLog appends records to f, which it owns from now on.
func newAuditLog(f *os.File, syncEach bool) *auditLog {
	a := &auditLog{f: f, now: time.Now, sync: datasync, truncate: (*os.File).Truncate, syncEach: syncEach, size: -1}
	if st, err := f.Stat(); err == nil {
		a.size = st.Size()
	}
	if !syncEach {
		a.dirty, a.stop, a.stopped = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		go a.syncer()
	}
	return a
}

func (a *auditLog) syncer() {
	defer close(a.stopped)
	for {
		select {
		case <-a.dirty:
			if err := a.sync(a.f); err != nil {
				err = fmt.Errorf("sync %s: %w", a.f.Name(), err)
				a.syncErr.Store(&err)
				if a.warn != nil {
					a.warn(err.Error() + "; records written before it may not survive a power loss; the next tools/call is synced before it is acted on")
				}
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

// commit numbers, validates, encodes and appends recs as one batch (see
// auditLog); a record that fails Validate fails the whole batch, which is
// then not written. written reports whether the batch is in the file:
// when err is not nil and written is true, the write returned and only the
// sync failed.
func (a *auditLog) commit(recs []Record) (written bool, err error) {
	a.buf = a.buf[:0]
	if a.torn {
		a.buf = append(a.buf, '\n')
	}
	prefix := len(a.buf)
	now := a.now().UTC()
	var saved auditchain.LocalState
	if a.chain != nil {
		saved = a.chain.Save()
	}
	for i := range recs {
		a.seq++
		recs[i].Time, recs[i].Seq, recs[i].Layer, recs[i].Method = now, a.seq, string(refusal.LayerWrap), "tools/call"
		err := recs[i].Validate()
		if err == nil && a.chain != nil {
			err = a.link(&recs[i])
		}
		var b []byte
		if err == nil {
			b, err = json.Marshal(&recs[i])
		}
		if err != nil {
			a.seq -= uint64(i + 1)
			if a.chain != nil {
				a.chain.Restore(saved)
			}
			return false, err
		}
		a.buf = append(append(a.buf, b...), '\n')
	}
	n, err := a.f.Write(a.buf)
	if err != nil {
		if n > 0 {
			n = a.cutShortWrite(n)
		}
		if n <= prefix { // no record is in the file: keep seq without a gap
			a.seq -= uint64(len(recs))
			if a.chain != nil {
				a.chain.Restore(saved)
			}
		}
		return false, err
	}
	defer a.checkpoint(false)
	a.torn = false
	if a.size >= 0 {
		a.size += int64(n)
	}
	if a.syncEach || a.syncErr.Swap(nil) != nil {
		if err := a.sync(a.f); err != nil {
			err = fmt.Errorf("sync %s: %w", a.f.Name(), err)
			if !a.syncEach {
				a.syncErr.Store(&err) // the next commit syncs again
			}
			return true, err
		}
		return true, nil
	}
	select {
	case a.dirty <- struct{}{}:
	default: // a sync is already due; it will cover these bytes
	}
	return true, nil
}

// link sets r's chain fields.
func (a *auditLog) link(r *Record) error {
	d, err := r.Digest()
	if err != nil {
		return err
	}
	r.Writer = a.chain.Writer()
	r.Prev, r.Hash, err = a.chain.Link(r.Seq, d, r.Time)
	return err
}

// cutShortWrite removes the n bytes a failed write left at the end of
// the file, and returns how many are left there: 0, or n when they could
// not be removed (the file is then torn, see auditLog).
func (a *auditLog) cutShortWrite(n int) int {
	st, err := a.f.Stat()
	switch {
	case err != nil:
	case a.size < 0:
		err = errors.New("its size before the write is not known")
	case st.Size() != a.size+int64(n):
		err = fmt.Errorf("the file is %d bytes, not %d: something else writes to it", st.Size(), a.size+int64(n))
	default:
		if err = a.truncate(a.f, a.size); err == nil {
			return 0
		}
	}
	a.size = -1
	if st != nil {
		a.size = st.Size()
	}
	if a.torn = a.buf[n-1] != '\n'; a.torn && a.warn != nil {
		a.warn(fmt.Sprintf("a failed write left %d bytes of a record at the end of %s that could not be cut off (%v); the next record starts on a new line", n, a.f.Name(), err))
	}
	return n
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
	err := a.sync(a.f)
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	if a.cps != nil {
		a.checkpoint(true) // the last records: signed at exit
		if serr := a.sync(a.cps); err == nil {
			err = serr
		}
		if cerr := a.cps.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
