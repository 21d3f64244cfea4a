package auditchain

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
)

// Defaults of Options: a checkpoint at most every DefaultRecords records
// or DefaultInterval, whichever comes first; each checkpoint's signing
// and write get DefaultTimeout.
const (
	DefaultRecords  = 256
	DefaultInterval = time.Minute
	DefaultTimeout  = 5 * time.Second
)

// MaxChains bounds the chains (tenants) one Writer keeps. Past it, a
// chain whose records are all checkpointed is dropped (its tenant's next
// record starts a new chain under a new writer id); when none is, the
// record is written unchained and the error logged.
const MaxChains = 4096

// Options configure a Writer.
type Options struct {
	// Kind names the writer in its ids: "serve", "lambda", "wrap", ...
	Kind string
	// Signer signs checkpoints; nil writes chained records and no
	// checkpoint (every record then verifies as unsigned).
	Signer Signer
	// Checkpoints is where checkpoints go.
	Checkpoints audit.CheckpointStore
	// Records and Interval: a checkpoint once a chain has Records records
	// past the last one, or Interval after the first of them was written
	// (DefaultRecords, DefaultInterval).
	Records  int
	Interval time.Duration
	// Timeout bounds one checkpoint's signing and write (DefaultTimeout).
	Timeout time.Duration
	Now     func() time.Time
	Logger  *slog.Logger
}

// Writer is an audit.Writer that chains every record it writes (per
// tenant) and hands it to the next writer (the store), and signs and
// stores checkpoints in the background. Chaining costs a SHA-256 under a
// lock and no I/O; the record's own write is the only store call of a
// call. Safe for concurrent use. Close writes the last checkpoints.
type Writer struct {
	next   audit.Writer
	o      Options
	base   string
	nudge  chan struct{}
	stop   chan struct{}
	exited chan struct{}

	cpMu sync.Mutex // one checkpoint round at a time (loop, Flush, Close)

	mu      sync.Mutex
	chains  map[string]*chain
	nchains uint64
	closed  bool
}

// chain is one tenant's chain in this writer.
type chain struct {
	tenant, id string
	next       uint64   // the next seq to hand out (from 1)
	head       [32]byte // the hash of the last record handed out
	// mark: every record up to it is done (written, or its write failed);
	// markHash is its hash; done holds the records done above mark.
	mark     uint64
	markHash [32]byte
	done     map[uint64]doneRec
	// The span since the last checkpoint (records (cp.size, mark]).
	from     time.Time // earliest record time
	firstAt  time.Time // when its first record was done (the Interval clock)
	lost     []lost
	lostMore uint64
	cp       body       // the last checkpoint made (signed or pending)
	pending  *pendingCP // made, not yet stored
	used     time.Time
}

type doneRec struct {
	hash [32]byte
	at   time.Time
	ok   bool
}

type pendingCP struct {
	text string
	note string // "" until signed
	cp   audit.Checkpoint
}

// New returns a Writer that writes records to next and checkpoints to
// o.Checkpoints, and starts its checkpoint loop.
func New(next audit.Writer, o Options) (*Writer, error) {
	if next == nil || o.Checkpoints == nil {
		return nil, errors.New("auditchain: a writer needs a record writer and a checkpoint store")
	}
	if o.Kind == "" {
		o.Kind = "writer"
	}
	if !validName(o.Kind) {
		return nil, fmt.Errorf("auditchain: writer kind %q", o.Kind)
	}
	if o.Records <= 0 {
		o.Records = DefaultRecords
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	w := &Writer{next: next, o: o, base: o.Kind + "-" + hex.EncodeToString(r[:]),
		nudge: make(chan struct{}, 1), stop: make(chan struct{}), exited: make(chan struct{}),
		chains: map[string]*chain{}}
	go w.loop()
	return w, nil
}

// Write implements audit.Writer: it chains r and writes it. A record whose
// write fails stays in the chain and is named in the next checkpoint's
// lost lines, so that verify reports it as lost, not removed.
func (w *Writer) Write(ctx context.Context, r audit.Record) error {
	if r.Tenant == "" {
		return w.next.Write(ctx, r) // no trail to chain it into: the store refuses it
	}
	r.Time = r.Time.UTC()
	r.Writer, r.Seq, r.Prev, r.Hash = "", 0, "", ""
	stored := r.Bounded() // what the store keeps (it bounds what it is given)
	d, err := Digest(stored)
	if err != nil {
		w.o.Logger.Error("audit chain: record not digestible; written unchained", "tenant", r.Tenant, "correlation_id", r.CorrelationID, "err", err)
		return w.next.Write(ctx, r)
	}
	w.mu.Lock()
	c := w.chain(r.Tenant)
	if c == nil {
		w.mu.Unlock()
		w.o.Logger.Error("audit chain: too many tenants in one writer; record written unchained", "tenant", r.Tenant, "correlation_id", r.CorrelationID)
		return w.next.Write(ctx, r)
	}
	seq := c.next
	c.next++
	h := Link(c.id, seq, c.head, d)
	r.Writer, r.Seq, r.Prev, r.Hash = c.id, seq, hex.EncodeToString(c.head[:]), hex.EncodeToString(h[:])
	c.head = h
	w.mu.Unlock()

	err = w.next.Write(ctx, r)

	w.mu.Lock()
	c.done[seq] = doneRec{hash: h, at: r.Time, ok: err == nil}
	for {
		dr, ok := c.done[c.mark+1]
		if !ok {
			break
		}
		delete(c.done, c.mark+1)
		c.mark++
		c.markHash = dr.hash
		if c.firstAt.IsZero() {
			c.firstAt, c.from = w.o.Now(), dr.at
		} else if dr.at.Before(c.from) {
			c.from = dr.at
		}
		if !dr.ok {
			if len(c.lost) < MaxLost {
				c.lost = append(c.lost, lost{c.mark, hex.EncodeToString(dr.hash[:])})
			} else {
				c.lostMore++
			}
		}
	}
	due := c.pending == nil && c.mark-c.cp.Size >= uint64(w.o.Records)
	w.mu.Unlock()
	if due {
		select {
		case w.nudge <- struct{}{}:
		default:
		}
	}
	return err
}

// chain returns the tenant's chain, making it; nil when MaxChains are
// kept and none can be dropped. Under w.mu.
func (w *Writer) chain(tenant string) *chain {
	c := w.chains[tenant]
	if c == nil {
		if len(w.chains) >= MaxChains && !w.dropIdle() {
			return nil
		}
		w.nchains++
		c = &chain{tenant: tenant, id: w.base + "." + strconv.FormatUint(w.nchains, 10), next: 1, done: map[uint64]doneRec{}}
		c.cp = body{Head: Genesis, PrevHead: Genesis, PrevText: Genesis}
		w.chains[tenant] = c
	}
	c.used = w.o.Now()
	return c
}

// dropIdle drops the least recently used chain whose records are all
// checkpointed. Under w.mu.
func (w *Writer) dropIdle() bool {
	var victim *chain
	for _, c := range w.chains {
		if c.next-1 == c.cp.Size && c.pending == nil && len(c.done) == 0 && (victim == nil || c.used.Before(victim.used)) {
			victim = c
		}
	}
	if victim == nil {
		return false
	}
	delete(w.chains, victim.tenant)
	return true
}

// loop makes checkpoints when they are due, until Close.
func (w *Writer) loop() {
	defer close(w.exited)
	tick := min(max(w.o.Interval/8, 50*time.Millisecond), 5*time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		case <-w.nudge:
		}
		_ = w.checkpoint(false)
	}
}

