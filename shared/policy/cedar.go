package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"

	cedar "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
	"github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/cedar-policy/cedar-go/x/exp/batch"
)

// Bounds on the arguments Cedar sees as context.arguments. Arguments over
// either bound, or that are not a JSON object, are withheld: the context
// then holds an empty arguments record and arguments_truncated: true.
const (
	MaxArgumentBytes = 64 << 10 // encoded size of the arguments
	MaxArgumentDepth = 32       // nesting of objects and arrays, the arguments object being 1
)

// The Cedar entity types of the entity model (docs/policy.md).
const (
	typeCaller   types.EntityType = "Caller"
	typeRole     types.EntityType = "Role"
	typeAction   types.EntityType = "Action"
	typeTool     types.EntityType = "Tool"
	typeResource types.EntityType = "Resource"
	typePrompt   types.EntityType = "Prompt"
	typeServer   types.EntityType = "Server"
)

// ParseError is a cedar_policies text that cannot be loaded: it does not
// parse, or a policy's annotations are wrong (a repeated @id, an @approval
// other than "required" or on a forbid). Line and Column are 1-based and
// point into the text; 0 when cedar-go's message carried no position.
type ParseError struct {
	Line, Column int
	Msg          string
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return "cedar_policies: " + e.Msg
	}
	return fmt.Sprintf("cedar_policies:%d:%d: %s", e.Line, e.Column, e.Msg)
}

// cedarPos finds the first "<input>:LINE:COLUMN" in cedar-go's parse error
// text: cedar-go returns parse errors as text only, and this format is
// pinned by a test so that a change of it fails there.
var cedarPos = regexp.MustCompile(`<input>:(\d+):(\d+):? ?`)

func parseError(err error) *ParseError {
	msg := err.Error()
	m := cedarPos.FindStringSubmatchIndex(msg)
	if m == nil {
		return &ParseError{Msg: strings.TrimPrefix(msg, "parser error: ")}
	}
	line, _ := strconv.Atoi(msg[m[2]:m[3]])
	col, _ := strconv.Atoi(msg[m[4]:m[5]])
	rest := strings.TrimPrefix(msg[:m[0]], "parser error: ")
	rest = strings.TrimPrefix(rest, "parse error at ")
	return &ParseError{Line: line, Column: col, Msg: strings.TrimSpace(rest + msg[m[1]:])}
}

// cedarPolicy is what the layer knows of one loaded policy.
type cedarPolicy struct {
	id       string
	index    int // order in the text
	forbid   bool
	approval bool
}

// cedarLayer is the Cedar rule layer: the tenant's policy set over the
// entity model of docs/policy.md. Cedar's rule: a matching forbid denies;
// otherwise a matching permit allows; otherwise deny (no permit). Cedar
// skips a policy whose evaluation errors; this layer keeps that for a
// permit (an erroring permit permits nothing) and fails closed for a
// forbid: an erroring forbid denies, so that an error can never turn a
// denial into an allow. Among matching permits, one annotated
// @approval("required") makes the verdict require approval.
type cedarLayer struct {
	meta map[cedar.PolicyID]*cedarPolicy
	// byMethod indexes the policies by the scope of their head, so that a
	// request evaluates only those whose action and resource scope can
	// match it. The index is exact: a policy left out could not have
	// matched (nor errored: Cedar evaluates a condition only once the
	// scope matches).
	byMethod map[string]*scopeIndex
	// ents caches the entities of recent requests (see entitiesCached).
	ents entityCache
}

// entityCache's bounds: by count, and by size, since a request whose key
// (its names and the tool's annotations, which an upstream writes) is
// over maxCachedKeyBytes is not cached; an entry's entities are of the
// order of its key. At the count bound the cache is emptied rather than
// evicted one by one.
const (
	maxCachedEntities = 1024
	maxCachedKeyBytes = 2 << 10
)

// entityCache holds the entities built for a request's caller and target:
// they depend on nothing else, and building them (above all the tool's
// annotations as a Cedar record) is most of a decision's cost. The values
// are immutable once built and shared between requests.
type entityCache struct {
	mu sync.Mutex
	m  map[string]cachedEntities
}

