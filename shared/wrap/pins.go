package wrap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
)

// Bounds of the pins (--pins): the tools pinned, the pin file's size
// (kept when it is written as when it is read), a pinned tool's name, the
// tools/list requests awaiting their answer, and one line of the child's
// that is read for a tools/list result.
const (
	maxWrapPins    = 10_000
	maxPinFile     = 4 << 20
	maxPinName     = 1 << 10
	maxPendingList = 1024
	maxChildLine   = 16 << 20
)

// The audit rules of a call refused by the pins. ruleChanged is the
// gateway's name for the same refusal.
const (
	ruleChanged    = "definition-changed" // the definition differs from its pin
	ruleUnlistable = "listing-unreadable" // an answer to a tools/list had no single reading
	rulePinRefused = "pin-refused"        // the tool could not be pinned: see listedNow
)

// pinSet is wrap's rug-pull pins (--pins FILE): each tool's definition,
// as the child lists it in answer to a tools/list, is pinned by its
// canonical hash (registry.CanonicalTool, the gateway's) the first time
// it is seen, and kept in the file; a tools/call of a tool whose
// definition as the child last listed it differs from its pin is refused
// with the -32042 frame and the word TOOL_POISONING. A tool the child has
// not listed in this run is not judged. tools/list itself is relayed
// byte for byte: wrap only reads it, strictly (answer). Safe for
// concurrent use: the gate (client to child) and the relay of the child's
// stdout both use it.
type pinSet struct {
	path string
	warn func(msg string) // a pin file that cannot be written, a tool not pinned; nil: dropped

	mu       sync.Mutex
	pinned   map[string]pinEntry // from the file, and pinned since
	size     int                 // the most bytes the file takes with every pin in it (pinSize)
	listed   map[string]string   // tool → hash, as the child last listed it; "": listed, not pinned
	overflow bool                // a listing named more than maxWrapPins tools
	blind    bool                // an answer to a tools/list could not be read, and none since
	pending  map[string]bool     // ids (idKey) of tools/list requests in flight
	line     []byte              // the child's line so far
	skip     bool                // the current line is over maxChildLine: not read
}

// pinEntry is one pin in the file.
type pinEntry struct {
	Hash string    `json:"hash"`
	At   time.Time `json:"at"`
}

// pinFile is the file's form.
type pinFile struct {
	Version int                 `json:"version"`
	Pins    map[string]pinEntry `json:"pins"`
}

// pinFileBase and pinEntryBytes bound what save writes: json.MarshalIndent
// of a pinFile with two-space indents is the braces, "version" and
// "pins" (under 64 bytes), and per pin its name as JSON encodes it plus
// at most 180 bytes (indents, the quoted keys, the hash of at most 74 bytes, a time of
// at most 35 bytes, commas and newlines).
const (
	pinFileBase   = 64
	pinEntryBytes = 180
)

// pinSize is the most bytes the pin of tool takes in the file.
func pinSize(tool string) int {
	b, _ := json.Marshal(tool) // a string always encodes
	return len(b) + pinEntryBytes
}

