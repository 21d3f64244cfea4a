package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Manifest is one layer's bounds on a session (seed 003): the tenant's, an
// API key's, or one a session declares. Zero limits are "no limit"; a nil
// Grants is "no grant list". Layers are combined by Merge, and a narrower
// layer can only narrow.
type Manifest struct {
	// Grants lists, per decidable method, the "server/name" patterns the
	// session may use ("*" globs; the name is the tool, the prompt or the
	// resource URI). Nil: every method and object is granted. Non-nil: a
	// method it does not list is not granted at all.
	Grants map[string][]string `json:"grants,omitempty" yaml:"grants,omitempty"`

	// MaxLifetimeSecs: a session this old or older is refused (lifetime).
	MaxLifetimeSecs int64 `json:"max_lifetime_secs,omitempty" yaml:"max_lifetime_secs,omitempty"`
	// MaxIdleSecs: a session idle this long since its last allowed call
	// (or since it started) is refused (idle).
	MaxIdleSecs int64 `json:"max_idle_secs,omitempty" yaml:"max_idle_secs,omitempty"`
	// MaxToolCalls: a tools/call once this many were forwarded is refused
	// (tool_calls).
	MaxToolCalls int `json:"max_tool_calls,omitempty" yaml:"max_tool_calls,omitempty"`
	// MaxSteps: a declared step at or past it is refused, and so is a new
	// step once this many distinct steps were seen (steps). Calls that
	// declare no step are bounded by MaxToolCalls only.
	MaxSteps int `json:"max_steps,omitempty" yaml:"max_steps,omitempty"`
}

// Validate checks m: every grant keyed by a decidable method with valid
// patterns, no negative limit. It is pure and fast; nil is valid.
func (m *Manifest) Validate() error {
	_, err := m.compile()
	return err
}

// isZero reports whether m bounds nothing.
func (m *Manifest) isZero() bool {
	return m == nil || (m.Grants == nil && m.MaxLifetimeSecs == 0 && m.MaxIdleSecs == 0 &&
		m.MaxToolCalls == 0 && m.MaxSteps == 0)
}

// grantSet is one manifest's compiled grant lists, by method.
type grantSet map[string][]pattern

func (m *Manifest) compile() (*Bounds, error) {
	if m.isZero() {
		return nil, nil
	}
	switch {
	case m.MaxLifetimeSecs < 0:
		return nil, errors.New("manifest: max_lifetime_secs is negative")
	case m.MaxIdleSecs < 0:
		return nil, errors.New("manifest: max_idle_secs is negative")
	case m.MaxToolCalls < 0:
		return nil, errors.New("manifest: max_tool_calls is negative")
	case m.MaxSteps < 0:
		return nil, errors.New("manifest: max_steps is negative")
	}
	b := &Bounds{
		lifetime:     time.Duration(m.MaxLifetimeSecs) * time.Second,
		idle:         time.Duration(m.MaxIdleSecs) * time.Second,
		maxToolCalls: m.MaxToolCalls,
		maxSteps:     m.MaxSteps,
	}
	if m.Grants != nil {
		g := make(grantSet, len(m.Grants))
		for method, srcs := range m.Grants {
			if !Decidable(method) && !Reachable(method) {
				return nil, fmt.Errorf("manifest: grants: %q is not a decidable method (tools/call, resources/read, prompts/get, completion/complete) nor a server-bound one (logging/setLevel, sampling/createMessage, elicitation/create, roots/list)", method)
			}
			ps, err := compilePatterns(srcs)
			if err != nil {
				return nil, fmt.Errorf("manifest: grants[%q]: %w", method, err)
			}
			g[method] = ps
		}
		b.grants = []grantSet{g}
	}
	return b, nil
}

// canonicalManifest is a manifest's form in the policy hash. Unlike
// Manifest it keeps a nil Grants (null: everything granted) apart from an
// empty one ({}: nothing granted).
type canonicalManifest struct {
	Grants          map[string][]string `json:"grants"`
	MaxLifetimeSecs int64               `json:"max_lifetime_secs"`
	MaxIdleSecs     int64               `json:"max_idle_secs"`
	MaxToolCalls    int                 `json:"max_tool_calls"`
	MaxSteps        int                 `json:"max_steps"`
}

// canonical is m's form in the policy hash: grant lists sorted and
// deduplicated; nil when m bounds nothing.
func (m *Manifest) canonical() *canonicalManifest {
	if m.isZero() {
		return nil
	}
	c := &canonicalManifest{
		MaxLifetimeSecs: m.MaxLifetimeSecs, MaxIdleSecs: m.MaxIdleSecs,
		MaxToolCalls: m.MaxToolCalls, MaxSteps: m.MaxSteps,
	}
	if m.Grants != nil {
		c.Grants = make(map[string][]string, len(m.Grants))
		for k, v := range m.Grants {
			c.Grants[k] = sortedSet(v)
		}
	}
	return c
}