type cachedEntities struct {
	key                         string // the entry's key in the map, handed back on a hit
	principal, action, resource types.EntityUID
	em                          types.EntityMap
	// The verdict on these entities, once decided, for a request whose
	// candidates read no context (plainContext): then nothing else goes
	// into a decision, and the verdict is kept rather than evaluated again.
	verdict Verdict
	decided bool
}

// entitiesCached is entitiesOf through l's cache. key is the cache's key
// for req ("" when req is not cached), and verdict, decided the verdict
// kept for it (see cachedEntities).
func (l *cedarLayer) entitiesCached(req *Request, r reads) (principal, action, resource types.EntityUID, em types.EntityMap, key string, verdict Verdict, decided bool) {
	// The key is built in a buffer on the stack and looked up without
	// being made a string (m[string(b)] does not allocate); a cached
	// entry gives back its own copy. Only a miss allocates the key.
	var room [512]byte
	b := room[:0]
	for _, s := range [...]string{req.Tenant, req.Caller.ID, req.Caller.KeyID, req.Method, req.Server, req.Tool, req.Prompt, req.ResourceURI} {
		b = append(append(b, s...), 0)
	}
	for _, role := range req.Caller.Roles {
		b = append(append(b, role...), 1)
	}
	b = append(append(b, 3), req.Caller.Claims...)
	if r&readsAnnotations != 0 {
		b = append(append(b, 2), req.Annotations...)
	}
	c := &l.ents
	c.mu.Lock()
	e, ok := c.m[string(b)]
	c.mu.Unlock()
	if ok {
		return e.principal, e.action, e.resource, e.em, e.key, e.verdict, e.decided
	}
	principal, action, resource, em = entitiesOf(req, r)
	if len(b) > maxCachedKeyBytes {
		return principal, action, resource, em, "", Verdict{}, false
	}
	key = string(b)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedEntities {
		c.m = make(map[string]cachedEntities)
	}
	c.m[key] = cachedEntities{key: key, principal: principal, action: action, resource: resource, em: em}
	c.mu.Unlock()
	return principal, action, resource, em, key, Verdict{}, false
}

// keepVerdict records v as the verdict of the cached entry key.
func (l *cedarLayer) keepVerdict(key string, v Verdict) {
	c := &l.ents
	c.mu.Lock()
	if e, ok := c.m[key]; ok {
		e.verdict, e.decided = v, true
		c.m[key] = e
	}
	c.mu.Unlock()
}

// indexed is one policy of the index.
type indexed struct {
	id     cedar.PolicyID
	policy *cedar.Policy
	reads  reads
}

// reads is what request data a policy may read of the data that costs a
// conversion per request: the arguments (context.arguments and
// context.arguments_truncated) and the tool's annotations
// (resource.annotations). A request whose candidate policies read neither
// gets them as empty records: no policy among those evaluated can tell.
type reads uint8

const (
	readsArguments reads = 1 << iota
	readsAnnotations
	readsSession // context.session
	readsNow     // context.now
	readsAll     = readsArguments | readsAnnotations | readsSession | readsNow
)

// readsOf finds what p may read, from its text: any mention of the word
// (an attribute access, a has, an index, a record literal's key, even an
// annotation's or a string's) counts, so the test errs only towards
// converting.
func readsOf(p *cedar.Policy) reads {
	text := p.MarshalCedar()
	var r reads
	if bytes.Contains(text, []byte("arguments")) {
		r |= readsArguments
	}
	if bytes.Contains(text, []byte("annotations")) {
		r |= readsAnnotations
	}
	if bytes.Contains(text, []byte("session")) {
		r |= readsSession
	}
	if bytes.Contains(text, []byte("now")) {
		r |= readsNow
	}
	// context used other than through one member (compared whole, put in
	// a set or a record, has-tested): it may see every member.
	for rest := text; ; {
		i := bytes.Index(rest, []byte("context"))
		if i < 0 {
			break
		}
		rest = rest[i+len("context"):]
		if len(rest) == 0 || rest[0] != '.' {
			r |= readsAll
			break
		}
	}
	return r
}

