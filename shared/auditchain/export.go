package auditchain

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
)

// Source is what Collect reads: a store's records and checkpoints.
type Source interface {
	audit.Reader
	audit.CheckpointStore
}

// MaxRecords bounds what Collect and ReadExport hold in memory; a larger
// trail is verified or exported in narrower time ranges.
const MaxRecords = 1_000_000

// ErrTooMany is Collect's and ReadExport's error past MaxRecords.
var ErrTooMany = fmt.Errorf("auditchain: more than %d records and checkpoints; give a narrower time range", MaxRecords)

// Collect reads tenant's trail for [from, to): the checkpoints made in it;
// every record of their spans (read back to the earliest record a span
// names, which may be before from); and the records from from on that no
// checkpoint of the range signs (an unsigned tail, or signed after to).
// KeptSince is the store's: a span it still holds in full must be
// complete.
func Collect(ctx context.Context, src Source, tenant string, from, to time.Time) (Data, error) {
	d := Data{Tenant: tenant}
	kept, err := src.KeptSince(ctx, tenant)
	if err != nil {
		return d, err
	}
	d.KeptSince = kept
	q := audit.Query{Tenant: tenant, From: from, To: to, Limit: audit.MaxPageSize}
	for {
		page, next, err := src.QueryCheckpoints(ctx, q)
		if err != nil {
			return d, err
		}
		d.Checkpoints = append(d.Checkpoints, page...)
		if len(d.Checkpoints) > MaxRecords {
			return d, ErrTooMany
		}
		if next == "" {
			break
		}
		q.Cursor = next
	}
	type span struct{ lo, hi uint64 }
	spans := map[string][]span{}
	last := map[string]uint64{}
	readFrom := from
	for _, c := range d.Checkpoints {
		b, err := parseBody(noteText(c.Note))
		if err != nil {
			continue // Verify names it
		}
		spans[b.Writer] = append(spans[b.Writer], span{b.PrevSize, b.Size})
		last[b.Writer] = max(last[b.Writer], b.Size)
		if b.From.Before(readFrom) {
			readFrom = b.From
		}
	}
	if readFrom.Before(kept) {
		readFrom = kept
	}
	q = audit.Query{Tenant: tenant, From: readFrom, To: to, Limit: audit.MaxPageSize}
	for {
		page, next, err := src.Query(ctx, q)
		if err != nil {
			return d, err
		}
		for _, r := range page {
			keep := !r.Time.Before(from) && (!Chained(r) || r.Seq > last[r.Writer])
			for _, s := range spans[r.Writer] {
				keep = keep || (r.Seq > s.lo && r.Seq <= s.hi)
			}
			if keep {
				d.Records = append(d.Records, r)
			}
		}
		if len(d.Records)+len(d.Checkpoints) > MaxRecords {
			return d, ErrTooMany
		}
		if next == "" {
			return d, nil
		}
		q.Cursor = next
	}
}

// noteText is a note's text without checking its signature.
func noteText(note string) string {
	if i := strings.LastIndex(note, "\n\n"); i >= 0 {
		return note[:i+1]
	}
	return note
}

// An export is JSON lines: one header, then records and checkpoints.
type exportLine struct {
	Export     *ExportHeader     `json:"export,omitempty"`
	Record     *audit.Record     `json:"record,omitempty"`
	Checkpoint *audit.Checkpoint `json:"checkpoint,omitempty"`
}

// ExportHeader is an export's first line.
type ExportHeader struct {
	Tenant      string    `json:"tenant"`
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	KeptSince   time.Time `json:"kept_since"`
	Records     int       `json:"records"`
	Checkpoints int       `json:"checkpoints"`
}

// WriteExport writes d as an export of [from, to).
func WriteExport(w io.Writer, d Data, from, to time.Time) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(exportLine{Export: &ExportHeader{Tenant: d.Tenant, From: from.UTC(), To: to.UTC(), KeptSince: d.KeptSince.UTC(),
		Records: len(d.Records), Checkpoints: len(d.Checkpoints)}}); err != nil {
		return err
	}
	for i := range d.Records {
		if err := enc.Encode(exportLine{Record: &d.Records[i]}); err != nil {
			return err
		}
	}
	for i := range d.Checkpoints {
		if err := enc.Encode(exportLine{Checkpoint: &d.Checkpoints[i]}); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// maxLine bounds one export line.
const maxLine = 1 << 20

// ReadExport reads an export written by WriteExport. Several exports of
// one tenant may be concatenated (consecutive ranges): the result is
// their union, kept since the earliest header's KeptSince.
func ReadExport(r io.Reader) (Data, error) {
	var d Data
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	n, headers := 0, 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var l exportLine
		dec := json.NewDecoder(strings.NewReader(string(line)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return d, fmt.Errorf("auditchain: export line %d: %w", n, err)
		}
		switch {
		case l.Export != nil:
			if headers > 0 && l.Export.Tenant != d.Tenant {
				return d, fmt.Errorf("auditchain: export line %d: tenant %q after %q", n, l.Export.Tenant, d.Tenant)
			}
			if headers == 0 || l.Export.KeptSince.Before(d.KeptSince) {
				d.KeptSince = l.Export.KeptSince
			}
			d.Tenant = l.Export.Tenant
			headers++
		case headers == 0:
			return d, errors.New("auditchain: not an export: the first line is not its header")
		case l.Record != nil:
			if l.Record.Tenant != d.Tenant {
				return d, fmt.Errorf("auditchain: export line %d: a record of tenant %q in %q's export", n, l.Record.Tenant, d.Tenant)
			}
			d.Records = append(d.Records, *l.Record)
		case l.Checkpoint != nil:
			d.Checkpoints = append(d.Checkpoints, *l.Checkpoint)
		default:
			return d, fmt.Errorf("auditchain: export line %d: neither a record nor a checkpoint", n)
		}
		if len(d.Records)+len(d.Checkpoints) > MaxRecords {
			return d, ErrTooMany
		}
	}
	if err := sc.Err(); err != nil {
		return d, fmt.Errorf("auditchain: export: %w", err)
	}
	if headers == 0 {
		return d, errors.New("auditchain: empty export")
	}
	return d, nil
}
