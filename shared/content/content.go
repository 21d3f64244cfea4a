// Package content is the pipeline's content slot and its response-side
// results slot: what is called and what comes back, checked with the one
// scanner (shared/scan) and the tool's inputSchema (shared/schema).
//
// Request side (slot "content", before approval, so that nobody is asked
// to approve a call that would be blocked), in this order:
//
//  1. Tool poisoning: the definition of what the request names, as its
//     server listed it (a tool's, pipeline.Call.ToolDef; for the reads a
//     prompt's, resource's or resource template's, pipeline.Call.Listed)
//     is checked by route.Inspector (the threat detectors over every
//     string of it; a verdict per definition). Under THREAT_MODE=block a
//     poisoned one is refused with -32051 TOOL_POISONING (data: server,
//     tool, rule, rules; a prompt, resource or template named in tool as
//     "prompt:NAME", "resource:URI", "template:URITEMPLATE"); monitor
//     records and logs. The same verdict hides the entry from its list
//     (tools/list, prompts/list, resources/list,
//     resources/templates/list) under block (Check.Visible).
//     Rug pulls, with Options.Pins: each entry is pinned per tenant,
//     server and kind by its canonical hash (registry.Canonical; a pin
//     of the legacy format that approves the definition is rewritten in
//     the current one, registry.PinApproves) the first
//     time it is listed or called (trust on first use); a definition
//     that differs from its pin is refused with -32051 (data: server,
//     tool, rule "definition-changed", pinned, new) and left out of
//     tools/list under block until an operator pins it again; monitor
//     lists, lets it on, records and logs. A tool (never a prompt,
//     resource or template) without a pin is held
//     for review instead of pinned when its tenant says so
//     (registry.Tenant.NewTools "hold"), and under either setting when
//     it looks like a pinned tool its server no longer lists, renamed
//     (registry.RenameOf, with Options.Catalog): held, it is left out of
//     tools/list and refused with -32051 (data: server, tool, rule
//     "held-for-review", reason, new, renamed_from) under block until an
//     operator pins it; monitor lists, lets it on, records and logs.
//     Pins are read per server at most every Options.PinRefresh (or
//     handed over by the tenant's view, Check.FillPins); when
//     the store cannot be read the last pins read stay in force, and
//     with none the definition goes uncompared (logged): the pins alone
//     fail open. An entry without a pin whose tenant's pins are at their
//     bounds (registry.ErrPinLimit) is held as a new tool is (-32051,
//     "held-for-review", the reason says so), never let on unpinned.
//  2. INPUT_VALIDATION: block refuses arguments that fail the tool's
//     inputSchema with -32602 (shared/schema); monitor logs; off skips.
//  3. EGRESS_ACTION: the arguments are scanned. Under block, a credential,
//     a card number or an SSN refuses the call with -32053 EGRESS_BLOCKED
//     (data.kinds); emails, phone numbers, IBANs and dates of birth are
//     recorded and never block. monitor records and logs; off skips.
//  4. THREAT_MODE over the arguments, found in the same pass as 3: a
//     prompt injection, hidden text, an exfiltration directive or tool
//     shadowing refuses the call with -32050 PROMPT_INJECTION (data: at,
//     rules) under block; monitor records, logs at WARN and lets it on.
//
// Response side (slot "results", after the brokered credential was removed
// and before the answer and its audit record are written), over the whole
// answer (a result, or the upstream's own JSON-RPC error that is passed
// through), scanned once for both:
//
// THREAT_MODE first: a threat withholds the answer with -32050 under
// block; monitor records, logs at WARN and goes on. Then PII_ACTION:
//
//   - redact (the default): every finding is masked in place with a marker
//     naming its kind ("[masked:card]"); the JSON stays valid;
//   - monitor: recorded and logged, forwarded as it is;
//   - block: a credential, a card number or an SSN withholds the answer
//     with -32052 SENSITIVE_DATA (data.kinds); the other kinds are masked
//     as under redact.
//
// THREAT_MODE=monitor turns -32052 and -32053 into findings that are
// logged, not returned (seed 004): egress then lets the call on, and block
// masks what it would have refused, as redact does.
//
// Every finding is recorded on the call (pipeline.Call.Found, the audit
// record's findings): where ("arguments", "result", or audit.AtTool for the
// called tool's definition), kind, rule id and action, never the value.
// Each setting is the deployment's (environment) unless the tenant
// overrides it (registry.Tenant.Content).
package content

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/route"
	"github.com/aegis-gw/aegis/shared/scan"
	"github.com/aegis-gw/aegis/shared/schema"
)

