package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/aegis-gw/aegis/shared/store"
)

// Pin is the approved definition of one tool, prompt, resource or resource
// template of one tenant's server: the defence against a rug pull, a
// server that changes what it offers after it was reviewed. A listed
// definition whose hash differs from its pin's Hash is refused (-32051)
// and left out of its listing until an operator pins it again.
type Pin struct {
	Tenant string `json:"tenant"`
	Server string `json:"server"`
	// Kind is what is pinned: PinTool ("", a tool: pins made before
	// kinds existed carry none, and a tool's stored form is unchanged),
	// PinPrompt, PinResource or PinTemplate.
	Kind string `json:"kind,omitempty"`
	// Tool is the pinned entry's name as its server lists it: a tool's
	// or a prompt's name, a resource's uri, a template's uriTemplate.
	Tool string `json:"tool"`
	// Hash is the pinned definition's hash (Canonical; or, in a pin made
	// before PinHashPrefix, the legacy form that PinApproves still
	// reads), and Def its canonical form, kept so that an operator sees
	// what changed.
	Hash string          `json:"hash"`
	Def  json.RawMessage `json:"def,omitempty"`
	// By is who pinned it: PinnedOnFirstUse, or the operator's name.
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// PinnedOnFirstUse is Pin.By for a pin made the first time the gateway
// listed the tool (trust on first use).
const PinnedOnFirstUse = "first-use"

// The kinds of pin (Pin.Kind), one per list a server answers.
const (
	PinTool     = ""         // tools/list
	PinPrompt   = "prompt"   // prompts/list
	PinResource = "resource" // resources/list
	PinTemplate = "template" // resources/templates/list
)

// PinKinds are the kinds of pin, tools first.
var PinKinds = []string{PinTool, PinPrompt, PinResource, PinTemplate}

// PinKindName is kind as people read it ("tool" for PinTool).
func PinKindName(kind string) string {
	if kind == PinTool {
		return "tool"
	}
	return kind
}

// PinKindPlural is kind as the admin API's paths name it: "tools",
// "prompts", "resources" or "templates".
func PinKindPlural(kind string) string { return PinKindName(kind) + "s" }

// ParsePinKindPlural is the kind PinKindPlural names s; ok is false for
// none.
func ParsePinKindPlural(s string) (kind string, ok bool) {
	for _, k := range PinKinds {
		if PinKindPlural(k) == s {
			return k, true
		}
	}
	return "", false
}

// PinStore keeps the pins, shared by every gateway instance of a store. A
// pin is keyed by tenant, server, kind and name (Tool).
type PinStore interface {
	// Pins lists tenant's pins of every kind, of server only when server
	// is not "", sorted by server, then kind (PinKinds' order), then name.
	Pins(ctx context.Context, tenant, server string) ([]Pin, error)
	// PinIfAbsent stores p unless its entry has a pin already, and
	// returns the pin in force: p, or the one that was there (whose Hash
	// may differ). Two instances pinning at once agree on one pin.
	PinIfAbsent(ctx context.Context, p Pin) (Pin, error)
	// SwapPin replaces old, a pin as Pins read it, with p (the same key):
	// the silent upgrade of a legacy pin (PinApproves). It writes only
	// while the pin in force is still old as read, so that an operator's
	// pin made meanwhile is kept, and returns the pin in force after it:
	// p, or the other one; store.ErrNotFound when there is none.
	SwapPin(ctx context.Context, old, p Pin) (Pin, error)
	// PutPin stores p, replacing its entry's pin (an operator re-pinning).
	PutPin(ctx context.Context, p Pin) error
	// DeletePin drops the pin of tenant's server's entry of kind called
	// name: store.ErrNotFound when there is none. The next listing pins
	// it again on first use.
	DeletePin(ctx context.Context, tenant, server, kind, name string) error
	// PinTally is tenant's tally: how many pins, their bytes, and the
	// version every pin write moves on (the zero tally for none).
	PinTally(ctx context.Context, tenant string) (PinTally, error)
}

// ComparePins orders pins as PinStore.Pins lists them.
func ComparePins(a, b Pin) int {
	if c := strings.Compare(a.Server, b.Server); c != 0 {
		return c
	}
	if c := pinKindRank(a.Kind) - pinKindRank(b.Kind); c != 0 {
		return c
	}
	return strings.Compare(a.Tool, b.Tool)
}

func pinKindRank(kind string) int {
	for i, k := range PinKinds {
		if k == kind {
			return i
		}
	}
	return len(PinKinds)
}

// PinHashPrefix starts every pin hash of the current format (version 2):
// "v2:sha256:" and the hex SHA-256 of the canonical form (Canonical).
// A hash without it is of the legacy format, "sha256:" and the hex
// SHA-256 of a tool's name, description, inputSchema and annotations
// (LegacyToolHash), which tool pins made before version 2 carry.
const PinHashPrefix = "v2:sha256:"

// legacyPinHashPrefix starts a legacy (version 1) pin hash.
const legacyPinHashPrefix = "sha256:"

// pinMembers are, per kind, the members of a definition that a pin
// covers: every member a client shows to its user or its model, or that
// changes what may be sent. Left out: _meta (not shown), a resource's
// size (it changes with the content, which pins do not judge).
var pinMembers = map[string][]string{
	PinTool:     {"name", "title", "description", "inputSchema", "outputSchema", "annotations", "icons"},
	PinPrompt:   {"name", "title", "description", "arguments", "icons"},
	PinResource: {"uri", "name", "title", "description", "mimeType", "annotations", "icons"},
	PinTemplate: {"uriTemplate", "name", "title", "description", "mimeType", "annotations", "icons"},
}

// Canonical returns the canonical form of def, a definition of kind as
// its server lists it, for pinning, and its hash: an object of the
// members pinMembers names for kind (a missing one is left out),
// re-encoded with object keys sorted at every level and no insignificant
// space, so that two servers listing one definition with members in
// another order or other spacing pin the same hash. The hash is
// PinHashPrefix and the hex SHA-256 of the canonical form. An unknown
// kind is an error.
func Canonical(kind string, def json.RawMessage) (canon json.RawMessage, hash string, err error) {
	members, ok := pinMembers[kind]
	if !ok {
		return nil, "", fmt.Errorf("registry: no pin kind %q", kind)
	}
	b, err := canonical(def, members)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(b)
	return b, PinHashPrefix + hex.EncodeToString(sum[:]), nil
}

// CanonicalTool is Canonical of a tool definition.
func CanonicalTool(def json.RawMessage) (canon json.RawMessage, hash string, err error) {
	return Canonical(PinTool, def)
}

// LegacyToolHash is a tool definition's hash in the legacy format (see
// PinHashPrefix): what a tool pinned before version 2 carries.
func LegacyToolHash(def json.RawMessage) (string, error) {
	b, err := canonical(def, []string{"name", "description", "inputSchema", "annotations"})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return legacyPinHashPrefix + hex.EncodeToString(sum[:]), nil
}

// PinApproves reports whether pinned, a pin's Hash, approves a definition
// whose hash is hash (Canonical) and whose legacy hash is legacy
// (LegacyToolHash; "" when there is none: not a tool). upgrade is set
// when it approves it by its legacy hash: the pin is of the legacy format
// and is to be rewritten in the current one (SwapPin). A legacy pin that
// does not match the legacy hash is a change, as any other pin that does
// not match.
func PinApproves(pinned, hash, legacy string) (ok, upgrade bool) {
	switch {
	case pinned == hash:
		return true, false
	case legacy != "" && pinned == legacy && IsLegacyPinHash(pinned):
		return true, true
	}
	return false, false
}

// ValidPinHash reports whether h is a pin hash of either format: its
// prefix and 64 lower-case hex digits.
func ValidPinHash(h string) bool {
	hexPart, ok := strings.CutPrefix(h, PinHashPrefix)
	if !ok {
		hexPart, ok = strings.CutPrefix(h, legacyPinHashPrefix)
	}
	if !ok || len(hexPart) != 64 {
		return false
	}
	for i := 0; i < len(hexPart); i++ {
		if c := hexPart[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// IsLegacyPinHash reports whether h is of the legacy format.
func IsLegacyPinHash(h string) bool {
	return strings.HasPrefix(h, legacyPinHashPrefix)
}

// canonical picks members of def, an object, and re-encodes them.
func canonical(def json.RawMessage, members []string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(def, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("registry: a definition is an object")
	}
	pick := map[string]any{}
	for _, k := range members {
		raw, ok := m[k]
		if !ok {
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		pick[k] = v
	}
	// encoding/json sorts map keys and writes no space; numbers keep their
	// float64 value (1.0 and 1 pin alike).
	return json.Marshal(pick)
}

// RenameSimilarity is the Similarity at or above which a new tool is taken
// for a renamed one (RenameOf).
const RenameSimilarity = 0.8

// maxSimilarityTokens bounds the words Similarity reads of each side.
const maxSimilarityTokens = 4096

// Similarity scores how alike two tool definitions are apart from their
// names, from 0 (nothing shared) to 1 (the same description, inputSchema
// and annotations). a and b are canonical forms (CanonicalTool) or any
// definition objects. It is the lower of two Dice coefficients over
// multisets of words: one of the descriptions' words (lower-cased runs of
// letters and digits), one of the inputSchema's and the annotations'
// member names and values. Taking the lower keeps two tools with one
// boilerplate schema ({"type":"object","properties":{"path":...}}) and
// different descriptions apart, and two tools with one description and
// different arguments apart too. A definition that is not a JSON object
// scores 0.
func Similarity(a, b json.RawMessage) float64 {
	da, sa, ok := similarityTokens(a)
	if !ok {
		return 0
	}
	db, sb, ok := similarityTokens(b)
	if !ok {
		return 0
	}
	return min(dice(da, db), dice(sa, sb))
}

// similarityTokens reads def's description words and its inputSchema and
// annotations tokens.
func similarityTokens(def json.RawMessage) (desc, schema map[string]int, ok bool) {
	var m map[string]any
	if err := json.Unmarshal(def, &m); err != nil || m == nil {
		return nil, nil, false
	}
	desc, schema = map[string]int{}, map[string]int{}
	n := 0
	if d, _ := m["description"].(string); d != "" {
		addWords(desc, "", d, &n)
	}
	n = 0
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if n >= maxSimilarityTokens {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				schema[prefix+"k:"+k]++
				n++
				walk(prefix, e)
			}
		case []any:
			for _, e := range x {
				walk(prefix, e)
			}
		case string:
			addWords(schema, prefix+"v:", x, &n)
		case nil:
			schema[prefix+"null"]++
			n++
		default:
			b, _ := json.Marshal(x)
			schema[prefix+"v:"+string(b)]++
			n++
		}
	}
	if s, ok := m["inputSchema"]; ok {
		walk("", s)
	}
	if a, ok := m["annotations"]; ok {
		walk("a:", a)
	}
	return desc, schema, true
}

// addWords counts the lower-cased letter-and-digit runs of s into into,
// each prefixed, while *n stays under maxSimilarityTokens.
func addWords(into map[string]int, prefix, s string, n *int) {
	start := -1
	flush := func(end int) {
		if start >= 0 && *n < maxSimilarityTokens {
			into[prefix+strings.ToLower(s[start:end])]++
			*n++
		}
		start = -1
	}
	for i, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		flush(i)
	}
	flush(len(s))
}

// dice is the Dice coefficient of two multisets: twice the shared count
// over the total; 1 for two empty sets.
func dice(a, b map[string]int) float64 {
	ta, tb := 0, 0
	for _, c := range a {
		ta += c
	}
	for _, c := range b {
		tb += c
	}
	if ta+tb == 0 {
		return 1
	}
	shared := 0
	for w, c := range a {
		shared += min(c, b[w])
	}
	return 2 * float64(shared) / float64(ta+tb)
}

// RenameOf reports the pin among pins that canon (the canonical form of
// tool, a tool without a pin) looks like a rename of: a pin of another
// tool that its server no longer lists (listed reports false), whose
// definition scores at least RenameSimilarity against canon; the best
// score wins, then the first in pins' order. ok is false when there is
// none.
func RenameOf(canon json.RawMessage, tool string, pins []Pin, listed func(tool string) bool) (from Pin, score float64, ok bool) {
	for _, p := range pins {
		if p.Tool == tool || len(p.Def) == 0 || listed(p.Tool) {
			continue
		}
		if s := Similarity(canon, p.Def); s >= RenameSimilarity && s > score {
			from, score, ok = p, s, true
		}
	}
	return from, score, ok
}

// Bounds of one tenant's pins, kept by every PinStore (DefaultPinBounds;
// a store may be given lower ones, as tests do): past either, a write
// that would add a pin or grow one fails with ErrPinLimit and nothing is
// stored or evicted (a pin is a security record; none is ever dropped to
// make room). The rug-pull check then holds the new entry for review
// (-32051) rather than let it on unpinned; the admin API answers 409.
// 2,000 pins of 512 KiB in all keep a tenant's pins, with its other
// registry items, within one page (1 MB) of one DynamoDB Query, so that a
// new instance reads them in one round trip (docs/design/cost.md).
const (
	MaxPinsPerTenant     = 2000
	MaxPinBytesPerTenant = 512 << 10
)

// PinBounds are the bounds of one tenant's pins a store keeps: Count
// pins of Bytes bytes in all (PinSize).
type PinBounds struct{ Count, Bytes int }

// DefaultPinBounds are MaxPinsPerTenant and MaxPinBytesPerTenant.
var DefaultPinBounds = PinBounds{Count: MaxPinsPerTenant, Bytes: MaxPinBytesPerTenant}

// OrDefault is b, or DefaultPinBounds when b is zero.
func (b PinBounds) OrDefault() PinBounds {
	if b == (PinBounds{}) {
		return DefaultPinBounds
	}
	return b
}

// ErrPinLimit is a pin write refused at the tenant's PinBounds. It wraps
// store.ErrConflict.
var ErrPinLimit = fmt.Errorf("%w: the tenant's pins are at their limit (count or bytes); delete pins of entries no longer used", store.ErrConflict)

// PinSize is what p counts against MaxPinBytesPerTenant: the length of its
// JSON encoding, as the stores keep it.
func PinSize(p Pin) int {
	b, err := json.Marshal(p)
	if err != nil {
		return 0
	}
	return len(b)
}

// PinTally is a tenant's pins as its store counts them: how many, their
// bytes (PinSize), and a version that every pin write that lands moves
// on by one, so that a reader that knows the version its copy was read
// at can tell, from the tally alone, whether its copy is still current.
type PinTally struct {
	Count   int   `json:"count"`
	Bytes   int   `json:"bytes"`
	Version int64 `json:"version"`
}

// Fits reports whether the tally has room within b for a write that
// changes the count by dn and the bytes by db: always for a write that
// adds nothing.
func (t PinTally) Fits(dn, db int, b PinBounds) bool {
	if dn <= 0 && db <= 0 {
		return true
	}
	return t.Count+dn <= b.Count && t.Bytes+db <= b.Bytes
}
