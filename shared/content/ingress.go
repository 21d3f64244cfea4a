package content

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/scan"
)

// Ingress: THREAT_MODE and PII_ACTION over every message a server sends
// toward the client, whatever its kind (docs/design/ingress.md). The
// results slot (Results.CheckResult) is the same check over the answer of
// a decided request; Ingress is its entry point for one whole JSON-RPC
// message of any kind, for the paths that carry messages outside the
// pipeline (the relay, the event streams, the lists).

// MessageKind is what a server-to-client message is.
type MessageKind uint8

// The kinds of server-to-client messages.
const (
	// ResultMessage is a response with a result: Message.Method is the
	// method it answers.
	ResultMessage MessageKind = iota + 1
	// ErrorMessage is a response with the server's own JSON-RPC error.
	ErrorMessage
	// NotificationMessage is a notification (notifications/message,
	// notifications/progress, notifications/resources/updated, ...).
	NotificationMessage
	// RequestMessage is a request of the server to the client
	// (sampling/createMessage, elicitation/create, roots/list, ...).
	RequestMessage
)

var kindNames = [...]string{ResultMessage: "result", ErrorMessage: "error", NotificationMessage: "notification", RequestMessage: "request"}

// String is the kind's name: "result", "error", "notification" or
// "request" ("unknown" for any other value).
func (k MessageKind) String() string {
	if k >= ResultMessage && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// payload is the member of a message of kind k that carries what the
// server says: what may be masked in place. Every other member (jsonrpc,
// id, method) is the frame, which the gateway routes by and never edits.
func (k MessageKind) payload() string {
	switch k {
	case ResultMessage:
		return "result"
	case ErrorMessage:
		return "error"
	}
	return "params"
}

// at is where the kind's findings are, in the audit record.
func (k MessageKind) at() string {
	switch k {
	case ResultMessage, ErrorMessage:
		return audit.AtResult
	case NotificationMessage:
		return audit.AtNotification
	}
	return audit.AtRequest
}

// streamed reports whether messages of kind k travel on their own toward
// the client (SSE events its SDK reads as protocol messages), rather than
// as the answer to the client's request.
func (k MessageKind) streamed() bool { return k == NotificationMessage || k == RequestMessage }

// Message is one message a server sends toward the client.
type Message struct {
	Kind MessageKind
	// Method is the method a result or an error answers, or the
	// notification's or request's own method; it names the message in
	// logs.
	Method string
	// Server and CorrelationID name the message in logs ("" for none).
	Server, CorrelationID string
	// Raw is the whole JSON-RPC message, as the client is to receive it
	// but for the check: a response frame ({"jsonrpc","id","result"}),
	// a notification or a request. It is only read.
	Raw []byte
}

// Verdict is what Ingress decided for a message.
type Verdict struct {
	// Out is the message to forward: Raw itself, or a copy with the
	// findings masked in place (PII_ACTION=redact, and block for the
	// kinds that do not block). nil when the message is refused.
	Out []byte
	// Findings are every finding, with where (At: "result",
	// "notification" or "request"), kind, rule and what was done; never
	// the value. They belong in the audit record.
	Findings []audit.Finding
	// Refusal, when not nil, is why the message must not reach the
	// client: -32050 PROMPT_INJECTION (THREAT_MODE=block) or -32052
	// SENSITIVE_DATA (PII_ACTION=block, or a finding that cannot be
	// masked in place). What the caller does with it depends on the kind
	// (docs/design/ingress.md): a result or an error becomes this
	// JSON-RPC error to the client; a request is not relayed and its
	// server gets this error as the client's answer; a notification is
	// dropped.
	Refusal *refusal.Refusal
}

// Ingress checks m, one message a server sends toward a client of tenant
// t, with the tenant's THREAT_MODE and PII_ACTION, in one pass of the
// scanner over the whole message (and a second, to mask, only when
// something is to be masked):
//
//   - THREAT_MODE=block: a threat refuses the message (-32050);
//   - PII_ACTION=block (under THREAT_MODE=block): a credential, a card
//     number or an SSN refuses it (-32052); the other kinds are masked;
//   - PII_ACTION=redact: every finding is masked in place
//     ("[masked:card]"), the message stays valid JSON-RPC;
//   - monitor: findings are recorded and logged, the message is
//     forwarded as it came.
//
// A finding that cannot be masked in place refuses the message with
// -32052 under redact and block (not under monitor, nor under
// THREAT_MODE=monitor, which refuses nothing): one in the frame (the id,
// the method: outside Kind's payload member), and, in a notification or a
// request, one in a JSON number, which masking would turn into a string
// (progress, total and maxTokens are numbers the client's SDK checks). In
// a result or an error a number becomes the string marker, as the results
// slot does.
//
// The error is for a message that is not one JSON value, or of no known
// kind: it cannot be checked, and the caller refuses it as an internal
// error (fail closed).
// Ingress is safe for concurrent use.
func (k *Results) Ingress(ctx context.Context, t registry.Tenant, m Message) (Verdict, error) {
	if m.Kind.String() == "unknown" {
		return Verdict{}, fmt.Errorf("content: message kind %d unknown", m.Kind)
	}
	// The one pass; what follows runs only when it found something.
	found, err := k.o.Scanner.Scan(m.Raw, nil) // nil: see Check
	if err != nil {
		return Verdict{}, fmt.Errorf("content: %s %s unreadable: %w", m.Kind, m.Method, err)
	}
	if len(found) == 0 {
		return Verdict{Out: m.Raw}, nil
	}
	return k.ingressFound(ctx, t, m, found)
}

// ingressFound is Ingress for a message with findings (kept apart so that
// a clean message allocates nothing).
func (k *Results) ingressFound(ctx context.Context, t registry.Tenant, m Message, found []scan.Finding) (Verdict, error) {
	var v Verdict
	s := side{at: m.Kind.at(), noun: m.Kind.String() + " " + m.Method, gone: gone(m.Kind)}
	payload := m.Kind.payload()
	member := "/" + payload
	s.frame = func(f scan.Finding) bool { return f.Path != member && !strings.HasPrefix(f.Path, member+"/") }
	s.numbers = m.Kind.streamed()
	s.mask = func(doc []byte) ([]byte, []scan.Finding, error) {
		p := jsonrpc.Member(doc, payload)
		if p == nil {
			return doc, nil, nil
		}
		out, masked, err := k.o.Scanner.Redact(p, personal)
		if err != nil || len(masked) == 0 || &out[0] == &p[0] {
			return doc, masked, err
		}
		return jsonrpc.Edit(doc, payload, out), masked, nil
	}
	s.attrs = func(key string, val []string) []any {
		return []any{"tenant", t.ID, "correlation_id", m.CorrelationID, "server", m.Server, "kind", m.Kind.String(), "method", m.Method, key, val}
	}
	s.found = func(f audit.Finding) { v.Findings = append(v.Findings, f) }
	switch m.Kind {
	case ResultMessage, ErrorMessage:
		s.injection = func(rules []string) *refusal.Refusal { return refusal.Injection(audit.AtResult, rules) }
		s.sensitive = refusal.Sensitive
	default:
		at := s.at
		s.injection = func(rules []string) *refusal.Refusal { return refusal.Injection(at, rules) }
		s.sensitive = func(kinds []string) *refusal.Refusal {
			return refusal.New(refusal.SensitiveData, "Sensitive data in "+at+": "+strings.Join(kinds, ", ")+"; not relayed to the client").
				With("kinds", kinds).With("at", at)
		}
	}
	out, ref, err := k.inspect(ctx, actions(k.o.Defaults, t), m.Raw, found, &s)
	if err != nil {
		return Verdict{}, fmt.Errorf("content: %s %s unreadable: %w", m.Kind, m.Method, err)
	}
	if ref == nil {
		v.Out = out
	}
	v.Refusal = ref
	return v, nil
}

// gone says in a log line what became of a refused message of kind k.
func gone(k MessageKind) string {
	switch k {
	case NotificationMessage:
		return "notification dropped"
	case RequestMessage:
		return "request not relayed; its server was answered with the refusal"
	}
	return "answer withheld"
}

// side is what differs between the callers of inspect: where the
// findings are, what the logs call the message, how it is refused.
type side struct {
	at   string // audit.Finding.At
	noun string // "answer", "notification notifications/message", ...
	gone string // what a refusal did to it, for the log
	// frame reports a finding outside what may be masked (nil: none
	// is); numbers, that a finding in a JSON number cannot be masked in
	// place either. mask masks the findings it can (nil: Redact).
	frame     func(scan.Finding) bool
	numbers   bool
	mask      func(doc []byte) ([]byte, []scan.Finding, error)
	attrs     func(key string, val []string) []any
	found     func(audit.Finding)
	injection func(rules []string) *refusal.Refusal
	sensitive func(kinds []string) *refusal.Refusal
}

// inspect is the one check of what a server sends (Results.CheckResult
// and Ingress): THREAT_MODE first, then PII_ACTION, over doc and found,
// its findings (one Scan; not empty). It returns what to forward (doc,
// or a masked copy), or the refusal; the error is for a doc that cannot
// be masked because it is not one JSON value.
func (k *Results) inspect(ctx context.Context, a registry.ContentActions, doc []byte, found []scan.Finding, s *side) ([]byte, *refusal.Refusal, error) {
	var rules []string
	pii := 0
	for _, f := range found {
		if f.Kind.Threat() {
			rules = addKind(rules, f.Rule)
		} else {
			pii++
		}
	}
	if rules != nil {
		act := audit.ActionLogged
		if a.Threat == block {
			act = audit.ActionBlocked
		}
		for _, f := range found {
			if f.Kind.Threat() {
				s.found(audit.Finding{At: s.at, Kind: f.Kind.String(), Rule: f.Rule, Action: act})
			}
		}
		if a.Threat == block {
			k.o.Logger.WarnContext(ctx, "prompt injection in "+s.noun+"; "+s.gone+" (THREAT_MODE=block)", s.attrs("rules", rules)...)
			return nil, s.injection(rules), nil
		}
		k.o.Logger.WarnContext(ctx, "prompt injection in "+s.noun+"; forwarded (THREAT_MODE=monitor)", s.attrs("rules", rules)...)
	}
	if pii == 0 {
		return doc, nil, nil
	}
	if a.PII == monitor {
		for _, f := range found {
			if !f.Kind.Threat() {
				s.found(audit.Finding{At: s.at, Kind: f.Kind.String(), Rule: f.Rule, Action: audit.ActionLogged})
			}
		}
		if sensitive := sensitiveKinds(found); sensitive != nil {
			k.o.Logger.WarnContext(ctx, "sensitive data in "+s.noun+"; forwarded (PII_ACTION=monitor)", s.attrs("kinds", sensitive)...)
		}
		return doc, nil, nil
	}
	if a.Threat == block {
		// What refuses the message: under block the blocking kinds, and
		// under either action what cannot be masked in place.
		var kinds []string
		for _, f := range found {
			if f.Kind.Sensitive() && (a.PII == block || s.fixed(f)) {
				kinds = addKind(kinds, f.Kind.String())
			}
		}
		if kinds != nil {
			for _, f := range found {
				if f.Kind.Threat() {
					continue
				}
				act := audit.ActionLogged
				if f.Kind.Sensitive() && (a.PII == block || s.fixed(f)) {
					act = audit.ActionBlocked
				}
				s.found(audit.Finding{At: s.at, Kind: f.Kind.String(), Rule: f.Rule, Action: act})
			}
			why := "PII_ACTION=block"
			if a.PII != block {
				why = "cannot be masked in place"
			}
			k.o.Logger.WarnContext(ctx, "sensitive data in "+s.noun+"; "+s.gone+" ("+why+")", s.attrs("kinds", kinds)...)
			return nil, s.sensitive(kinds), nil
		}
	}
	// redact; and block for what does not block.
	mask := s.mask
	if mask == nil {
		mask = func(doc []byte) ([]byte, []scan.Finding, error) { return k.o.Scanner.Redact(doc, personal) }
	}
	out, masked, err := mask(doc)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range masked {
		if !f.Kind.Threat() {
			s.found(audit.Finding{At: s.at, Kind: f.Kind.String(), Rule: f.Rule, Action: audit.ActionRedacted})
		}
	}
	// What is in the frame stays as it came: the blocking kinds refused
	// the message above (but under THREAT_MODE=monitor); the others
	// never refuse (seed 004), so they are forwarded and recorded.
	for _, f := range found {
		if !f.Kind.Threat() && s.frame != nil && s.frame(f) {
			s.found(audit.Finding{At: s.at, Kind: f.Kind.String(), Rule: f.Rule, Action: audit.ActionLogged})
		}
	}
	return out, nil, nil
}

// fixed reports whether finding f cannot be masked in place: it is in
// the frame, or in a number where numbers must stay numbers.
func (s *side) fixed(f scan.Finding) bool {
	return s.frame != nil && s.frame(f) || s.numbers && f.Number
}

// CheckMessage implements pipeline.MessageCheck: the ingress slot of the
// message table's server-to-client rows, Ingress over *msg, a request or
// a notification c.Server sends c's client (a request has an id). Its
// findings go on c; *msg becomes what the client is to get (masked in
// place), or the refusal is returned: the caller drops a notification and
// answers a request's server with it. A message Ingress cannot read is an
// error (the stage fails closed).
func (k *Results) CheckMessage(ctx context.Context, c *pipeline.Call, msg *json.RawMessage) error {
	m := Message{Kind: NotificationMessage, Method: c.Method, CorrelationID: c.CorrelationID, Raw: *msg}
	if id := jsonrpc.Member(*msg, "id"); id != nil && string(id) != "null" {
		m.Kind = RequestMessage
	}
	if c.Server != nil {
		m.Server = c.Server.Name
	}
	v, err := k.Ingress(ctx, c.Tenant, m)
	if err != nil {
		return err
	}
	for _, f := range v.Findings {
		c.Found(f)
	}
	if v.Refusal != nil {
		return v.Refusal
	}
	*msg = v.Out
	return nil
}

var _ pipeline.MessageCheck = (*Results)(nil)