// Bounds are the compiled, merged bounds of one or more manifests. A nil
// *Bounds bounds nothing. Bounds are immutable and safe for concurrent use.
type Bounds struct {
	// grants: a call must be granted by every set (the intersection of
	// the layers' grants, kept as a conjunction rather than computed, so
	// that it is exact for any globs).
	grants       []grantSet
	lifetime     time.Duration
	idle         time.Duration
	maxToolCalls int
	maxSteps     int
}

// Merge compiles the manifests (nil ones are skipped), typically the
// tenant's, then a key's, then a session's, into one set of bounds: grants
// are intersected (a call must be granted by every layer that has a grant
// list) and each limit is the smallest one set. A layer can therefore only
// narrow the others. It returns nil when no manifest bounds anything, and
// an error naming the first invalid manifest.
func Merge(ms ...*Manifest) (*Bounds, error) {
	var out *Bounds
	for i, m := range ms {
		b, err := m.compile()
		if err != nil {
			return nil, fmt.Errorf("manifest %d: %w", i, err)
		}
		out = out.Narrow(b)
	}
	return out, nil
}

// Narrow returns the bounds of both b and o, the intersection: either may
// be nil. Neither is changed.
func (b *Bounds) Narrow(o *Bounds) *Bounds {
	switch {
	case b == nil:
		return o
	case o == nil:
		return b
	}
	return &Bounds{
		grants:       append(slices.Clip(b.grants), o.grants...),
		lifetime:     minLimit(b.lifetime, o.lifetime),
		idle:         minLimit(b.idle, o.idle),
		maxToolCalls: minLimit(b.maxToolCalls, o.maxToolCalls),
		maxSteps:     minLimit(b.maxSteps, o.maxSteps),
	}
}

// Counted reports whether b reads a session's manifest counters
// (session.Counter: the idle clock LastAllowed, tool_calls, the declared
// steps): max_idle_secs, max_tool_calls or max_steps. Grants and the
// lifetime read none.
func (b *Bounds) Counted() bool {
	return b != nil && (b.idle > 0 || b.maxToolCalls > 0 || b.maxSteps > 0)
}

// MaxToolCalls is b's max_tool_calls (0: no limit). The caller reserves a
// tools/call against it before sending the call (session.Counter.Reserve),
// so that the limit holds for calls in flight together.
func (b *Bounds) MaxToolCalls() int {
	if b == nil {
		return 0
	}
	return b.maxToolCalls
}