// The values of the actions, as registry lists them.
const (
	block   = "block"
	monitor = "monitor"
	off     = "off"
	redact  = "redact"
)

// Options configure New.
type Options struct {
	// Defaults are the deployment's settings (config.Settings.Content);
	// an unset one is the seed's default.
	Defaults registry.ContentActions
	// Scanner scans arguments and answers; nil: every kind
	// (scan.AllKinds), so that PII and threats are found in one pass. A
	// Scanner without the threat kinds finds no threat.
	Scanner   *scan.Scanner
	Inspector *route.Inspector // tool definitions; nil: route.NewInspector(nil)
	// Pins are the rug-pull pins (registry.PinStore); nil: definitions
	// are not pinned, and a changed definition is only judged again by
	// the poisoning check. PinRefresh is how long pins read from it are
	// trusted (0: DefaultPinRefresh); Now stamps new pins (nil:
	// time.Now).
	Pins       registry.PinStore
	PinRefresh time.Duration
	// Catalog is the tool catalog the gateway routes with: what a server
	// lists now, for the rename check (a tool without a pin that looks
	// like a pinned tool its server no longer lists is held for review);
	// nil: no rename check.
	Catalog *route.Catalog
	Now     func() time.Time
	Schemas *schema.Cache // nil: a new schema.NewCache with its defaults
	Logger  *slog.Logger  // nil: slog.Default()
}

