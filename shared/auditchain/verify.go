package auditchain

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
)

// FaultKind names what verify found wrong.
type FaultKind string

// The faults Verify names.
const (
	// Changed: a record's content or hash is not what its writer chained
	// (a field edited; or edited and its hash recomputed, which the next
	// record's prev or the checkpoint's head gives away).
	Changed FaultKind = "changed"
	// Removed: a record of a signed span is missing from data that should
	// hold it.
	Removed FaultKind = "removed"
	// Inserted: a record no writer chained at that place (a second record
	// at one seq, or an unchained record after chaining began).
	Inserted FaultKind = "inserted"
	// Reordered: a record intact but moved to another seq.
	Reordered FaultKind = "reordered"
	// Rewritten: the chain up to a checkpoint does not end in the head it
	// signed: records of its span were replaced and the chain recomputed.
	Rewritten FaultKind = "rewritten"
	// CheckpointRemoved: a checkpoint between two present ones is missing.
	CheckpointRemoved FaultKind = "checkpoint-removed"
	// CheckpointForged: a checkpoint whose signature does not verify with
	// the keys given, that is malformed, is another tenant's, or that
	// contradicts another signed checkpoint of its writer.
	CheckpointForged FaultKind = "checkpoint-forged"
)

// Fault is one thing wrong, with the record or checkpoint at fault.
type Fault struct {
	Kind          FaultKind `json:"kind"`
	Writer        string    `json:"writer,omitempty"`
	Seq           uint64    `json:"seq,omitempty"`        // the record (the first of a range)
	SeqTo         uint64    `json:"seq_to,omitempty"`     // the last of a range of removed records
	Checkpoint    uint64    `json:"checkpoint,omitempty"` // the checkpoint number
	CorrelationID string    `json:"correlation_id,omitempty"`
	Time          string    `json:"time,omitempty"` // the record's time
	Detail        string    `json:"detail"`
}

func (f Fault) String() string {
	var b strings.Builder
	b.WriteString(string(f.Kind))
	if f.Writer != "" {
		b.WriteString(" writer " + f.Writer)
	}
	if f.Checkpoint > 0 {
		fmt.Fprintf(&b, " checkpoint %d", f.Checkpoint)
	}
	if f.Seq > 0 {
		fmt.Fprintf(&b, " seq %d", f.Seq)
		if f.SeqTo > f.Seq {
			fmt.Fprintf(&b, "..%d", f.SeqTo)
		}
	}
	if f.CorrelationID != "" {
		b.WriteString(" correlation_id " + f.CorrelationID)
	}
	if f.Time != "" {
		b.WriteString(" time " + f.Time)
	}
	b.WriteString(": " + f.Detail)
	return b.String()
}

// Unknown is what verify cannot know: records not signed yet (a
// writer's unsigned tail), records outside the data, records whose write
// failed.
type Unknown struct {
	Writer  string `json:"writer,omitempty"`
	Records int    `json:"records"`
	Detail  string `json:"detail"`
}

// WriterSummary is one writer's chain in the data.
type WriterSummary struct {
	Writer      string `json:"writer"`
	Records     int    `json:"records"`
	First       uint64 `json:"first_seq"`
	Last        uint64 `json:"last_seq"`
	Checkpoints int    `json:"checkpoints"`
	Signed      uint64 `json:"signed_through"` // the last seq a present checkpoint signs
	Unsigned    int    `json:"unsigned"`       // records past it
}

// Report is Verify's answer. It passes when it has no Faults; Unknown
// says what could not be checked.
type Report struct {
	Tenant      string          `json:"tenant"`
	Records     int             `json:"records"`
	Checkpoints int             `json:"checkpoints"`
	Writers     []WriterSummary `json:"writers"`
	Faults      []Fault         `json:"faults"`
	Unknown     []Unknown       `json:"unknown"`
}

// OK reports whether no fault was found.
func (r *Report) OK() bool { return len(r.Faults) == 0 }