// minLimit is the smaller of two limits where 0 is "no limit".
func minLimit[T int | time.Duration](a, b T) T {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// ManifestGate enforces bounds ahead of its inner decider, in this order:
// the session clocks (lifetime, then idle: an out-of-time session is
// refused whatever it asks), the grant lists for the method, the budgets
// of a tools/call (max_tool_calls, then max_steps), then the inner
// decider. Its refusals are -32005 CAPABILITY_DENIED with Reason one of
// lifetime, idle, grant, tool_calls, steps and Rule "manifest:<reason>".
// The bounds are the gate's own narrowed by the request's (Request.Bounds).
//
// A manifest has no audit mode: it is a grant, and a grant that only
// logged its bounds would bound nothing. The gate reads the session facts
// and changes nothing: touching the idle clock and counting the budgets
// is the caller's job, for calls the whole chain allowed (Session.Count).
type ManifestGate struct {
	bounds *Bounds
	inner  Decider
}

// NewManifestGate wraps inner (nil: AllowAll) with bounds (nil: none; the
// request's bounds still apply).
func NewManifestGate(bounds *Bounds, inner Decider) *ManifestGate {
	if inner == nil {
		inner = AllowAll{}
	}
	return &ManifestGate{bounds: bounds, inner: inner}
}

// Decide applies the clocks, the grants and the budgets, then asks the
// inner decider. A method that is not decidable is refused with -32003.
func (g *ManifestGate) Decide(ctx context.Context, req *Request) Verdict {
	if !Decidable(req.Method) {
		return undecidable()
	}
	if reason := g.bounds.Narrow(req.Bounds).check(req); reason != "" {
		return capability(reason, "manifest:"+reason)
	}
	return g.inner.Decide(ctx, req)
}

// Reachable reports whether method is a server-bound message that no
// Decider decides but a manifest bounds (Reach): logging/setLevel, and
// the methods of a server's requests, by which a client's answer to one
// is known (sampling/createMessage, elicitation/create, roots/list).
func Reachable(method string) bool {
	switch method {
	case "logging/setLevel", "sampling/createMessage", "elicitation/create", "roots/list":
		return true
	}
	return false
}

// Reach returns the reason b refuses req, a Reachable message to
// req.Server (its name empty), or "": the session clocks, and, under a
// grant list, a method the list does not name for that server (a grant
// list names what a session may use; a method it does not list is not
// granted, so "tools/call: [a/echo]" alone stops logging/setLevel and a
// client's answers to server a). A grant "logging/setLevel: [a/*]" lets
// them through to a. A method that is not Reachable is refused (grant).
func (b *Bounds) Reach(req *Request) string {
	if !Reachable(req.Method) {
		return ReasonGrant
	}
	return b.check(req)
}

// Unreached is the verdict refusing a Reachable message for reason (what
// Reach returned): -32005 with that reason, as the manifest gate refuses.
func Unreached(reason string) Verdict { return capability(reason, "manifest:"+reason) }

// check returns the reason b refuses req, or "".
func (b *Bounds) check(req *Request) string {
	if b == nil {
		return ""
	}
	s := &req.Session
	if b.lifetime > 0 && s.Age(req.Now) >= b.lifetime {
		return ReasonLifetime
	}
	if b.idle > 0 && s.Idle(req.Now) >= b.idle {
		return ReasonIdle
	}
	name := subject(req)
	for _, g := range b.grants {
		if _, ok := firstMatch(g[req.Method], req.Server, name); !ok {
			return ReasonGrant
		}
	}
	if req.Method != MethodToolsCall {
		return ""
	}
	if b.maxToolCalls > 0 && s.ToolCalls >= b.maxToolCalls {
		return ReasonToolCalls
	}
	// A list does not know the step a call will declare; a call that
	// declares none is not step-bounded, so a list is not either.
	if st := s.Step; b.maxSteps > 0 && st.Declared && !req.Listing {
		if st.N >= int64(b.maxSteps) || (!s.seen(st.N) && len(s.Steps) >= b.maxSteps) {
			return ReasonSteps
		}
	}
	return ""
}

// MetaManifest is the _meta key a client declares its session's own
// manifest under, on the request that opens the session: a Manifest as a
// JSON object. It is merged with the tenant's and the key's (Merge), so it
// can only narrow them.
const MetaManifest = "aegis/manifest"

// MaxSessionManifestBytes caps a session's declared manifest.
const MaxSessionManifestBytes = 8 << 10

// ParseManifest reads a manifest as JSON (a session's declared one): an
// object with the fields of Manifest, no other, validated; at most
// MaxSessionManifestBytes. Every error names what is wrong.
func ParseManifest(raw []byte) (*Manifest, error) {
	if len(raw) > MaxSessionManifestBytes {
		return nil, fmt.Errorf("manifest: %d bytes, over %d", len(raw), MaxSessionManifestBytes)
	}
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return nil, errors.New("manifest: not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if dec.More() {
		return nil, errors.New("manifest: more than one JSON value")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// ErrBadStep is returned by ParseStep for a declared step that is not a
// non-negative integer. The caller refuses the request as invalid params
// (-32602): a step it cannot read is neither declared nor absent.
var ErrBadStep = errors.New(`policy: _meta["aegis/step"] is not a non-negative integer`)

// ParseStep reads the declared step of a request from its params,
// _meta["aegis/step"]: a JSON integer >= 0 (1 and 1.0 are the same step).
// Params without _meta or without the key declare no step; params that are
// not a JSON object declare none either (the JSON-RPC layer refuses those).
func ParseStep(params json.RawMessage) (Step, error) {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(bytes.TrimSpace(params)) == 0 || json.Unmarshal(params, &p) != nil {
		return Step{}, nil
	}
	raw, ok := p.Meta["aegis/step"]
	if !ok {
		return Step{}, nil
	}
	var n json.Number
	if t := bytes.TrimSpace(raw); len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return Step{}, ErrBadStep // json.Number would take the string "3"
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return Step{}, ErrBadStep
	}
	i, err := n.Int64()
	if err != nil {
		f, ferr := n.Float64()
		if ferr != nil || f != float64(int64(f)) || f >= 1<<62 {
			return Step{}, ErrBadStep
		}
		i = int64(f)
	}
	if i < 0 {
		return Step{}, ErrBadStep
	}
	return Step{N: i, Declared: true}, nil
}

var _ Decider = (*ManifestGate)(nil)
