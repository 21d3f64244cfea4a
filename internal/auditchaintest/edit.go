package auditchaintest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/auditchain"
	"github.com/aegis-gw/aegis/shared/memstore"
)

// Same reports whether a and b are the same stored record (writer, seq
// and correlation id).
func Same(a, b audit.Record) bool {
	return a.Writer == b.Writer && a.Seq == b.Seq && a.CorrelationID == b.CorrelationID
}

// ReplaceRecord returns rs with old replaced by repl (none: removed).
func ReplaceRecord(t *testing.T, rs []audit.Record, old audit.Record, repl ...audit.Record) []audit.Record {
	for i, r := range rs {
		if Same(r, old) {
			return append(append(rs[:i:i], repl...), rs[i+1:]...)
		}
	}
	t.Fatalf("record %s seq %d not found", old.CorrelationID, old.Seq)
	return nil
}

// ReplaceCheckpoint returns cs with old replaced by repl (none: removed).
func ReplaceCheckpoint(t *testing.T, cs []audit.Checkpoint, old audit.Checkpoint, repl ...audit.Checkpoint) []audit.Checkpoint {
	for i, c := range cs {
		if c.Writer == old.Writer && c.Number == old.Number {
			return append(append(cs[:i:i], repl...), cs[i+1:]...)
		}
	}
	t.Fatalf("checkpoint %d not found", old.Number)
	return nil
}

// Export is an Env whose trail is written to an embedded store, exported
// (Collect, WriteExport) and read back (ReadExport); the edits are made
// to the export, between writing and reading it.
func Export(t *testing.T) Env {
	s := memstore.New()
	var edits []func(d *auditchain.Data)
	e := Env{Store: s}
	e.Replace = func(t *testing.T, old, n audit.Record) {
		edits = append(edits, func(d *auditchain.Data) { d.Records = ReplaceRecord(t, d.Records, old, n) })
	}
	e.Delete = func(t *testing.T, r audit.Record) {
		edits = append(edits, func(d *auditchain.Data) { d.Records = ReplaceRecord(t, d.Records, r) })
	}
	e.DeleteCheckpoint = func(t *testing.T, c audit.Checkpoint) {
		edits = append(edits, func(d *auditchain.Data) { d.Checkpoints = ReplaceCheckpoint(t, d.Checkpoints, c) })
	}
	e.ReplaceCheckpoint = func(t *testing.T, old, n audit.Checkpoint) {
		edits = append(edits, func(d *auditchain.Data) { d.Checkpoints = ReplaceCheckpoint(t, d.Checkpoints, old, n) })
	}
	e.Load = func(t *testing.T) auditchain.Data {
		from, to := T0.Add(-24*time.Hour), time.Now().Add(time.Hour)
		d, err := auditchain.Collect(context.Background(), s, Tenant, from, to)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range edits {
			f(&d)
		}
		var buf bytes.Buffer
		if err := auditchain.WriteExport(&buf, d, from, to); err != nil {
			t.Fatal(err)
		}
		out, err := auditchain.ReadExport(&buf)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	return e
}