// scopeIndex is one method's policies by resource scope.
type scopeIndex struct {
	any      []indexed                     // resource scope not indexed
	byUID    map[types.EntityUID][]indexed // resource == E, resource in E (E not a server)
	byServer map[string][]indexed          // resource in Server::"s", resource is T in Server::"s"
}

// candidates is the policies of one request: a cedar.PolicyIterator.
type candidates [3][]indexed

// reads is what the candidates may read.
func (c *candidates) reads() reads {
	var r reads
	for _, list := range c {
		for _, e := range list {
			r |= e.reads
		}
	}
	return r
}

// empty reports whether there is no candidate.
func (c *candidates) empty() bool { return len(c[0])+len(c[1])+len(c[2]) == 0 }

// All yields the candidate policies.
func (c *candidates) All() iter.Seq2[cedar.PolicyID, *cedar.Policy] {
	return func(yield func(cedar.PolicyID, *cedar.Policy) bool) {
		for _, list := range c {
			for _, e := range list {
				if !yield(e.id, e.policy) {
					return
				}
			}
		}
	}
}

func (l *cedarLayer) candidates(req *Request, resource types.EntityUID) *candidates {
	ix := l.byMethod[req.Method]
	if ix == nil {
		return &candidates{}
	}
	return &candidates{ix.any, ix.byUID[resource], ix.byServer[req.Server]}
}

// add puts p into the index under every method its action scope names.
func (l *cedarLayer) add(id cedar.PolicyID, p *cedar.Policy) {
	a := p.AST()
	var methods []string
	switch sc := a.Action.(type) {
	case ast.ScopeTypeEq:
		methods = []string{string(sc.Entity.ID)}
	case ast.ScopeTypeIn:
		// Action entities have no parents in the model: in is ==.
		methods = []string{string(sc.Entity.ID)}
	case ast.ScopeTypeInSet:
		for _, e := range sc.Entities {
			methods = append(methods, string(e.ID))
		}
	default:
		methods = []string{MethodToolsCall, MethodResource, MethodPrompt, MethodCompletion}
	}
	e := indexed{id: id, policy: p, reads: readsOf(p)}
	for _, m := range methods {
		if !Decidable(m) {
			continue // never asked about
		}
		ix := l.byMethod[m]
		if ix == nil {
			ix = &scopeIndex{byUID: map[types.EntityUID][]indexed{}, byServer: map[string][]indexed{}}
			l.byMethod[m] = ix
		}
		switch sc := a.Resource.(type) {
		case ast.ScopeTypeEq:
			ix.byUID[sc.Entity] = append(ix.byUID[sc.Entity], e)
		case ast.ScopeTypeIn:
			if sc.Entity.Type == typeServer {
				ix.byServer[string(sc.Entity.ID)] = append(ix.byServer[string(sc.Entity.ID)], e)
			} else {
				// A resource's only ancestor is its server: in E is == E.
				ix.byUID[sc.Entity] = append(ix.byUID[sc.Entity], e)
			}
		case ast.ScopeTypeIsIn:
			if sc.Entity.Type == typeServer {
				ix.byServer[string(sc.Entity.ID)] = append(ix.byServer[string(sc.Entity.ID)], e)
			} else {
				ix.any = append(ix.any, e)
			}
		default:
			ix.any = append(ix.any, e)
		}
	}
}