// loadPins reads the pin file at path; a missing file is no pins yet (it
// is created, mode 0600, at the first pin). A file that is not wrap's
// pins, has no single reading (jsonrpc.Strict), is over maxPinFile or
// holds a pin wrap would not write is an error that says how to recover
// the other pins.
func loadPins(path string) (*pinSet, error) {
	p := &pinSet{path: path, pinned: map[string]pinEntry{}, listed: map[string]string{}, pending: map[string]bool{}, size: pinFileBase}
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("pins %s: not a regular file", path)
	}
	if st.Size() > maxPinFile {
		return nil, fmt.Errorf("pins %s: %d bytes, more than %d (4 MiB); wrap bounds the file when it writes it, so a wrap from before that wrote this one. %s", path, st.Size(), maxPinFile, recoverOversized(path))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f pinFile
	if err := json.Unmarshal(b, &f); err != nil || f.Version != 1 || f.Pins == nil {
		where := ""
		var se *json.SyntaxError
		if errors.As(err, &se) {
			where = " (" + lineCol(b, se.Offset) + ")"
		}
		return nil, fmt.Errorf("pins %s: not a pin file of aegis wrap%s: want {\"version\":1,\"pins\":{...}}. %s", path, where, recoverEntries(path))
	}
	if err := jsonrpc.Strict(b, "version", "pins"); err != nil {
		return nil, fmt.Errorf("pins %s: %v. %s", path, err, recoverEntries(path))
	}
	if len(f.Pins) > maxWrapPins {
		return nil, fmt.Errorf("pins %s: %d pins, more than %d. %s", path, len(f.Pins), maxWrapPins, recoverEntries(path))
	}
	var bad []string
	for tool, e := range f.Pins {
		switch {
		case len(tool) > maxPinName:
			bad = append(bad, fmt.Sprintf("%.40q…: a name over %d bytes", tool, maxPinName))
		case !registry.ValidPinHash(e.Hash):
			bad = append(bad, fmt.Sprintf("%q: hash %.80q is not v2:sha256:<64 hex digits> (or sha256:<64 hex digits>, version 1's)", tool, e.Hash))
		default:
			p.pinned[tool] = e
			p.size += pinSize(tool)
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		if len(bad) > 5 {
			bad = append(bad[:5], fmt.Sprintf("and %d more", len(bad)-5))
		}
		return nil, fmt.Errorf("pins %s: pins wrap does not write: %s. %s", path, strings.Join(bad, "; "), recoverEntries(path))
	}
	return p, nil
}

// recoverEntries says how to repair a pin file without losing its sound
// pins.
func recoverEntries(path string) string {
	return fmt.Sprintf("To recover, edit %s while wrap is not running: each pin is one member \"TOOL\": {\"hash\": ..., \"at\": ...} of \"pins\"; delete (or fix) the one named and every other pin stays. Deleting the file instead re-pins every tool at the next listing, as the server lists it then (review that listing first)", path)
}

// recoverOversized says how to shrink a pin file over maxPinFile without
// losing its sound pins.
func recoverOversized(path string) string {
	return fmt.Sprintf("To recover, keep the pins whose names are at most %d bytes (a longer one is what makes a file this large), while wrap is not running: jq '.pins |= with_entries(select((.key|utf8bytelength) <= %d))' %s > %s.new && mv %s.new %s", maxPinName, maxPinName, path, path, path, path)
}

// lineCol is "line L, column C" of byte offset off in b.
func lineCol(b []byte, off int64) string {
	off = min(max(off, 0), int64(len(b)))
	line := 1 + bytes.Count(b[:off], []byte{'\n'})
	col := off - int64(bytes.LastIndexByte(b[:off], '\n'))
	return fmt.Sprintf("line %d, column %d", line, col)
}

// requests notes the ids of the tools/list requests on line (an object or
// a batch), before the line goes to the child, so that their answers are
// read. A request is one when a child may read its method as tools/list,
// by the rules wrap reads a tools/call's method with (methodIs, keyIs):
// "tools\/list" or "Method" is no way around the pins. A line that cannot
// hold one (mayBeMethod) costs one pass over its bytes; a line that is
// not framed is refused by the gate as a possible tools/call.
func (p *pinSet) requests(line []byte) {
	if p == nil {
		return
	}
	b, blank, framed := framing(line)
	if blank || !framed || !mayBeMethod(b, "tools/list") {
		return
	}
	each(b, func(m json.RawMessage) {
		list := false
		var id json.RawMessage
		jsonrpc.Members(m, func(k string, v json.RawMessage) {
			var s string
			switch {
			case keyIs(k, "method"):
				list = list || (v[0] == '"' && json.Unmarshal(v, &s) == nil && methodIs(s, "tools/list"))
			case keyIs(k, "id"):
				id = v
			}
		})
		key, ok := idKey(id)
		if !list || !ok {
			return
		}
		p.mu.Lock()
		if len(p.pending) < maxPendingList {
			p.pending[key] = true
		}
		p.mu.Unlock()
	})
}

// idKey is the id v (raw JSON) as a client matches an answer to its
// request: a string by its decoded text, a number by its value (1, 1.0
// and 1e0 are one id to a JavaScript client). ok is false for no id.
func idKey(v json.RawMessage) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	switch c := v[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return "s" + s, true
	case c == '-' || ('0' <= c && c <= '9'):
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return "n" + string(v), true // out of range: as written
		}
		return "n" + strconv.FormatFloat(f, 'g', -1, 64), true
	}
	return "", false
}

