package route

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/scan"
)

// Inspector is the poisoning check of the catalogs' definitions: every
// string of a definition as its server lists it is scanned by the threat
// detectors of shared/scan, the same ones that check arguments and
// results. For a tool that is its name, title, description, every
// inputSchema and outputSchema description, default, enum, example and
// property name, annotations and _meta; for a prompt its name, title,
// description and every argument's name, title and description; for a
// resource or a resource template its uri or uriTemplate, name, title,
// description and the rest: the whole object, whatever its kind. A
// definition with a threat finding is poisoned.
//
// Verdicts are cached by the definition's exact bytes, so a definition is
// scanned once per process however often it is listed or called; a
// changed definition is a new entry. The cache holds at most
// MaxVerdictBytes of definitions and is emptied when full. An Inspector is
// safe for concurrent use.
type Inspector struct {
	s *scan.Scanner

	mu    sync.Mutex
	cache map[string]*Verdict
	bytes int
}

// MaxVerdictBytes bounds the definitions an Inspector keeps verdicts for.
const MaxVerdictBytes = 8 << 20

// NewInspector returns an Inspector scanning with s; nil is a Scanner of
// the threat kinds (scan.ThreatKinds) alone. A scanner with other kinds
// on is fine: only threat findings count.
func NewInspector(s *scan.Scanner) *Inspector {
	if s == nil {
		s = scan.New(&scan.Options{Kinds: scan.ThreatKinds()})
	}
	return &Inspector{s: s, cache: map[string]*Verdict{}}
}

// Verdict is what an Inspector found in one definition.
type Verdict struct {
	// Hash is the hex SHA-256 of the definition's bytes as listed.
	Hash string
	// Findings are the threat findings, in document order; their Path
	// is the pointer inside the definition ("/description",
	// "/inputSchema/properties/city/description").
	Findings []scan.Finding
	// Rules are the distinct rule ids of Findings, in order.
	Rules []string
	// Canon and PinHash are the definition's canonical form and hash
	// for rug-pull pins (registry.Canonical of its kind); both empty for
	// a definition that is not a JSON object. LegacyHash is a tool's
	// hash in the legacy format (registry.LegacyToolHash), which pins
	// made before version 2 carry; "" for the other kinds.
	Canon      json.RawMessage
	PinHash    string
	LegacyHash string

	reported atomic.Bool
}

// Poisoned reports whether the definition holds a threat.
func (v *Verdict) Poisoned() bool { return len(v.Findings) > 0 }

// FirstReport reports true once per Verdict: callers log a poisoned
// definition the first time they meet it, not at every listing.
func (v *Verdict) FirstReport() bool { return v.reported.CompareAndSwap(false, true) }

// Inspect returns the verdict on def, one tool definition.
func (p *Inspector) Inspect(def json.RawMessage) *Verdict {
	return p.InspectKind(registry.PinTool, def)
}

// InspectKind returns the verdict on def, one definition of kind (a
// registry.PinKinds: a tool, prompt, resource or resource template). A
// definition that is not JSON (the lister accepted it, so never in
// practice) is judged on the strings before the error.
func (p *Inspector) InspectKind(kind string, def json.RawMessage) *Verdict {
	key := kind + "\x00" + string(def)
	p.mu.Lock()
	v, ok := p.cache[key]
	p.mu.Unlock()
	if ok {
		return v
	}
	sum := sha256.Sum256(def)
	v = &Verdict{Hash: hex.EncodeToString(sum[:])}
	v.Canon, v.PinHash, _ = registry.Canonical(kind, def)
	if kind == registry.PinTool && v.PinHash != "" {
		v.LegacyHash, _ = registry.LegacyToolHash(def)
	}
	found, _ := p.s.Scan(def, nil)
	for _, f := range found {
		if !f.Kind.Threat() {
			continue
		}
		v.Findings = append(v.Findings, f)
		if !contains(v.Rules, f.Rule) {
			v.Rules = append(v.Rules, f.Rule)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w, ok := p.cache[key]; ok {
		return w // another caller judged it meanwhile
	}
	if p.bytes+len(key) > MaxVerdictBytes {
		p.cache, p.bytes = map[string]*Verdict{}, 0
	}
	p.cache[key] = v
	p.bytes += len(key)
	return v
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