// checkpoint makes, signs and stores the checkpoints that are due (all
// that have records past their last one, with force), and retries those
// made before and not stored. It returns the first failure.
func (w *Writer) checkpoint(force bool) error {
	if w.o.Signer == nil {
		return nil
	}
	w.cpMu.Lock()
	defer w.cpMu.Unlock()
	now := w.o.Now()
	w.mu.Lock()
	var todo []*chain
	for _, c := range w.chains {
		if c.pending == nil && c.mark > c.cp.Size &&
			(force || c.mark-c.cp.Size >= uint64(w.o.Records) || now.Sub(c.firstAt) >= w.o.Interval) {
			next := body{Tenant: c.tenant, Writer: c.id, Number: c.cp.Number + 1, Size: c.mark,
				Head: hex.EncodeToString(c.markHash[:]), From: c.from, Time: now,
				PrevNumber: c.cp.Number, PrevSize: c.cp.Size, PrevHead: c.cp.Head, PrevText: Genesis,
				Lost: c.lost, LostMore: c.lostMore}
			if c.cp.Number > 0 {
				next.PrevText = textHash(c.cp.text())
			}
			text := next.text()
			c.pending = &pendingCP{text: text, cp: audit.Checkpoint{Writer: c.id, Number: next.Number, Time: now}}
			c.cp = next
			c.lost, c.lostMore, c.firstAt, c.from = nil, 0, time.Time{}, time.Time{}
		}
		if c.pending != nil {
			todo = append(todo, c)
		}
	}
	w.mu.Unlock()
	var first error
	for _, c := range todo {
		if err := w.store(c); err != nil {
			w.o.Logger.Warn("audit checkpoint not written; retried", "tenant", c.tenant, "writer", c.id, "err", err)
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// store signs (once) and writes c's pending checkpoint. Under w.cpMu.
func (w *Writer) store(c *chain) error {
	w.mu.Lock()
	p := c.pending
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), w.o.Timeout)
	defer cancel()
	if p.note == "" {
		note, err := signNote(ctx, p.text, w.o.Signer)
		if err != nil {
			return err
		}
		p.note = note
		p.cp.Note = note
	}
	if err := w.o.Checkpoints.PutCheckpoint(ctx, c.tenant, p.cp); err != nil {
		return err
	}
	w.mu.Lock()
	c.pending = nil
	w.mu.Unlock()
	return nil
}

// Close stops the checkpoint loop and checkpoints every chain's records
// (within ctx's deadline, each checkpoint within Options.Timeout). Records
// written after Close are chained and not checkpointed.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	select {
	case <-w.exited:
	case <-ctx.Done():
		return ctx.Err()
	}
	done := make(chan error, 1)
	go func() { done <- w.checkpoint(true) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Abandon stops the checkpoint loop and makes no last checkpoint: the
// records since the last one stay unsigned, as when a process dies. The
// Writer still writes records.
func (w *Writer) Abandon() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		close(w.stop)
	}
}

// Flush makes and stores a checkpoint of every chain with records past
// its last one, now.
func (w *Writer) Flush() error { return w.checkpoint(true) }

var _ audit.Writer = (*Writer)(nil)