// observe reads what the child wrote (b, any part of its stream) before
// it is relayed: each whole line, while a tools/list is pending (answer).
func (p *pinSet) observe(b []byte) {
	if p == nil {
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if !p.skip {
			if len(p.line)+len(part) > maxChildLine {
				p.skip, p.line = true, p.line[:0]
			} else {
				p.line = append(p.line, part...)
			}
		}
		if i < 0 {
			return
		}
		if p.skip {
			p.unreadable() // it may have been the answer
		} else {
			p.line = append(p.line, '\n')
			p.answer(p.line)
		}
		p.line, p.skip = p.line[:0], false
		b = b[i+1:]
	}
}

// unreadable makes the pins blind when a tools/list is pending: its
// answer may be on a line wrap could not read, so every call is refused
// until an answer is read (decide).
func (p *pinSet) unreadable() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) > 0 {
		p.blind = true
	}
}

// answer reads one line of the child's (its "\n" included) while a
// tools/list is pending. Clients read the child's bytes otherwise than
// one another: the TypeScript and Python SDKs a line at a time (Python
// also ends one at a bare "\r"), the Go SDK's streaming decoder any run
// of JSON values, whatever the newlines; all decode escapes, and keep the
// last of two equal keys or (Go) match keys without regard to case. So a
// line is read when it is framed (framing: the one shape they all read
// alike) and has one reading (jsonrpc.Strict, the gateway's rules, and
// the members read at each level spelt exactly: jsonrpc.Misspelt). Any
// other non-blank line, and an answer to a pending tools/list that cannot
// be read in full, makes the pins blind until an answer is read.
func (p *pinSet) answer(line []byte) {
	p.mu.Lock()
	waiting := len(p.pending) > 0
	p.mu.Unlock()
	if !waiting {
		return
	}
	b, blank, framed := framing(line)
	switch {
	case blank:
		return
	case !framed || jsonrpc.Strict(b) != nil:
		p.unreadable()
		return
	}
	each(b, func(m json.RawMessage) {
		key, _ := idKey(jsonrpc.Member(m, "id"))
		p.mu.Lock()
		ours := p.pending[key]
		delete(p.pending, key)
		p.mu.Unlock()
		result := jsonrpc.Member(m, "result")
		switch {
		case jsonrpc.Misspelt(m, "jsonrpc", "id", "result", "error") != nil:
			p.unreadable() // "ID" or "Result": a Go client may take it for ours
			return
		case !ours || result == nil:
			return // not an answer to a tools/list, or an error
		}
		var defs []json.RawMessage
		if jsonrpc.Misspelt(result, "tools", "nextCursor", "_meta") != nil ||
			json.Unmarshal(jsonrpc.Member(result, "tools"), &defs) != nil {
			p.blindNow()
			return
		}
		for _, d := range defs {
			if jsonrpc.Misspelt(d, "name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta", "icons") != nil {
				p.blindNow()
				return
			}
		}
		p.listedNow(defs)
	})
}

// blindNow makes the pins blind: an answer to a tools/list was not read.
func (p *pinSet) blindNow() {
	p.mu.Lock()
	p.blind = true
	p.mu.Unlock()
}

