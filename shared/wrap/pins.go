package wrap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
)

// Bounds of the pins (--pins): the tools pinned, the pin file's size,
// the tools/list requests awaiting their answer, and one line of the
// child's that is read for a tools/list result.
const (
	maxWrapPins    = 10_000
	maxPinFile     = 4 << 20
	maxPendingList = 1024
	maxChildLine   = 16 << 20
)

// ruleChanged is the audit rule of a call refused because its tool's
// definition changed since it was pinned, as the gateway names it.
const ruleChanged = "definition-changed"

// pinSet is wrap's rug-pull pins (--pins FILE): each tool's definition,
// as the child lists it in answer to a tools/list, is pinned by its
// canonical hash (registry.CanonicalTool, the gateway's) the first time
// it is seen, and kept in the file; a tools/call of a tool whose
// definition as the child last listed it differs from its pin is refused
// with the -32042 frame and the word TOOL_POISONING. A tool the child has
// not listed in this run is not judged. tools/list itself is relayed
// byte for byte: wrap only reads it. Safe for concurrent use: the gate
// (client to child) and the relay of the child's stdout both use it.
type pinSet struct {
	path string
	warn func(msg string) // a pin file that cannot be written; nil: dropped

	mu      sync.Mutex
	pinned  map[string]pinEntry // from the file, and pinned since
	listed  map[string]string   // tool → hash, as the child last listed it
	pending map[string]bool     // ids (raw JSON) of tools/list requests in flight
	line    []byte              // the child's line so far
	skip    bool                // the current line is over maxChildLine: not read
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

// loadPins reads the pin file at path; a missing file is no pins yet (it
// is created, mode 0600, at the first pin). A file that is not wrap's
// pins, too big, or with more than maxWrapPins pins is an error.
func loadPins(path string) (*pinSet, error) {
	p := &pinSet{path: path, pinned: map[string]pinEntry{}, listed: map[string]string{}, pending: map[string]bool{}}
	b, err := readBounded(path, maxPinFile)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	var f pinFile
	if err := json.Unmarshal(b, &f); err != nil || f.Version != 1 {
		return nil, fmt.Errorf("pins %s: not a pin file of aegis wrap (want {\"version\":1,\"pins\":{...}})", path)
	}
	if len(f.Pins) > maxWrapPins {
		return nil, fmt.Errorf("pins %s: %d pins, more than %d", path, len(f.Pins), maxWrapPins)
	}
	for tool, e := range f.Pins {
		if !registry.ValidPinHash(e.Hash) {
			return nil, fmt.Errorf("pins %s: tool %q: hash %q is not v2:sha256:<64 hex digits> (or sha256:<64 hex digits>, version 1's)", path, tool, e.Hash)
		}
		p.pinned[tool] = e
	}
	return p, nil
}

// readBounded reads path when it is a regular file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("pins %s: not a regular file", path)
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("pins %s: %d bytes, more than %d", path, st.Size(), limit)
	}
	return os.ReadFile(path)
}

// requests notes the ids of the tools/list requests on line (an object or
// a batch), before the line goes to the child, so that their answers are
// read. Lines that cannot hold one cost one substring search.
func (p *pinSet) requests(line []byte) {
	if p == nil || !bytes.Contains(line, []byte("tools/list")) {
		return
	}
	each(bytes.TrimSpace(line), func(m json.RawMessage) {
		method, _ := jsonrpc.StringMember(m, "method")
		id := jsonrpc.Member(m, "id")
		if method != "tools/list" || len(id) == 0 || string(id) == "null" {
			return
		}
		p.mu.Lock()
		if len(p.pending) < maxPendingList {
			p.pending[string(id)] = true
		}
		p.mu.Unlock()
	})
}

// observe reads what the child wrote (b, any part of its stream) before
// it is relayed: each whole line that answers a pending tools/list
// updates the definitions as listed and pins the tools seen for the first
// time.
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
		if !p.skip {
			p.answer(p.line)
		}
		p.line, p.skip = p.line[:0], false
		b = b[i+1:]
	}
}

// answer reads one line of the child's: the tools of each answer to a
// pending tools/list.
func (p *pinSet) answer(line []byte) {
	p.mu.Lock()
	waiting := len(p.pending) > 0
	p.mu.Unlock()
	if !waiting || !bytes.Contains(line, []byte(`"tools"`)) {
		return
	}
	each(bytes.TrimSpace(line), func(m json.RawMessage) {
		id := jsonrpc.Member(m, "id")
		p.mu.Lock()
		ours := len(id) > 0 && p.pending[string(id)]
		delete(p.pending, string(id))
		p.mu.Unlock()
		if !ours {
			return
		}
		var defs []json.RawMessage
		if err := json.Unmarshal(jsonrpc.Member(jsonrpc.Member(m, "result"), "tools"), &defs); err != nil {
			return
		}
		p.listedNow(defs)
	})
}

// listedNow records defs as the child lists them now and pins the new
// ones, saving the file when one was pinned.
func (p *pinSet) listedNow(defs []json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	added := false
	for _, d := range defs {
		name, ok := jsonrpc.StringMember(d, "name")
		if !ok {
			continue
		}
		_, hash, err := registry.CanonicalTool(d)
		if err != nil {
			continue
		}
		if _, ok := p.listed[name]; ok || len(p.listed) < maxWrapPins {
			p.listed[name] = hash
		}
		e, ok := p.pinned[name]
		if !ok && len(p.pinned) < maxWrapPins {
			p.pinned[name] = pinEntry{Hash: hash, At: time.Now().UTC()}
			added = true
		}
		if ok && e.Hash != hash {
			// A version 1 pin of this very definition: rewritten in the
			// current format (registry.PinApproves), the same approval.
			legacy, _ := registry.LegacyToolHash(d)
			if _, upgrade := registry.PinApproves(e.Hash, hash, legacy); upgrade {
				p.pinned[name] = pinEntry{Hash: hash, At: e.At}
				added = true
			}
		}
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
	tmp, err := os.CreateTemp(filepath.Dir(p.path), "."+filepath.Base(p.path)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(b, '\n'))
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
// definition the child last listed for it differs from its pin.
func (p *pinSet) decide(tool string, d Decision) Decision {
	if p == nil || d.Refused {
		return d
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cur, listed := p.listed[tool]
	pin, pinned := p.pinned[tool]
	if listed && pinned && cur != pin.Hash {
		return Decision{Refused: true, Word: refusal.ToolPoisoning, Rule: ruleChanged}
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