// compileCedar loads text; nil when it is empty.
func compileCedar(text string) (*cedarLayer, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	list, err := cedar.NewPolicyListFromBytes("", []byte(text))
	if err != nil {
		return nil, parseError(err)
	}
	if len(list) == 0 {
		return nil, &ParseError{Msg: "holds no policy (to deny everything, write forbid (principal, action, resource);)"}
	}
	l := &cedarLayer{meta: make(map[cedar.PolicyID]*cedarPolicy, len(list)), byMethod: map[string]*scopeIndex{}}
	for i, p := range list {
		pos := p.Position()
		at := func(format string, args ...any) error {
			return &ParseError{Line: pos.Line, Column: pos.Column, Msg: fmt.Sprintf(format, args...)}
		}
		ann := p.Annotations()
		id := fmt.Sprintf("policy%d", i)
		if v, ok := ann["id"]; ok {
			if v == "" {
				return nil, at("@id is empty")
			}
			id = string(v)
		}
		meta := &cedarPolicy{id: id, index: i, forbid: p.Effect() == cedar.Forbid}
		if v, ok := ann["approval"]; ok {
			switch {
			case v != "required":
				return nil, at(`@approval(%q): the only value is "required"`, string(v))
			case meta.forbid:
				return nil, at(`@approval on a forbid: approval is asked of a permit`)
			}
			meta.approval = true
		}
		pid := cedar.PolicyID(id)
		if _, dup := l.meta[pid]; dup {
			return nil, at("policy id %q is used twice", id)
		}
		l.meta[pid] = meta
		l.add(pid, p)
	}
	return l, nil
}

// Decide applies the rule above.
//
// Only the candidate policies are evaluated (the index), and the request
// data they cannot read is not converted (reads): with no candidate, the
// answer is no permit at once.
func (l *cedarLayer) Decide(ctx context.Context, req *Request) Verdict {
	cands := l.candidates(req, resourceOf(req))
	if cands.empty() {
		return denied(ReasonNoPermit, RuleNoPermit)
	}
	r := cands.reads()
	principal, action, resource, entities, key, kept, decided := l.entitiesCached(req, r)
	if req.Listing {
		return l.decideListing(ctx, cands, principal, action, resource, entities, req, r)
	}
	// A request whose candidates read no context is decided by its
	// entities alone (the cache's key): decided once, then kept.
	contextFree := r&(readsArguments|readsSession|readsNow) == 0
	if contextFree && decided {
		return kept
	}
	d, diag := cedar.Authorize(cands, entities, cedar.Request{
		Principal: principal, Action: action, Resource: resource, Context: contextOf(req, false, r),
	})
	v := l.verdict(d, diag)
	if contextFree && key != "" {
		l.keepVerdict(key, v)
	}
	return v
}

// sessionFreeCedar is l deciding only the requests whose candidate
// policies read no context.session (BuildSessionFree); the others are
// allowed, which says nothing.
type sessionFreeCedar struct{ l *cedarLayer }

func (s sessionFreeCedar) Decide(ctx context.Context, req *Request) Verdict {
	if s.l.candidates(req, resourceOf(req)).reads()&readsSession != 0 {
		return allow("")
	}
	return s.l.Decide(ctx, req)
}

// decideListing asks whether some arguments would allow req: the
// arguments are unknown to Cedar (batch's Ignore), so a permit's condition
// on them is dropped and a forbid with one does not apply.
func (l *cedarLayer) decideListing(ctx context.Context, cands *candidates, principal, action, resource types.EntityUID, entities types.EntityMap, req *Request, r reads) Verdict {
	v := denied(ReasonEvalError, RuleNoPermit)
	err := batch.Authorize(ctx, cands, entities, batch.Request{
		Principal: principal, Action: action, Resource: resource, Context: contextOf(req, true, r),
	}, func(r batch.Result) error {
		v = l.verdict(r.Decision, r.Diagnostic)
		return nil
	})
	if err != nil {
		return denied(ReasonEvalError, RuleNoPermit)
	}
	return v
}