// Data is what Verify checks: one tenant's records and checkpoints, and
// the time from which the source holds every record it was given
// (KeptSince: retention, a bound, or an export's start). A record of a
// signed span whose earliest record is at or after KeptSince must be
// present.
type Data struct {
	Tenant      string
	KeptSince   time.Time
	Records     []audit.Record
	Checkpoints []audit.Checkpoint
	// Entries are chained lines of other kinds (aegis wrap's audit file:
	// shared/wrap.ReadAudit), verified with the records.
	Entries []Entry
}

// Entry is what Verify reads of one chained line: its chain fields, the
// digest of its content, and what names it in a report.
type Entry struct {
	Writer        string
	Seq           uint64
	Prev, Hash    string
	Digest        [32]byte
	Bad           bool // its content could not be digested
	CorrelationID string
	Time          time.Time
}

// RecordEntry is r as Verify reads it.
func RecordEntry(r audit.Record) Entry {
	d, err := Digest(r)
	return Entry{Writer: r.Writer, Seq: r.Seq, Prev: r.Prev, Hash: r.Hash, Digest: d, Bad: err != nil, CorrelationID: r.CorrelationID, Time: r.Time}
}

// hashAt recomputes e's hash at position seq ("" when it cannot be).
func (e Entry) hashAt(seq uint64) string {
	prev, err := parseHash(e.Prev)
	if err != nil || e.Bad {
		return ""
	}
	h := Link(e.Writer, seq, prev, e.Digest)
	return hex.EncodeToString(h[:])
}

// maxNamed: a run of more missing checkpoints is one fault.
const maxNamed = 16

// TailNote: an unsigned tail longer than this many records is more than
// a writer leaves unsigned with the default settings.
const TailNote = DefaultRecords

// Verify checks d with the public keys keys. It needs nothing else: no
// store, no network, no secret.
func Verify(d Data, keys []*Verifier) Report {
	rep := Report{Tenant: d.Tenant, Records: len(d.Records), Checkpoints: len(d.Checkpoints), Faults: []Fault{}, Unknown: []Unknown{}}
	cps := map[string]map[uint64]body{}
	forged := map[string]map[uint64]bool{}
	var firstCP time.Time // the earliest record time a checkpoint signs: chaining had begun
	for _, c := range d.Checkpoints {
		b, err := openCheckpoint(c, d.Tenant, keys)
		if err != nil {
			rep.Faults = append(rep.Faults, Fault{Kind: CheckpointForged, Writer: c.Writer, Checkpoint: c.Number, Detail: err.Error()})
			if forged[c.Writer] == nil {
				forged[c.Writer] = map[uint64]bool{}
			}
			forged[c.Writer][c.Number] = true
			continue
		}
		m := cps[b.Writer]
		if m == nil {
			m = map[uint64]body{}
			cps[b.Writer] = m
		}
		if o, ok := m[b.Number]; ok {
			if o.text() != b.text() {
				rep.Faults = append(rep.Faults, Fault{Kind: CheckpointForged, Writer: b.Writer, Checkpoint: b.Number, Detail: "two different signed checkpoints carry this number"})
			}
			continue
		}
		m[b.Number] = b
		if firstCP.IsZero() || b.From.Before(firstCP) {
			firstCP = b.From
		}
	}
	recs := map[string][]Entry{}
	for _, e := range d.Entries {
		recs[e.Writer] = append(recs[e.Writer], e)
	}
	for _, r := range d.Records {
		if !Chained(r) {
			if !firstCP.IsZero() && !r.Time.Before(firstCP) {
				rep.Faults = append(rep.Faults, recordFault(Inserted, r, "a record without chain fields, written after chaining began"))
			} else {
				rep.Unknown = append(rep.Unknown, Unknown{Records: 1, Detail: fmt.Sprintf("record %s at %s has no chain fields (written before chaining)", r.CorrelationID, r.Time.UTC().Format(time.RFC3339Nano))})
			}
			continue
		}
		recs[r.Writer] = append(recs[r.Writer], RecordEntry(r))
	}
	writers := map[string]bool{}
	for w := range recs {
		writers[w] = true
	}
	for w := range cps {
		writers[w] = true
	}
	for _, w := range slices.Sorted(func(yield func(string) bool) {
		for w := range writers {
			if !yield(w) {
				return
			}
		}
	}) {
		verifyWriter(&rep, d.KeptSince, w, recs[w], cps[w], forged[w])
	}
	return rep
}