// listedNow records defs as the child lists them now, pins the new ones
// and saves the file when one was pinned; a listing read ends blindness.
// A tool is not pinned when its name is over maxPinName bytes, its
// definition has no canonical form, or the file would hold more than
// maxWrapPins pins or pass maxPinFile bytes: it is listed with no hash
// then, so that its calls are refused (decide), and stderr says so. So
// the file is never written over its bounds.
func (p *pinSet) listedNow(defs []json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blind = false
	added := false
	var refused []string
	for _, d := range defs {
		name, ok := jsonrpc.StringMember(d, "name")
		if !ok {
			continue
		}
		if len(name) > maxPinName {
			refused = append(refused, fmt.Sprintf("%.40q… (a name over %d bytes)", name, maxPinName))
			continue // never listed: decide refuses it for its length
		}
		if _, ok := p.listed[name]; !ok && len(p.listed) >= maxWrapPins {
			p.overflow = true
			continue
		}
		_, hash, err := registry.CanonicalTool(d)
		if err != nil {
			p.listed[name] = ""
			refused = append(refused, fmt.Sprintf("%q (%v)", name, err))
			continue
		}
		if e, ok := p.pinned[name]; ok {
			p.listed[name] = hash
			if e.Hash != hash {
				// A version 1 pin of this very definition: rewritten in the
				// current format (registry.PinApproves), the same approval.
				legacy, _ := registry.LegacyToolHash(d)
				if _, upgrade := registry.PinApproves(e.Hash, hash, legacy); upgrade {
					p.pinned[name] = pinEntry{Hash: hash, At: e.At}
					added = true
				}
			}
			continue
		}
		n := pinSize(name)
		if len(p.pinned) >= maxWrapPins || p.size+n > maxPinFile {
			p.listed[name] = ""
			refused = append(refused, fmt.Sprintf("%q (the pin file would pass %d pins or %d bytes)", name, maxWrapPins, maxPinFile))
			continue
		}
		p.size += n
		p.listed[name] = hash
		p.pinned[name] = pinEntry{Hash: hash, At: time.Now().UTC()}
		added = true
	}
	if len(refused) > 0 && p.warn != nil {
		if len(refused) > 5 {
			refused = append(refused[:5], fmt.Sprintf("and %d more", len(refused)-5))
		}
		p.warn(fmt.Sprintf("pins %s: tools not pinned, whose calls are refused (TOOL_POISONING, rule %s): %s", p.path, rulePinRefused, strings.Join(refused, "; ")))
	}
	if added {
		if err := p.save(); err != nil && p.warn != nil {
			p.warn(fmt.Sprintf("pins %s: %v; the new pins hold until wrap exits", p.path, err))
		}
	}
}

// save writes the pins to a file beside the pin file and renames it over
// it (mode 0600). p.mu is held.
func (p *pinSet) save() error {
	b, err := json.MarshalIndent(pinFile{Version: 1, Pins: p.pinned}, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if len(b) > maxPinFile { // listedNow's bound keeps this from happening
		return fmt.Errorf("%d bytes, more than %d: not written", len(b), maxPinFile)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p.path), "."+filepath.Base(p.path)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	if err := errors.Join(werr, tmp.Chmod(0o600), tmp.Sync(), tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), p.path); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return nil
}

// decide refuses a call of tool, d being the policy's verdict, when the
// definition the child last listed for it differs from its pin, when the
// tool could not be pinned (a name over maxPinName bytes, which is never
// pinned, included), or when an answer to a tools/list could not be read
// and none has been since (every call).
func (p *pinSet) decide(tool string, d Decision) Decision {
	if p == nil || d.Refused {
		return d
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	refuse := func(rule string) Decision {
		return Decision{Refused: true, Word: refusal.ToolPoisoning, Rule: rule}
	}
	if p.blind {
		return refuse(ruleUnlistable)
	}
	cur, listed := p.listed[tool]
	pin, pinned := p.pinned[tool]
	switch {
	case len(tool) > maxPinName, listed && cur == "", !listed && p.overflow:
		return refuse(rulePinRefused)
	case listed && pinned && cur != pin.Hash:
		return refuse(ruleChanged)
	}
	return d
}

// each calls f with v when v is an object, or with each object element of
// v when it is an array (a batch).
func each(v []byte, f func(json.RawMessage)) {
	if len(v) == 0 {
		return
	}
	switch v[0] {
	case '{':
		f(v)
	case '[':
		jsonrpc.Elements(v, func(e json.RawMessage) {
			if len(e) > 0 && e[0] == '{' {
				f(e)
			}
		})
	}
}