func (o *Options) fill() error {
	if err := o.Defaults.Validate(); err != nil {
		return fmt.Errorf("content: %w", err)
	}
	// An unset default is the seed's, the first of its list.
	d := &o.Defaults
	for _, f := range []struct {
		v    *string
		list []string
	}{{&d.PII, registry.PIIActions}, {&d.Egress, registry.EgressActions}, {&d.Input, registry.InputValidations}, {&d.Threat, registry.ThreatModes}} {
		if *f.v == "" {
			*f.v = f.list[0]
		}
	}
	if o.Scanner == nil {
		o.Scanner = scan.New(&scan.Options{Kinds: scan.AllKinds()})
	}
	if o.Inspector == nil {
		o.Inspector = route.NewInspector(nil)
	}
	if o.PinRefresh <= 0 {
		o.PinRefresh = DefaultPinRefresh
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Schemas == nil {
		o.Schemas = schema.NewCache(schema.DefaultMaxEntries, schema.DefaultMaxBytes)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// actions returns the actions in force for t: its overrides over the
// defaults.
func actions(d registry.ContentActions, t registry.Tenant) registry.ContentActions {
	o := t.Content
	if o.PII != "" {
		d.PII = o.PII
	}
	if o.Egress != "" {
		d.Egress = o.Egress
	}
	if o.Input != "" {
		d.Input = o.Input
	}
	if o.Threat != "" {
		d.Threat = o.Threat
	}
	return d
}

// Check is the request side's content check. It is safe for concurrent use.
type Check struct {
	o       Options
	enforce *schema.Check // INPUT_VALIDATION=block
	watch   *schema.Check // INPUT_VALIDATION=monitor
	pins    *pins         // nil: no pinning
}

// New returns the two sides, sharing o: the request side's check and the
// response side's results check. Neither needs a store, so neither fails
// to decide; an error either returns is internal, and its stage fails
// closed. New fails only for defaults that are not the settings' values.
func New(o Options) (*Check, *Results, error) {
	if err := o.fill(); err != nil {
		return nil, nil, err
	}
	so := &schema.Options{Logger: o.Logger, Cache: o.Schemas}
	k := &Check{o: o, enforce: schema.New(schema.Block, so), watch: schema.New(schema.Monitor, so)}
	if o.Pins != nil {
		k.pins = &pins{store: o.Pins, refresh: o.PinRefresh, now: o.Now, servers: map[serverKey]*serverPins{}, filled: map[string]time.Time{}, reported: map[reportKey]bool{}}
		if cat := o.Catalog; cat != nil {
			k.pins.listed = catalogListed(cat)
		}
	}
	return k, &Results{o: o}, nil
}

// Check implements pipeline.Check. A tools/call runs every check of the
// slot; another server-bound message (its scope: a read, a subscription,
// logging/setLevel, a client's answer) runs the definition check of the
// prompt, resource or template it names (poisoning and pins), then the
// egress and threat scan over the members its row of the message table
// names (Egress).
func (k *Check) Check(ctx context.Context, c *pipeline.Call) error {
	// The target's definition first (poisoning, pins: a tool, a prompt,
	// a resource or a template), then what the message carries.
	a := actions(k.o.Defaults, c.Tenant)
	if err := k.tool(ctx, c, a); err != nil {
		return err
	}
	if c.Method != "tools/call" {
		return k.Egress(ctx, c)
	}
	switch a.Input {
	case block:
		if err := k.enforce.Check(ctx, c); err != nil {
			return err
		}
	case monitor:
		if err := k.watch.Check(ctx, c); err != nil {
			return err
		}
	}
	// The arguments and the request's _meta, which is forwarded too.
	// No buffer of our own: the scanner keeps dst on a pooled state, so a
	// local array would escape and cost ~1 KB a call; nil allocates only
	// when something is found.
	var found []scan.Finding
	for _, m := range [...]string{"arguments", "_meta"} {
		v := jsonrpc.Member(c.Params, m)
		if len(v) == 0 {
			continue
		}
		var err error
		if found, err = k.o.Scanner.Scan(v, found); err != nil {
			// The decoder and the params stage read these bytes already.
			return fmt.Errorf("content: %s unreadable: %w", m, err)
		}
	}
	return k.outbound(ctx, c, a, found)
}

// Egress scans what c carries to its server besides a tools/call's
// arguments: the members of c.Params that c's row of the message table
// names (pipeline.Message.Egress; for a client's answer, c.Params is the
// whole message and the members are its result or error), in one scanner
// pass each, and decides on what is found as for a tools/call's
// arguments: EGRESS_ACTION=block refuses a credential, card number or SSN
// with -32053, THREAT_MODE=block a threat with -32050; monitor records
// and logs. A message whose row names no member is let on.
func (k *Check) Egress(ctx context.Context, c *pipeline.Call) error {
	kind := pipeline.ClientRequest
	if c.Relayed {
		if c.Method != pipeline.ResponseMethod {
			return nil // a server's request: ingress, not egress
		}
		kind = pipeline.ClientResponse
	}
	row, ok := pipeline.Lookup(kind, c.Method)
	if kind == pipeline.ClientResponse {
		row, ok = pipeline.Lookup(kind, "")
	}
	if !ok || len(row.Egress) == 0 {
		return nil
	}
	var found []scan.Finding
	for _, m := range row.Egress {
		v := c.Params
		for name := range strings.SplitSeq(m, ".") {
			v = jsonrpc.Member(v, name)
		}
		if len(v) == 0 {
			continue
		}
		var err error
		if found, err = k.o.Scanner.Scan(v, found); err != nil {
			return fmt.Errorf("content: %s of %s unreadable: %w", m, c.Method, err)
		}
		if m == "uri" || strings.HasSuffix(m, ".uri") {
			// A URI's parts as words: the scanner takes digits glued
			// to a "/" or "=" for part of a token, not a number.
			var u string
			if json.Unmarshal(v, &u) == nil {
				found = k.o.Scanner.ScanString(uriWords(u), found)
			}
		}
	}
	return k.outbound(ctx, c, actions(k.o.Defaults, c.Tenant), found)
}

// uriWords is u unescaped (%XX, and + in a query) with its delimiters as
// spaces, so that each part of it is scanned as a word of its own.
func uriWords(u string) string {
	if d, err := url.QueryUnescape(u); err == nil {
		u = d
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '/', '?', '&', '=', '#', ':', ';', ',', '@', '!', '$', '(', ')', '*', '[', ']', '{', '}', '\'', '~', '|':
			return ' '
		}
		return r
	}, u)
}

// outbound decides on found, what the scanner found in what c carries to
// its server (the tools/call's arguments, or Egress's members).
func (k *Check) outbound(ctx context.Context, c *pipeline.Call, a registry.ContentActions, found []scan.Finding) error {
	if len(found) == 0 {
		return nil
	}
	refuse := a.Egress == block && a.Threat == block
	var kinds, rules []string
	for _, f := range found {
		switch {
		case f.Kind.Threat():
			rules = addKind(rules, f.Rule)
		case a.Egress == off:
			continue
		case refuse && f.Kind.Sensitive():
			kinds = addKind(kinds, f.Kind.String())
		}
	}
	// What the call's outcome is decides each finding's action: egress
	// answers first (-32053), then the threats (-32050).
	stop := kinds != nil || rules != nil && a.Threat == block
	for _, f := range found {
		act := audit.ActionLogged
		switch {
		case f.Kind.Threat():
			if stop {
				act = audit.ActionBlocked
			}
		case a.Egress == off:
			continue
		case refuse && f.Kind.Sensitive():
			act = audit.ActionBlocked
		}
		c.Found(audit.Finding{At: audit.AtArguments, Kind: f.Kind.String(), Rule: f.Rule, Action: act})
	}
	if kinds != nil {
		k.o.Logger.WarnContext(ctx, "sensitive data in arguments; call refused (EGRESS_ACTION=block)", k.o.callAttrs(c, "kinds", kinds)...)
		return refusal.Egress(kinds)
	}
	if a.Egress != off {
		if sensitive := sensitiveKinds(found); sensitive != nil {
			k.o.Logger.WarnContext(ctx, "sensitive data in arguments; call let through (monitor)", k.o.callAttrs(c, "kinds", sensitive)...)
		}
	}
	if rules == nil {
		return nil
	}
	if a.Threat == block {
		k.o.Logger.WarnContext(ctx, "prompt injection in arguments; call refused (THREAT_MODE=block)", k.o.callAttrs(c, "rules", rules)...)
		return refusal.Injection(audit.AtArguments, rules)
	}
	k.o.Logger.WarnContext(ctx, "prompt injection in arguments; call let through (THREAT_MODE=monitor)", k.o.callAttrs(c, "rules", rules)...)
	return nil
}

// subject is what the definition checks judge: a tool (c.ToolDef) or a
// prompt, resource or resource template (c.Listed), by its pin's key,
// its definition as its server lists it, and its name as the refusal, the
// audit record and the log name it: a tool's name, or the entry's kind
// and name ("prompt:greet", "resource:file:///a.txt",
// "template:file:///{path}").
type subject struct {
	key  entryKey
	def  json.RawMessage
	name string
}

// subjectOf is what c names: its tool (called tool, as its server names
// it) or its listed entry; ok is false for neither.
func subjectOf(c *pipeline.Call, tool string) (s subject, ok bool) {
	if len(c.ToolDef) > 0 {
		return subject{entryKey{registry.PinTool, tool}, c.ToolDef, tool}, true
	}
	if l := c.Listed; len(l.Def) > 0 {
		return subject{entryKey{l.Kind, l.Name}, l.Def, l.Kind + ":" + l.Name}, true
	}
	return subject{}, false
}

// list is the listing s is in, for log lines.
func (s subject) list() string {
	switch s.key.kind {
	case registry.PinPrompt:
		return "prompts/list"
	case registry.PinResource:
		return "resources/list"
	case registry.PinTemplate:
		return "resources/templates/list"
	}
	return "tools/list"
}

// tool checks the definition of what c names (c.ToolDef or c.Listed, set
// by routing): -32051 under THREAT_MODE=block for a poisoned one, one
// that changed since it was pinned or one held for review; monitor
// records and logs it.
func (k *Check) tool(ctx context.Context, c *pipeline.Call, a registry.ContentActions) error {
	sub, ok := subjectOf(c, c.UpstreamTool)
	if !ok {
		return nil
	}
	v := k.o.Inspector.InspectKind(sub.key.kind, sub.def)
	server := ""
	if c.Server != nil {
		server = c.Server.Name
	}
	kind := registry.PinKindName(sub.key.kind)
	act := audit.ActionLogged
	if a.Threat == block {
		act = audit.ActionBlocked
	}
	pv, err := k.pins.check(ctx, c.Tenant.ID, server, sub.key, v, c.Tenant.HoldsNewTools())
	if err != nil {
		// Fail open for pins alone: the poisoning check below needs no
		// store, and a store outage must not stop every call.
		k.o.Logger.WarnContext(ctx, "pin store failed; definition not compared with its pin", "tenant", c.Tenant.ID, "server", server, "tool", sub.name, "err", err)
	}
	switch pv.state {
	case pinChanged:
		c.Found(audit.Finding{At: audit.AtTool, Kind: KindRugPull, Rule: RuleChangedSpec, Action: act})
		attrs := []any{"tenant", c.Tenant.ID, "server", server, "tool", sub.name, "pinned", pv.pinned, "new", v.PinHash}
		if a.Threat == block {
			k.o.Logger.WarnContext(ctx, kind+" definition changed since it was pinned; call refused (THREAT_MODE=block)", attrs...)
			return refusal.RugPull(server, sub.name, pv.pinned, v.PinHash)
		}
		k.o.Logger.WarnContext(ctx, kind+" definition changed since it was pinned; call let through (THREAT_MODE=monitor)", attrs...)
	case pinHeld:
		c.Found(audit.Finding{At: audit.AtTool, Kind: KindRugPull, Rule: RuleHeld, Action: act})
		attrs := heldAttrs(c.Tenant.ID, server, sub.name, v, pv)
		if a.Threat == block {
			k.o.Logger.WarnContext(ctx, "tool held for review; call refused (THREAT_MODE=block)", attrs...)
			if pv.atLimit {
				return refusal.HeldAtPinLimit(server, sub.name, v.PinHash, registry.MaxPinsPerTenant, registry.MaxPinBytesPerTenant)
			}
			return refusal.Held(server, sub.name, v.PinHash, pv.renamedFrom)
		}
		k.o.Logger.WarnContext(ctx, "tool held for review; call let through (THREAT_MODE=monitor)", attrs...)
	}
	if !v.Poisoned() {
		return nil
	}
	for _, f := range v.Findings {
		c.Found(audit.Finding{At: audit.AtTool, Kind: f.Kind.String(), Rule: f.Rule, Action: act})
	}
	if a.Threat == block {
		k.o.Logger.WarnContext(ctx, "poisoned "+kind+" definition; call refused (THREAT_MODE=block)", k.o.poisonAttrs(c.Tenant.ID, server, sub.name, v)...)
		return refusal.Poisoned(server, sub.name, v.Rules)
	}
	k.o.Logger.WarnContext(ctx, "poisoned "+kind+" definition; call let through (THREAT_MODE=monitor)", k.o.poisonAttrs(c.Tenant.ID, server, sub.name, v)...)
	return nil
}

// Visible implements pipeline.Filter: under THREAT_MODE=block an entry of
// a listing (a tool, c.ToolDef; a prompt, resource or resource template,
// c.Listed; as its server lists it) whose definition is poisoned, changed
// since it was pinned or held for review is left out of its list; under
// monitor it is listed. Either way it is logged the first time this
// process meets that definition.
func (k *Check) Visible(ctx context.Context, c *pipeline.Call, server *registry.Server, tool string) bool {
	sub, ok := subjectOf(c, tool)
	if !ok {
		return true
	}
	v := k.o.Inspector.InspectKind(sub.key.kind, sub.def)
	mode := actions(k.o.Defaults, c.Tenant).Threat
	name := ""
	if server != nil {
		name = server.Name
	}
	kind := registry.PinKindName(sub.key.kind)
	pv, err := k.pins.check(ctx, c.Tenant.ID, name, sub.key, v, c.Tenant.HoldsNewTools())
	switch {
	case err != nil:
		k.o.Logger.WarnContext(ctx, "pin store failed; definition not compared with its pin", "tenant", c.Tenant.ID, "server", name, "tool", sub.name, "err", err)
	case pv.state == pinChanged:
		if k.pins.firstReport(c.Tenant.ID, name, sub.key, v.PinHash) {
			msg := kind + " definition changed since it was pinned; listed (THREAT_MODE=monitor)"
			if mode == block {
				msg = kind + " definition changed since it was pinned; left out of " + sub.list() + " until it is pinned again (THREAT_MODE=block)"
			}
			k.o.Logger.WarnContext(ctx, msg, "tenant", c.Tenant.ID, "server", name, "tool", sub.name, "pinned", pv.pinned, "new", v.PinHash)
		}
		if mode == block {
			return false
		}
	case pv.state == pinHeld:
		if k.pins.firstReport(c.Tenant.ID, name, sub.key, v.PinHash) {
			msg := "tool held for review; listed (THREAT_MODE=monitor)"
			if mode == block {
				msg = "tool held for review; left out of tools/list until an operator pins it (THREAT_MODE=block)"
			}
			k.o.Logger.WarnContext(ctx, msg, heldAttrs(c.Tenant.ID, name, sub.name, v, pv)...)
		}
		if mode == block {
			return false
		}
	}
	if !v.Poisoned() {
		return true
	}
	if v.FirstReport() {
		msg := "poisoned " + kind + " definition; listed (THREAT_MODE=monitor)"
		if mode == block {
			msg = "poisoned " + kind + " definition; left out of " + sub.list() + " (THREAT_MODE=block)"
		}
		k.o.Logger.WarnContext(ctx, msg, k.o.poisonAttrs(c.Tenant.ID, name, sub.name, v)...)
	}
	return mode != block
}

// Results is the response side's THREAT_MODE and PII_ACTION check. It is
// safe for concurrent use.
type Results struct {
	o Options
}

// CheckResult implements pipeline.ResultCheck: it may rewrite resp (the
// masked answer) or refuse it.
func (k *Results) CheckResult(ctx context.Context, c *pipeline.Call, resp *jsonrpc.Response) error {
	a := actions(k.o.Defaults, c.Tenant)
	doc := &resp.Result
	if resp.Error != nil {
		doc = &resp.Error
	}
	if len(*doc) == 0 {
		return nil
	}
	// One pass for both checks; the answer is read again only to mask.
	found, err := k.o.Scanner.Scan(*doc, nil) // nil: see Check
	if err != nil {
		return fmt.Errorf("content: answer unreadable: %w", err)
	}
	if len(found) == 0 {
		return nil
	}
	s := side{
		at: audit.AtResult, noun: "answer", gone: "answer withheld",
		attrs:     func(key string, val []string) []any { return k.o.callAttrs(c, key, val) },
		found:     c.Found,
		injection: func(rules []string) *refusal.Refusal { return refusal.Injection(audit.AtResult, rules) },
		sensitive: refusal.Sensitive,
	}
	out, ref, err := k.inspect(ctx, a, *doc, found, &s)
	switch {
	case err != nil:
		return fmt.Errorf("content: answer unreadable: %w", err)
	case ref != nil:
		return ref
	}
	*doc = out
	return nil
}

// personal selects the kinds PII_ACTION masks: all but the threats.
func personal(k scan.Kind) bool { return !k.Threat() }

// addKind appends kind to kinds once.
func addKind(kinds []string, kind string) []string {
	for _, k := range kinds {
		if k == kind {
			return kinds
		}
	}
	return append(kinds, kind)
}

// sensitiveKinds lists the blocking kinds among found, or nil.
func sensitiveKinds(found []scan.Finding) []string {
	var kinds []string
	for _, f := range found {
		if f.Kind.Sensitive() {
			kinds = addKind(kinds, f.Kind.String())
		}
	}
	return kinds
}

// catalogListed reports, from cat, which tools a tenant's server lists now.
func catalogListed(cat *route.Catalog) func(ctx context.Context, tenant, server string) (func(string) bool, error) {
	return func(ctx context.Context, tenant, server string) (func(string) bool, error) {
		entries, errs, err := cat.View(ctx, tenant, server)
		if err == nil && len(errs) > 0 {
			err = errs[0]
		}
		if err != nil {
			return nil, err
		}
		names := make(map[string]bool, len(entries))
		for _, e := range entries {
			if e.Server.Name == server {
				names[e.Tool.Name] = true
			}
		}
		return func(tool string) bool { return names[tool] }, nil
	}
}

// heldAttrs names a held tool in a log line.
func heldAttrs(tenant, server, tool string, v *route.Verdict, pv pinVerdict) []any {
	a := []any{"tenant", tenant, "server", server, "tool", tool, "new", v.PinHash}
	if pv.renamedFrom != "" {
		a = append(a, "renamed_from", pv.renamedFrom)
	}
	if pv.atLimit {
		a = append(a, "reason", "the tenant's pins are at their limit")
	}
	return a
}

// PinsDue reports whether tenant's pins were never filled (FillPins) or
// were filled longer than Options.PinRefresh before now: the next check
// of one of its definitions would read them. False without Options.Pins.
func (k *Check) PinsDue(tenant string, now time.Time) bool { return k.pins.due(tenant, now) }

// FillPins hands the check tenant's pins as read from the store at at by
// someone else (shared/tenantview, with the tenant's other state): with
// read, pins are all of them and servers the tenant's servers, and they
// replace those held; without, the pins held (with the ones this check
// wrote since) are current as of at. Options.PinRefresh counts from at.
func (k *Check) FillPins(tenant string, servers []string, pins []registry.Pin, read bool, at time.Time) {
	k.pins.fill(tenant, servers, pins, read, at)
}

// poisonAttrs names a poisoned definition in a log line: where its
// findings are in it (pointers into the definition), never the text.
func (o *Options) poisonAttrs(tenant, server, tool string, v *route.Verdict) []any {
	at := make([]string, 0, len(v.Findings))
	for _, f := range v.Findings {
		at = append(at, f.Path)
	}
	return []any{"tenant", tenant, "server", server, "tool", tool, "rules", v.Rules, "at", at, "definition_sha256", v.Hash}
}

// callAttrs names c in a log line, with key (the kinds or the rules
// found) set to val.
func (o *Options) callAttrs(c *pipeline.Call, key string, val []string) []any {
	a := []any{"tenant", c.Tenant.ID, "correlation_id", c.CorrelationID, key, val}
	if c.Server != nil {
		a = append(a, "server", c.Server.Name, "tool", c.UpstreamTool)
	}
	return a
}

var (
	_ pipeline.Check       = (*Check)(nil)
	_ pipeline.Filter      = (*Check)(nil)
	_ pipeline.ResultCheck = (*Results)(nil)
)
