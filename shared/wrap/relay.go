package wrap

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// clientOut is the client-facing stream. Two goroutines write to it: the
// child relay (every byte the child writes, in order) and the gate (the
// refusal frames). A frame is only ever written at a line boundary of the
// child's stream, so it can never split a message of the child's; when the
// child is mid-line, the frame waits until the child finishes the line.
// Once the child's stream has ended (it exited, died or closed its
// stdout) with a line unfinished, that fragment is ended with a "\n" and
// every frame, held or later, goes on its own line after it: never glued
// onto the fragment, never held for ever. Frames held back are bounded by
// maxPendingFrames: past it, frame waits for the child's line to end (the
// gate then stops reading the client, which is backpressure, not
// silence: every frame is written once the line ends or the child's
// stream does).
type clientOut struct {
	mu      sync.Mutex
	drained sync.Cond // on mu: pending was written
	w       io.Writer
	midLine bool    // the child's last byte written was not '\n'
	ended   bool    // the child's stream has ended (childDone)
	pending []byte  // frames waiting for a line boundary
	err     error   // first write error; later writes are dropped
	pins    *pinSet // --pins: reads the child's tools/list answers; nil: none
}

func (o *clientOut) write(p []byte) {
	if o.err != nil || len(p) == 0 {
		return
	}
	_, o.err = o.w.Write(p)
}

// child relays bytes the child wrote.
func (o *clientOut) child(p []byte) {
	o.pins.observe(p) // before the client can read it (and call)
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending) > 0 {
		if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
			o.write(p[:i+1])
			o.write(o.pending)
			o.pending = o.pending[:0]
			o.broadcast()
			p = p[i+1:]
			o.midLine = false
		}
	}
	if len(p) > 0 {
		o.write(p)
		o.midLine = p[len(p)-1] != '\n'
	}
}

// frame writes one frame authored by wrap, or queues it until the child's
// stream reaches a line boundary.
func (o *clientOut) frame(f []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.midLine && !o.ended && len(o.pending) >= maxPendingFrames {
		o.wait()
	}
	if o.midLine && !o.ended {
		o.pending = append(o.pending, f...)
		return
	}
	o.endFragment()
	o.write(f)
}

// maxPendingFrames bounds the bytes of frames held for the end of the
// child's line (about 7,000 frames).
const maxPendingFrames = 1 << 20

// wait waits for held frames to be written. o.mu is held.
func (o *clientOut) wait() {
	if o.drained.L == nil {
		o.drained.L = &o.mu
	}
	o.drained.Wait()
}

// broadcast wakes the frames waiting for room. o.mu is held.
func (o *clientOut) broadcast() {
	if o.drained.L != nil {
		o.drained.Broadcast()
	}
}

// childDone flushes queued frames once the child's stream has ended, on
// a line of their own.
func (o *clientOut) childDone() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	if len(o.pending) > 0 {
		o.endFragment()
		o.write(o.pending)
	}
	o.pending = nil
	o.broadcast()
}

// endFragment ends the child's unfinished last line, once its stream has
// ended, so that a frame after it is a line of its own. o.mu is held.
func (o *clientOut) endFragment() {
	if o.midLine && o.ended {
		o.write([]byte{'\n'})
		o.midLine = false
	}
}

// quietAfterExit is how long the relay of the child's stdout waits for
// more bytes once the child has exited and everything it wrote has been
// read. A process the child started may hold its stdout open for as long
// as it runs (`sh -c 'server & exit'`, a daemon); without this wrap would
// wait for it instead of exiting with the child's status.
const quietAfterExit = 200 * time.Millisecond

// errQuiet ends the child's stdout when it stayed quiet for quietAfterExit
// after the child exited (see outPipe).
var errQuiet = errors.New("the child has exited and its stdout stayed quiet")

// relayChild copies the child's stdout to the client until EOF, or until
// it stays quiet after the child exited (errQuiet).
func relayChild(o *clientOut, r io.Reader) {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			o.child(buf[:n])
		}
		if err != nil {
			o.childDone()
			return
		}
	}
}