func recordFault(k FaultKind, r audit.Record, detail string) Fault {
	return entryFault(k, RecordEntry(r), detail)
}

func entryFault(k FaultKind, e Entry, detail string) Fault {
	return Fault{Kind: k, Writer: e.Writer, Seq: e.Seq, CorrelationID: e.CorrelationID, Time: e.Time.UTC().Format(time.RFC3339Nano), Detail: detail}
}

// openCheckpoint verifies c's signature and reads its text.
func openCheckpoint(c audit.Checkpoint, tenant string, keys []*Verifier) (body, error) {
	text, err := openNote(c.Note, keys)
	if err != nil {
		return body{}, err
	}
	b, err := parseBody(text)
	switch {
	case err != nil:
		return body{}, fmt.Errorf("signed, but not a checkpoint: %v", err)
	case b.Tenant != tenant:
		return body{}, fmt.Errorf("signed for tenant %q, found in %q's trail", b.Tenant, tenant)
	case b.Writer != c.Writer || b.Number != c.Number:
		return body{}, fmt.Errorf("stored as writer %s number %d, signed as writer %s number %d", c.Writer, c.Number, b.Writer, b.Number)
	}
	return b, nil
}

// verifyWriter checks one writer's chain.
// forged are the numbers of its checkpoints already named forged (not
// named removed again).
func verifyWriter(rep *Report, keptSince time.Time, w string, recs []Entry, cpm map[uint64]body, forged map[uint64]bool) {
	sum := WriterSummary{Writer: w, Records: len(recs), Checkpoints: len(cpm)}
	cps := make([]body, 0, len(cpm))
	for _, b := range cpm {
		cps = append(cps, b)
	}
	slices.SortFunc(cps, func(a, b body) int { return int64cmp(a.Number, b.Number) })

	// 1. Each record's position: the seq it claims when its hash holds
	// there, else the seq its prev link gives it (reordered), else the
	// one it claims (changed).
	type entry struct {
		r     Entry
		pos   uint64
		valid bool // its hash holds at pos
		fault bool
	}
	es := make([]*entry, len(recs))
	for i, r := range recs {
		e := &entry{r: r, pos: r.Seq}
		if h := r.hashAt(r.Seq); h != "" && h == r.Hash && r.Seq > 0 {
			e.valid = true
		}
		es[i] = e
	}
	anchor := map[string]uint64{Genesis: 0} // a hash -> the position it ends
	for _, b := range cps {
		anchor[b.Head] = b.Size
		anchor[b.PrevHead] = b.PrevSize
	}
	for _, e := range es {
		if e.valid {
			anchor[e.r.Hash] = e.pos
		}
	}
	for progress := true; progress; {
		progress = false
		for _, e := range es {
			if e.valid {
				continue
			}
			p, ok := anchor[e.r.Prev]
			if !ok || p+1 == e.r.Seq {
				continue
			}
			if h := e.r.hashAt(p + 1); h != "" && h == e.r.Hash {
				e.valid, e.pos, progress = true, p+1, true
				anchor[e.r.Hash] = e.pos
				rep.Faults = append(rep.Faults, entryFault(Reordered, e.r, fmt.Sprintf("intact, but written as seq %d", e.pos)))
				e.fault = true
			}
		}
	}
	for _, e := range es {
		if !e.valid {
			e.fault = true
			rep.Faults = append(rep.Faults, entryFault(Changed, e.r, "its content or chain fields are not what its writer hashed"))
		}
	}

	// 2. One record per position: of two, the one the chain names is the
	// writer's; the other was inserted.
	byPos := map[uint64][]*entry{}
	for _, e := range es {
		byPos[e.pos] = append(byPos[e.pos], e)
	}
	at := map[uint64]*entry{}
	named := map[string]bool{}
	for _, e := range es {
		named[e.r.Prev] = true
	}
	for _, b := range cps {
		named[b.Head] = true
	}
	for pos, l := range byPos {
		if len(l) == 1 {
			at[pos] = l[0]
			continue
		}
		var keep *entry
		for _, e := range l {
			if e.valid && named[e.r.Hash] && keep == nil {
				keep = e
			}
		}
		if keep == nil {
			keep = l[0]
		}
		at[pos] = keep
		for _, e := range l {
			if e == keep || (e.r.Hash == keep.r.Hash && e.valid == keep.valid) {
				continue // the same record twice (an export read twice)
			}
			e.fault = true
			rep.Faults = append(rep.Faults, entryFault(Inserted, e.r, fmt.Sprintf("a second record at seq %d, not the one the chain names", pos)))
		}
	}
	sum.Records = len(at)

	// 3. Links: each record names the hash of the one before it.
	for pos, e := range at {
		if pos == 0 || e.fault {
			continue
		}
		p, ok := at[pos-1]
		if pos == 1 {
			if e.r.Prev != Genesis {
				e.fault = true
				rep.Faults = append(rep.Faults, entryFault(Changed, e.r, "the first record of its chain does not start from the genesis hash"))
			}
			continue
		}
		if !ok || p.r.Prev == "" {
			continue
		}
		if e.r.Prev != p.r.Hash && !p.fault {
			p.fault = true
			rep.Faults = append(rep.Faults, entryFault(Changed, p.r, fmt.Sprintf("its hash is not the one seq %d names: changed and its hash recomputed", pos)))
		}
	}

	// 4. Checkpoints: each follows the one before; each span is present
	// and ends in the signed head.
	for i, b := range cps {
		if i > 0 {
			a := cps[i-1]
			switch {
			case b.Number > a.Number+1 && b.Number-a.Number-1 > maxNamed:
				rep.Faults = append(rep.Faults, Fault{Kind: CheckpointRemoved, Writer: w, Checkpoint: a.Number + 1,
					Detail: fmt.Sprintf("checkpoints %d to %d are missing between %d and %d", a.Number+1, b.Number-1, a.Number, b.Number)})
			case b.Number > a.Number+1:
				for n := a.Number + 1; n < b.Number; n++ {
					if !forged[n] {
						rep.Faults = append(rep.Faults, Fault{Kind: CheckpointRemoved, Writer: w, Checkpoint: n,
							Detail: fmt.Sprintf("missing between checkpoints %d and %d", a.Number, b.Number)})
					}
				}
			case b.PrevSize != a.Size || b.PrevHead != a.Head || b.PrevText != textHash(a.text()):
				rep.Faults = append(rep.Faults, Fault{Kind: CheckpointForged, Writer: w, Checkpoint: b.Number,
					Detail: fmt.Sprintf("does not name checkpoint %d as its previous one", a.Number)})
			}
		} else if b.Number > 1 {
			rep.Unknown = append(rep.Unknown, Unknown{Writer: w, Detail: fmt.Sprintf("checkpoints before %d are not in this data (retention or range)", b.Number)})
		}
		if e, ok := at[b.Size]; ok && e.r.Hash != b.Head {
			rep.Faults = append(rep.Faults, Fault{Kind: Rewritten, Writer: w, Checkpoint: b.Number, Seq: b.PrevSize + 1, SeqTo: b.Size,
				Detail: fmt.Sprintf("the chain at seq %d does not end in the head this checkpoint signed: records of its span were replaced and the chain recomputed", b.Size)})
		}
		if e, ok := at[b.PrevSize+1]; ok && !e.fault && e.r.Prev != b.PrevHead {
			e.fault = true
			rep.Faults = append(rep.Faults, entryFault(Changed, e.r, fmt.Sprintf("it does not follow the head of checkpoint %d", b.PrevNumber)))
		}
		lostAt := map[uint64]bool{}
		for _, l := range b.Lost {
			lostAt[l.Seq] = true
		}
		complete := !b.From.Before(keptSince)
		var missing, lostN, unlisted int
		for s := b.PrevSize + 1; s <= b.Size; s++ {
			if _, ok := at[s]; ok {
				continue
			}
			switch {
			case lostAt[s]:
				lostN++
			case !complete:
				missing++
			default:
				unlisted++
				if uint64(unlisted) <= b.LostMore {
					lostN++
					continue
				}
				start := s
				for s+1 <= b.Size && at[s+1] == nil && !lostAt[s+1] {
					s++
				}
				rep.Faults = append(rep.Faults, Fault{Kind: Removed, Writer: w, Checkpoint: b.Number, Seq: start, SeqTo: s,
					Detail: fmt.Sprintf("signed by checkpoint %d, not in the trail", b.Number)})
			}
		}
		if lostN > 0 {
			rep.Unknown = append(rep.Unknown, Unknown{Writer: w, Records: lostN, Detail: fmt.Sprintf("records of checkpoint %d's span whose write failed (the writer logged them)", b.Number)})
		}
		if missing > 0 {
			rep.Unknown = append(rep.Unknown, Unknown{Writer: w, Records: missing, Detail: fmt.Sprintf("records of checkpoint %d's span from before the data begins (retention or range)", b.Number)})
		}
	}

	// 5. What no present checkpoint signs.
	positions := make([]uint64, 0, len(at))
	for p := range at {
		positions = append(positions, p)
	}
	slices.Sort(positions)
	if len(positions) > 0 {
		sum.First, sum.Last = positions[0], positions[len(positions)-1]
	}
	covered := func(p uint64) bool { // cps are in number order, so in size order too
		i, _ := slices.BinarySearchFunc(cps, p, func(b body, p uint64) int { return int64cmp(b.Size, p) })
		return i < len(cps) && p > cps[i].PrevSize
	}
	if len(cps) > 0 {
		sum.Signed = cps[len(cps)-1].Size
	}
	var before, between int
	var tail []uint64
	for _, p := range positions {
		switch {
		case covered(p):
		case p > sum.Signed:
			tail = append(tail, p)
		case len(cps) > 0 && p <= cps[0].PrevSize:
			before++
		default:
			between++
		}
	}
	if before > 0 {
		rep.Unknown = append(rep.Unknown, Unknown{Writer: w, Records: before, Detail: fmt.Sprintf("records before checkpoint %d's span, signed by checkpoints not in this data", cps[0].Number)})
	}
	if between > 0 {
		rep.Unknown = append(rep.Unknown, Unknown{Writer: w, Records: between, Detail: "records in the span of a removed checkpoint, chained to the next one"})
	}
	if len(tail) > 0 {
		sum.Unsigned = len(tail)
		first, last := at[tail[0]].r, at[tail[len(tail)-1]].r
		detail := fmt.Sprintf("seq %d..%d (%s to %s) come after the last checkpoint: not signed yet (a checkpoint follows within %d records or %s), or their writer stopped first; a change to them, their removal or an insertion among them cannot be seen",
			tail[0], tail[len(tail)-1], first.Time.UTC().Format(time.RFC3339), last.Time.UTC().Format(time.RFC3339), DefaultRecords, DefaultInterval)
		if gaps := int(tail[len(tail)-1]-tail[0]) + 1 - len(tail); gaps > 0 {
			detail += fmt.Sprintf("; %d seqs among them are absent", gaps)
		}
		if len(tail) > TailNote {
			detail += fmt.Sprintf("; more than %d records: a checkpoint may have been removed, or the writer could not write one", TailNote)
		}
		rep.Unknown = append(rep.Unknown, Unknown{Writer: w, Records: len(tail), Detail: detail})
	}
	rep.Writers = append(rep.Writers, sum)
}

func int64cmp(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