// verdict turns Cedar's answer into a Verdict, naming the first policy in
// text order among those that decided.
func (l *cedarLayer) verdict(d cedar.Decision, diag cedar.Diagnostic) Verdict {
	var failedForbid *cedarPolicy
	for _, e := range diag.Errors {
		if m := l.meta[e.PolicyID]; m != nil && m.forbid && (failedForbid == nil || m.index < failedForbid.index) {
			failedForbid = m
		}
	}
	if failedForbid != nil {
		return denied(ReasonEvalError, "cedar:"+failedForbid.id)
	}
	var first, firstApproval *cedarPolicy
	for _, r := range diag.Reasons {
		m := l.meta[r.PolicyID]
		if m == nil {
			continue
		}
		if first == nil || m.index < first.index {
			first = m
		}
		if m.approval && (firstApproval == nil || m.index < firstApproval.index) {
			firstApproval = m
		}
	}
	switch {
	case d == cedar.Deny && first != nil:
		return denied(ReasonForbid, "cedar:"+first.id)
	case d == cedar.Deny:
		return denied(ReasonNoPermit, RuleNoPermit)
	case firstApproval != nil:
		return approval("cedar:" + firstApproval.id)
	case first != nil:
		return allow("cedar:" + first.id)
	}
	// Allow with no reason does not happen in Cedar; fail closed if it did.
	return denied(ReasonNoPermit, RuleNoPermit)
}

// entitiesOf builds the request's principal, action and resource and the
// entities that carry their attributes (docs/policy.md).
// resourceOf is the request's resource entity.
func resourceOf(req *Request) types.EntityUID {
	switch {
	case req.Method == MethodToolsCall:
		return types.NewEntityUID(typeTool, types.String(req.Server+"/"+req.Tool))
	case req.Method == MethodPrompt || (req.Method == MethodCompletion && req.Prompt != ""):
		return types.NewEntityUID(typePrompt, types.String(req.Server+"/"+req.Prompt))
	}
	return types.NewEntityUID(typeResource, types.String(req.ResourceURI))
}

func entitiesOf(req *Request, r reads) (principal, action, resource types.EntityUID, em types.EntityMap) {
	principal = types.NewEntityUID(typeCaller, types.String(req.Caller.ID))
	roles := make([]types.Value, len(req.Caller.Roles))
	parents := make([]types.EntityUID, len(req.Caller.Roles))
	for i, r := range req.Caller.Roles {
		roles[i] = types.String(r)
		parents[i] = types.NewEntityUID(typeRole, types.String(r))
	}
	action = types.NewEntityUID(typeAction, types.String(req.Method))
	server := types.NewEntityUID(typeServer, types.String(req.Server))
	var attrs types.RecordMap
	switch {
	case req.Method == MethodToolsCall:
		resource = types.NewEntityUID(typeTool, types.String(req.Server+"/"+req.Tool))
		ann := emptyRecord
		if r&readsAnnotations != 0 {
			ann = annotationsOf(req.Annotations)
		}
		attrs = types.RecordMap{
			"server":      types.String(req.Server),
			"name":        types.String(req.Tool),
			"annotations": ann,
		}
	case req.Method == MethodPrompt || (req.Method == MethodCompletion && req.Prompt != ""):
		resource = types.NewEntityUID(typePrompt, types.String(req.Server+"/"+req.Prompt))
		attrs = types.RecordMap{"server": types.String(req.Server), "name": types.String(req.Prompt)}
	default:
		resource = types.NewEntityUID(typeResource, types.String(req.ResourceURI))
		attrs = types.RecordMap{"server": types.String(req.Server), "uri": types.String(req.ResourceURI)}
	}
	em = types.EntityMap{
		principal: {
			UID:     principal,
			Parents: types.NewEntityUIDSet(parents...),
			Attributes: types.NewRecord(types.RecordMap{
				"tenant": types.String(req.Tenant),
				"roles":  types.NewSet(roles...),
				"key_id": types.String(req.Caller.KeyID),
				// The OAuth token's claims; the empty record with an API key.
				"claims": annotationsOf(req.Caller.Claims),
			}),
		},
		resource: {UID: resource, Parents: types.NewEntityUIDSet(server), Attributes: types.NewRecord(attrs)},
	}
	return principal, action, resource, em
}