// refusalFrame is the one frame wrap authors (seed ADR 000) for the call c
// refused by d: -32042 (-33042 to a client of MCP 2026-07-28, which
// forbids -32042: numbering), data.aegis {layer "wrap", code word}, the
// id echoed or null; the message and data name the tool and the rule, and
// the message says what a person can do (nextStep).
func refusalFrame(c call, d Decision) []byte {
	r := refusal.Wrap(d.Word, c.tool, d.Rule, nextStep(d))
	return append(refusal.Frame(c.id, r, refusal.LayerWrap, numbering(c)), '\n')
}

// numbering is the numbering of the client that sent c: MCP 2026-07-28's
// when c carries that version in its _meta (every request of that version
// does, as there is no initialize to negotiate it), else seed 004's.
func numbering(c call) refusal.Numbering {
	if c.whole {
		return refusal.Seed
	}
	v, _ := jsonrpc.StringMember(jsonrpc.Member(c.params, "_meta"), upstream.MetaProtocolVersion)
	if upstream.IsModern(v) {
		return refusal.MCP20260728
	}
	return refusal.Seed
}

// nextStep is what a person can do about a call refused by d, for the
// message of wrap's frame.
func nextStep(d Decision) string {
	switch {
	case d.Word == refusal.PendingApproval:
		return "wrap cannot hold a call for a person's approval, so send it through the aegis gateway or allow the tool in the wrap policy"
	case d.Word == refusal.ToolPoisoning:
		return "review the tool's definition and re-pin it (aegis wrap --pins) before calling it again"
	case d.Word == refusal.InternalError:
		return "wrap could not write the call's audit record, so fix the audit file and send the call again"
	case d.Rule == ruleAmbiguous || d.Rule == ruleUnparseable || d.Rule == ruleUnreadable:
		return "send it as one plain JSON-RPC request with a single string name"
	case d.Word == refusal.PolicyDenied:
		return "change the wrap policy to allow the tool if it should run"
	case d.Word == refusal.CapabilityDenied:
		return "the session's grant or budget in the wrap policy does not cover it, so widen the manifest or start a new wrap session"
	case d.Word == refusal.InvalidParams:
		return "send the call with valid params"
	}
	return "the call does not fit the wrap policy in force; change the policy or the call"
}

// gate is the client-to-child direction when something must be decided or
// recorded (a policy, an audit file, or both). It reads whole lines, finds
// the tools/call requests on them, records every decision, and then
// forwards or refuses. It is used by one goroutine.
type gate struct {
	policy  *Policy // never nil: emptyPolicy when nothing is enforced
	enforce bool    // policy came from --policy
	audit   *auditLog
	child   io.Writer // see childSink: a failed write must not stop the gate
	out     *clientOut
	warn    func(msg string) // audit trouble, for stderr; nil: dropped
	pins    *pinSet          // --pins (pins.go); nil: none

	// busy is held while a batch is decided and its effects applied;
	// stopped (under busy) ends the gate: see stop.
	busy    sync.Mutex
	stopped bool

	// per batch, reused
	recs    []Record
	effects []effect
}

// effect is what a decided line does once its records are durable.
type effect struct {
	forward []byte   // bytes for the child, nil for none
	frames  [][]byte // refusal frames for the client
	allowed bool     // forward carries at least one allowed call
	down    int      // calls refused only because the audit is down
}

// childSink is the child's stdin as the gate writes to it. A child that
// closed its stdin (or died) while it keeps running must not stop wrap
// from reading the client: the calls wrap refuses still get their frames
// ("a hung client is worse than a labelled one"). So the first write
// error is kept and every later write is dropped, as the child would have
// dropped them; what the gate forwards after that is lost, exactly as it
// is for a client talking to that child directly.
type childSink struct {
	w   io.Writer
	err error
}

func (c *childSink) Write(p []byte) (int, error) {
	if c.err == nil {
		_, c.err = c.w.Write(p)
	}
	return len(p), nil
}

