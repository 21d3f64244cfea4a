package wrap

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/auditchain"
)

// ReadAudit reads an audit file of `aegis wrap --audit` and its
// checkpoint file for `aegis audit verify`: each record as a chain entry
// (auditchain.Data.Entries). unreadable counts the lines that are not a
// record (a fragment a failed write left, see auditLog): they are not
// verified.
func ReadAudit(path string) (d auditchain.Data, unreadable int, err error) {
	d.Tenant = auditchain.LocalTenant
	f, err := os.Open(path)
	if err != nil {
		return d, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r Record
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Seq == 0 {
			unreadable++
			continue
		}
		dg, err := r.Digest()
		d.Entries = append(d.Entries, auditchain.Entry{Writer: r.Writer, Seq: r.Seq, Prev: r.Prev, Hash: r.Hash,
			Digest: dg, Bad: err != nil, Time: r.Time})
		if len(d.Entries) > auditchain.MaxRecords {
			return d, unreadable, auditchain.ErrTooMany
		}
	}
	if err := sc.Err(); err != nil {
		return d, unreadable, err
	}
	cf, err := os.Open(path + CheckpointSuffix)
	if errors.Is(err, fs.ErrNotExist) {
		return d, unreadable, nil // an unchained file: every record is reported unsigned
	}
	if err != nil {
		return d, unreadable, err
	}
	defer cf.Close()
	sc = bufio.NewScanner(cf)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var c audit.Checkpoint
		if len(sc.Bytes()) == 0 {
			continue
		}
		if json.Unmarshal(sc.Bytes(), &c) != nil {
			unreadable++
			continue
		}
		d.Checkpoints = append(d.Checkpoints, c)
	}
	return d, unreadable, sc.Err()
}
