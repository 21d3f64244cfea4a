package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode"
)

// Pin is the approved definition of one tool of one tenant's server: the
// defence against a rug pull, a server that changes a tool after it was
// reviewed. A listed definition whose PinHash differs from its pin's Hash
// is refused (-32051) and left out of tools/list until an operator pins it
// again.
type Pin struct {
	Tenant string `json:"tenant"`
	Server string `json:"server"`
	Tool   string `json:"tool"` // the tool's name as its server lists it
	// Hash is PinHash of the pinned definition, and Def its canonical form
	// (CanonicalTool), kept so that an operator sees what changed.
	Hash string          `json:"hash"`
	Def  json.RawMessage `json:"def,omitempty"`
	// By is who pinned it: PinnedOnFirstUse, or the operator's name.
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// PinnedOnFirstUse is Pin.By for a pin made the first time the gateway
// listed the tool (trust on first use).
const PinnedOnFirstUse = "first-use"

// PinStore keeps the pins, shared by every gateway instance of a store.
type PinStore interface {
	// Pins lists tenant's pins, of server only when server is not "",
	// sorted by server then tool.
	Pins(ctx context.Context, tenant, server string) ([]Pin, error)
	// PinIfAbsent stores p unless its tool has a pin already, and returns
	// the pin in force: p, or the one that was there (whose Hash may
	// differ). Two instances pinning at once agree on one pin.
	PinIfAbsent(ctx context.Context, p Pin) (Pin, error)
	// PutPin stores p, replacing the tool's pin (an operator re-pinning).
	PutPin(ctx context.Context, p Pin) error
	// DeletePin drops the tool's pin: store.ErrNotFound when there is
	// none. The next listing pins the tool again on first use.
	DeletePin(ctx context.Context, tenant, server, tool string) error
}

// CanonicalTool returns the canonical form of a tool definition for
// pinning and its hash: an object of the definition's name, description,
// inputSchema and annotations (the members that change what a model is
// told and what it may send; a missing one is left out), re-encoded with
// object keys sorted at every level and no insignificant space, so that
// two servers listing the same tool with members in another order or other
// spacing pin the same hash. The hash is "sha256:" and the hex SHA-256 of
// the canonical form.
func CanonicalTool(def json.RawMessage) (canon json.RawMessage, hash string, err error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(def, &m); err != nil {
		return nil, "", err
	}
	if m == nil {
		return nil, "", errors.New("registry: a tool definition is an object")
	}
	pick := map[string]any{}
	for _, k := range []string{"name", "description", "inputSchema", "annotations"} {
		raw, ok := m[k]
		if !ok {
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, "", err
		}
		pick[k] = v
	}
	// encoding/json sorts map keys and writes no space; numbers keep their
	// float64 value (1.0 and 1 pin alike).
	b, err := json.Marshal(pick)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(b)
	return b, "sha256:" + hex.EncodeToString(sum[:]), nil
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