// stop waits, at most wait, for a batch being decided to be applied (its
// frames written), and ends the gate: no batch starts after it. Run calls
// it once the child's stream has ended, before it returns.
func (g *gate) stop(wait time.Duration) {
	done := make(chan struct{})
	go func() {
		g.busy.Lock()
		g.stopped = true
		g.busy.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(wait):
	}
}

// maxBatch bounds how many buffered bytes one audit commit covers.
const maxBatch = 1 << 20

// run relays in to the child until in ends or the child stops reading.
// Lines already buffered when a batch starts are decided together and
// their records share one write and one sync (group commit); a client
// that sends one call at a time pays one sync per call.
func (g *gate) run(in io.Reader) error {
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		if br.Buffered() == 0 {
			if _, err := br.Peek(1); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
		}
		buf, _ := br.Peek(br.Buffered())
		last := bytes.LastIndexByte(buf, '\n')
		if last < 0 {
			// No whole line buffered: read one, however long, to its end.
			line, rerr := readLine(br)
			if err := g.lockedBatch([][]byte{line}); err != nil {
				return err
			}
			if rerr != nil {
				if rerr == io.EOF {
					return nil
				}
				return rerr
			}
			continue
		}
		if last+1 > maxBatch {
			last = bytes.LastIndexByte(buf[:maxBatch], '\n')
		}
		chunk := buf[:last+1]
		if err := g.chunk(chunk); err != nil {
			return err
		}
		if _, err := br.Discard(len(chunk)); err != nil {
			return err
		}
	}
}

// readLine reads up to and including the next '\n', or to EOF.
func readLine(br *bufio.Reader) ([]byte, error) {
	var acc []byte
	for {
		s, err := br.ReadSlice('\n')
		acc = append(acc, s...)
		if err != bufio.ErrBufferFull {
			return acc, err
		}
	}
}

// chunk decides a run of whole lines. When no line needs a decision
// (needsDecision), the run goes to the child in one write.
func (g *gate) chunk(chunk []byte) error {
	g.busy.Lock()
	defer g.busy.Unlock()
	if g.stopped {
		return errStopped
	}
	var lines [][]byte
	start, some := 0, false
	for start < len(chunk) {
		end := start + bytes.IndexByte(chunk[start:], '\n') + 1
		lines = append(lines, chunk[start:end])
		if !some && needsDecision(chunk[start:end]) {
			some = true
		}
		start = end
	}
	if !some {
		for _, line := range lines {
			g.pins.requests(line)
		}
		_, err := g.child.Write(chunk)
		return err
	}
	return g.batch(lines)
}

// errStopped ends run once stop has been called.
var errStopped = errors.New("wrap is exiting")

// lockedBatch is batch under busy.
func (g *gate) lockedBatch(lines [][]byte) error {
	g.busy.Lock()
	defer g.busy.Unlock()
	if g.stopped {
		return errStopped
	}
	return g.batch(lines)
}

// batch decides lines, commits their records, then applies the effects
// in order.
func (g *gate) batch(lines [][]byte) error {
	g.recs, g.effects = g.recs[:0], g.effects[:0]
	for _, line := range lines {
		g.pins.requests(line)
		g.effects = append(g.effects, g.decide(line, auditUp))
	}
	if g.audit != nil && len(g.recs) > 0 {
		if written, err := g.audit.commit(g.recs); err != nil {
			g.failClosed(lines, written, err)
		}
	}
	var pend []byte // consecutive forwards, written together
	flush := func() error {
		if len(pend) == 0 {
			return nil
		}
		_, err := g.child.Write(pend)
		pend = pend[:0]
		return err
	}
	for _, e := range g.effects {
		pend = append(pend, e.forward...)
		if len(e.frames) > 0 {
			if err := flush(); err != nil {
				return err
			}
			for _, f := range e.frames {
				g.out.frame(f)
			}
		}
	}
	return flush()
}

// auditDown says how decide treats a line whose records could not be
// committed.
type auditDown int

const (
	auditUp       auditDown = iota // queue every record, act on the verdict
	auditLost                      // nothing written: refuse what would go through, queue every record
	auditUnsynced                  // written, not synced: refuse what would go through, queue only those refusals
)