// contextOf is the request's context record. listing leaves the arguments
// unknown (batch.Ignore); without readsArguments in r they are the empty
// record, and without readsSession or readsNow the session and the clock
// are left out (no candidate names them, so none can tell).
func contextOf(req *Request, listing bool, r reads) types.Record {
	if !listing && r&(readsArguments|readsSession|readsNow) == 0 {
		return plainContext // no candidate reads the context: no conversion
	}
	m := types.RecordMap{}
	if r&readsSession != 0 {
		m["session"] = types.NewRecord(types.RecordMap{
			"id":         types.String(req.Session.ID),
			"tool_calls": types.Long(req.Session.ToolCalls),
			"age_secs":   types.Long(int64(req.Session.Age(req.Now).Seconds())),
		})
	}
	if r&readsNow != 0 {
		m["now"] = types.Long(req.Now.Unix())
	}
	if listing {
		m["arguments"] = batch.Ignore()
		m["arguments_truncated"] = batch.Ignore()
		return types.NewRecord(m)
	}
	args, ok := emptyRecord, true
	if r&readsArguments != 0 {
		args, ok = argumentsOf(req.Arguments)
	}
	m["arguments"] = args
	m["arguments_truncated"] = types.Boolean(!ok)
	return types.NewRecord(m)
}

var emptyRecord = types.NewRecord(nil)

// plainContext is the context of a request whose candidate policies read
// none of it: the members they could test for without reading them.
var plainContext = types.NewRecord(types.RecordMap{"arguments": emptyRecord, "arguments_truncated": types.False})

// argumentsOf converts arguments to a Cedar record; false when they are
// withheld (over a bound, not JSON, not an object). Absent or null
// arguments are the empty record, not withheld.
func argumentsOf(raw json.RawMessage) (types.Record, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" || string(t) == "{}" {
		return emptyRecord, true
	}
	if len(t) > MaxArgumentBytes || t[0] != '{' {
		return emptyRecord, false
	}
	v, err := fromJSON(t)
	if err != nil {
		return emptyRecord, false
	}
	rec, ok := v.(types.Record)
	return rec, ok
}

// annotationsOf converts a tool's annotations; an absent, unreadable or
// oversized value is the empty record.
func annotationsOf(raw json.RawMessage) types.Record {
	rec, ok := argumentsOf(raw)
	if !ok {
		return emptyRecord
	}
	return rec
}

var errTooDeep = errors.New("policy: JSON nested deeper than MaxArgumentDepth")

// fromJSON converts one JSON value to Cedar: object → record, array →
// set (Cedar has no lists: order and repeats are lost), string, boolean,
// an integer in int64 → Long, another number → Decimal when Cedar's
// decimal holds it exactly, else its literal as a String. null is left
// out of records and sets.
func fromJSON(b []byte) (types.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("policy: trailing data after JSON value")
	}
	return convert(v, 1)
}

func convert(v any, depth int) (types.Value, error) {
	switch x := v.(type) {
	case map[string]any:
		if depth > MaxArgumentDepth {
			return nil, errTooDeep
		}
		m := make(types.RecordMap, len(x))
		for k, e := range x {
			if e == nil {
				continue
			}
			c, err := convert(e, depth+1)
			if err != nil {
				return nil, err
			}
			m[types.String(k)] = c
		}
		return types.NewRecord(m), nil
	case []any:
		if depth > MaxArgumentDepth {
			return nil, errTooDeep
		}
		s := make([]types.Value, 0, len(x))
		for _, e := range x {
			if e == nil {
				continue
			}
			c, err := convert(e, depth+1)
			if err != nil {
				return nil, err
			}
			s = append(s, c)
		}
		return types.NewSet(s...), nil
	case string:
		return types.String(x), nil
	case bool:
		return types.Boolean(x), nil
	case json.Number:
		return number(x), nil
	}
	return nil, fmt.Errorf("policy: unexpected JSON value %T", v)
}

// number converts a JSON number (see fromJSON).
func number(n json.Number) types.Value {
	if i, err := n.Int64(); err == nil {
		return types.Long(i)
	}
	if f, err := n.Float64(); err == nil && f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
		return types.Long(int64(f))
	}
	if d, err := types.ParseDecimal(n.String()); err == nil {
		return d
	}
	return types.String(n.String())
}

var (
	_ Decider = (*cedarLayer)(nil)
	_ Decider = sessionFreeCedar{}
)