// decide works out what one line does and queues its records. When the
// audit is down, every call the verdict would let through is refused with
// INTERNAL_ERROR instead (counted in effect.down).
func (g *gate) decide(line []byte, down auditDown) effect {
	calls, elems, callIdx := findCalls(line)
	if len(calls) == 0 {
		return effect{forward: line}
	}
	var e effect
	refused := make([]bool, len(calls))
	for i, c := range calls {
		d := Decision{}
		switch {
		case c.why != "" && g.enforce:
			d = Decision{Refused: true, Word: refusal.PolicyDenied, Rule: c.why}
		case c.why != "":
			d.Rule = c.why
		case g.enforce:
			d = g.pins.decide(c.tool, g.policy.DecideCall(c.tool, c.params))
		}
		changed := false
		if down != auditUp && !d.Refused {
			d = Decision{Refused: true, Word: refusal.InternalError, Rule: ruleAuditFailed}
			changed = true
			e.down++
		}
		r := Record{
			Tool: c.tool, ID: c.id, ParamsHash: c.paramsHash(g.audit.paramsKey()),
			Outcome: audit.OutcomeAllowed, Rule: d.Rule, PolicyHash: g.policy.Hash(),
		}
		if d.Refused {
			refused[i] = true
			r.Outcome, r.Code, r.Word, r.Slot = audit.OutcomeRefused, int(refusal.CodeWrapRefused), string(d.Word), audit.SlotWrapPolicy
			if d.Rule == ruleAuditFailed {
				r.Slot = audit.SlotWrapAudit
			}
			e.frames = append(e.frames, refusalFrame(c, d))
		} else {
			e.allowed = true
		}
		if down != auditUnsynced || changed {
			g.recs = append(g.recs, r)
		}
	}
	switch {
	case len(e.frames) == 0:
		e.forward = line
	case elems == nil:
		// a single refused call: nothing reaches the child
	default:
		e.forward = withoutRefused(line, elems, callIdx, refused)
	}
	return e
}

// withoutRefused rebuilds a batch array without its refused elements,
// every other element byte for byte, the line ending kept. It returns nil
// when nothing is left.
func withoutRefused(line []byte, elems []json.RawMessage, callIdx []int, refused []bool) []byte {
	drop := make(map[int]bool, len(callIdx))
	for i, idx := range callIdx {
		if refused[i] {
			drop[idx] = true
		}
	}
	out := []byte{'['}
	n := 0
	for i, el := range elems {
		if drop[i] {
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, el...)
		n++
	}
	if n == 0 {
		return nil
	}
	out = append(out, ']')
	trimmed := bytes.TrimRight(line, " \t\r\n")
	return append(out, line[len(trimmed):]...)
}

// failClosed handles a batch whose records could not be committed: every
// call in it that was to be forwarded is refused instead, with
// INTERNAL_ERROR, so no call reaches the child unrecorded. Then it tries
// to record those refusals (and, when nothing was written, the batch's
// other refusals too), and says on stderr whether that worked. The file
// may over-report (a record of an allowed call whose sync failed, next to
// its refusal), never under-report a call the child received.
func (g *gate) failClosed(lines [][]byte, written bool, err error) {
	down := auditLost
	if written {
		down = auditUnsynced
	}
	g.recs = g.recs[:0]
	n := 0
	for i, e := range g.effects {
		if e.allowed || !written {
			g.effects[i] = g.decide(lines[i], down)
			n += g.effects[i].down
		}
	}
	msg := fmt.Sprintf("%v: %d tools/call refused with INTERNAL_ERROR", err, n)
	if len(g.recs) > 0 {
		switch written, err := g.audit.commit(g.recs); {
		case err == nil:
			msg += "; the refusals are recorded"
		case written:
			msg += fmt.Sprintf("; the refusals are in the audit file but not synced (%v)", err)
		default:
			msg += fmt.Sprintf("; the refusals are NOT recorded (%v)", err)
		}
	}
	if g.warn != nil {
		g.warn(msg)
	}
}
