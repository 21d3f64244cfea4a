// Package refusal is aegis's one refusal vocabulary: every code a client can
// receive from aegis, the word that names its cause, the default message, and
// the HTTP status it travels with. Both enforcement boundaries (the gateway
// and `aegis wrap`) build their refusals from this table, so a cause has one
// word wherever it is refused (ADR 0012: a code is what, a layer is who).
//
// docs/error-codes.md is checked against Table by a test.
package refusal

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
)

// Code is a JSON-RPC error code.
type Code int

// Standard JSON-RPC 2.0 codes and aegis's own codes.
const (
	CodeParseError     Code = -32700 // body could not be read as JSON (HTTP 400, id null)
	CodeInvalidRequest Code = -32600 // not a JSON-RPC 2.0 request
	CodeMethodNotFound Code = -32601 // unknown method, or a tool this tenant does not have
	CodeInvalidParams  Code = -32602 // params missing, wrong type, or failing the tool's schema
	CodeInternal       Code = -32603 // internal error or session error
	CodeUpstream       Code = -32000 // upstream unreachable, non-2xx, or unreadable

	CodePolicyDenied        Code = -32003
	CodeRateLimited         Code = -32004
	CodeCapabilityDenied    Code = -32005
	CodePromptInjection     Code = -32050
	CodeToolPoisoning       Code = -32051
	CodeSensitiveData       Code = -32052
	CodeEgressBlocked       Code = -32053
	CodeQuotaExceeded       Code = -32060
	CodeApprovalRequired    Code = -32061
	CodeToolStopped         Code = -32062
	CodeUpstreamUnavailable Code = -32063
	CodeUpstreamTimeout     Code = -32064
	CodeWrapRefused         Code = -32042 // the one frame `aegis wrap` may author
	CodeConnectionRequired  Code = -32065 // a server with auth: oauth, and no working connection of the caller's

	// CodeURLElicitation is MCP 2025-11-25's URLElicitationRequiredError
	// (the number of wrap's frame; data.aegis.layer tells them apart): the
	// gateway's answer of CONNECTION_REQUIRED to a 2025-11-25 client that
	// declared elicitation.url (ConnectionElicitation).
	CodeURLElicitation Code = -32042

	// MCP 2026-07-28 (SEP-2575) transport codes, toward clients of that
	// version.
	CodeHeaderMismatch      Code = -32020 // Mcp-Method, Mcp-Name or MCP-Protocol-Version missing or not the body's
	CodeMissingCapability   Code = -32021 // defined by the specification; aegis does not send it
	CodeUnsupportedProtocol Code = -32022 // MCP-Protocol-Version the gateway does not speak
)

// Word names the cause of a refusal, the same at every layer.
type Word string

// The words of the vocabulary.
const (
	ParseError          Word = "PARSE_ERROR"
	InvalidRequest      Word = "INVALID_REQUEST"
	MethodNotFound      Word = "METHOD_NOT_FOUND"
	InvalidParams       Word = "INVALID_PARAMS"
	InternalError       Word = "INTERNAL_ERROR"
	SessionError        Word = "SESSION_ERROR"
	UpstreamError       Word = "UPSTREAM_ERROR"
	PolicyDenied        Word = "POLICY_DENIED"
	RateLimited         Word = "RATE_LIMITED"
	CapabilityDenied    Word = "CAPABILITY_DENIED"
	PromptInjection     Word = "PROMPT_INJECTION"
	ToolPoisoning       Word = "TOOL_POISONING"
	SensitiveData       Word = "SENSITIVE_DATA"
	EgressBlocked       Word = "EGRESS_BLOCKED"
	QuotaExceeded       Word = "QUOTA_EXCEEDED"
	ApprovalRequired    Word = "APPROVAL_REQUIRED"
	PendingApproval     Word = "PENDING_APPROVAL"
	ToolStopped         Word = "TOOL_STOPPED"
	UpstreamUnavailable Word = "UPSTREAM_UNAVAILABLE"
	UpstreamTimeout     Word = "UPSTREAM_TIMEOUT"
	HeaderMismatch      Word = "HEADER_MISMATCH"
	UnsupportedProtocol Word = "UNSUPPORTED_PROTOCOL_VERSION"
	ConnectionRequired  Word = "CONNECTION_REQUIRED"
)

// Entry is one row of the vocabulary.
type Entry struct {
	Code    Code
	Word    Word
	Message string // default message; builders may make it more specific
	Status  int    // HTTP status the response travels with
	When    string // one line for docs/error-codes.md
	// Next is what the person behind the client can do, appended to the
	// message ("MESSAGE; NEXT (WORD)"); "" where every message of the
	// word says it itself (the builders of -32061, -32004, -32064 and
	// wrap's frame, the session error, the specific -32600 and -32602).
	Next string
}

// Table is the whole vocabulary, in the order docs/error-codes.md lists it.
// -32042 is not a row: it is wrap's single frame (see Wrap), whose
// data.aegis.code is one of these words.
var Table = []Entry{
	{CodeParseError, ParseError, "Parse error", http.StatusBadRequest, "the body could not be read as JSON; id is null", "send one JSON-RPC request as valid JSON"},
	{CodeInvalidRequest, InvalidRequest, "Invalid request", http.StatusOK, "not a JSON-RPC 2.0 request object (missing or wrong jsonrpc, bad id type, missing method, batch array)", ""},
	{CodeMethodNotFound, MethodNotFound, "Method not found", http.StatusOK, "unknown method, or a tool this tenant does not have (another tenant's tool is unknown, never forbidden)", "check the name against what this caller's tools/list offers"},
	{CodeInvalidParams, InvalidParams, "Invalid params", http.StatusOK, "params missing or of the wrong type; arguments failing the tool's inputSchema (INPUT_VALIDATION=block; data: pointer, keyword); an Idempotency-Key over 255 characters or reused with different params; a retry whose first answer was too large to keep (data: answer_cap_bytes)", ""},
	{CodeInternal, SessionError, "Session error: unknown or expired session; drop X-Session-ID to start a new one", http.StatusOK, "unknown or expired X-Session-ID / Mcp-Session-Id", ""},
	{CodeInternal, InternalError, "Internal error", http.StatusOK, "an internal failure; the message carries only the correlation id", "give the correlation id to the gateway's operator"},
	{CodeUpstream, UpstreamError, "Upstream error", http.StatusOK, "upstream unreachable, non-2xx, or unreadable; detail capped at 300 characters, brokered credentials removed", "the server may have run the call, so confirm its outcome before retrying a tool that is not idempotent"},
	{CodePolicyDenied, PolicyDenied, "Denied by policy", http.StatusOK, "an RBAC role or a policy rule refuses the call; while the tenant's policy set cannot be read, every decidable call (data: reason \"policy not loaded\")", "ask the tenant's operator to change the policy if this call should run"},
	{CodeRateLimited, RateLimited, "Rate limit exceeded", http.StatusOK, "per-session, per-tool or per-API-key window exhausted (scope session, tool, key), or more than 600 sessions minted for one API key in a minute (scope new_session); data: scope, limit, retry_after_ms", ""},
	{CodeCapabilityDenied, CapabilityDenied, "Outside the session's grant", http.StatusOK, "outside the session's grant: grant list, session clocks, tool-call budget (data: reason lifetime, idle, grant, tool_calls or steps)", "start a new session, or ask the tenant's operator for a wider grant"},
	{CodePromptInjection, PromptInjection, "Prompt injection detected", http.StatusOK, "injection found in arguments or in a tool result (THREAT_MODE=block)", "remove the instructions from the call, or ask the tenant's operator to review the tool"},
	{CodeToolPoisoning, ToolPoisoning, "Tool definition rejected", http.StatusOK, "poisoned tool definition, one that changed since it was pinned, or one held for review", "ask the tenant's operator to review the tool's definition and pin it"},
	{CodeSensitiveData, SensitiveData, "Sensitive data in result", http.StatusOK, "credential, card number or SSN in a result (PII_ACTION=block)", "ask the tool's owner to keep credentials, card numbers and SSNs out of its answers"},
	{CodeEgressBlocked, EgressBlocked, "Sensitive data in arguments", http.StatusOK, "credential, card number or SSN leaving in arguments (EGRESS_ACTION=block)", "remove the credential, card number or SSN from the arguments and send the call again"},
	{CodeQuotaExceeded, QuotaExceeded, "Monthly quota exceeded", http.StatusOK, "monthly tier quota with BILLING_ENFORCE=1; data: tier, limit, used, period", "wait for next month's quota, or ask for a higher tier"},
	{CodeApprovalRequired, ApprovalRequired, "Approval required", http.StatusOK, "call held for a human; data: approval_id, status pending/denied/unavailable", ""},
	{CodeToolStopped, ToolStopped, "Tool stopped by operator", http.StatusOK, "kill switch on the tool or its server, whatever the policy says", "ask an operator to resume it, as sending the call again will not help until then"},
	{CodeUpstreamUnavailable, UpstreamUnavailable, "Upstream unavailable", http.StatusOK, "circuit open, or UPSTREAM_MAX_CONCURRENT calls in flight, or the same idempotency key in flight", "send the call again in a few seconds"},
	{CodeUpstreamTimeout, UpstreamTimeout, "Upstream error: upstream did not respond in time; the call may have executed", http.StatusOK, "upstream got the call and did not answer within UPSTREAM_TIMEOUT_SECS; data: executed, safe_to_retry, guidance", ""},
	{CodeConnectionRequired, ConnectionRequired, "Connection required", http.StatusOK, "a call to a server with auth: oauth from a caller without a working connection to it (none yet, or its refresh failed); message and data carry the link to connect (data: url, server, elicitation_id); a 2025-11-25 client that declared elicitation.url gets -32042 URL elicitation required instead, a 2026-07-28 client that declared it an input-required result (tools/call, prompts/get, resources/read)", ""},
	{CodeApprovalRequired, PendingApproval, "Approval required", http.StatusOK, "the word `aegis wrap` puts in its -32042 frame for a tool that needs approval (wrap refuses it rather than parking it)", ""},
	{CodeHeaderMismatch, HeaderMismatch, "Header mismatch", http.StatusBadRequest, "MCP 2026-07-28 on /mcp: the Mcp-Method, Mcp-Name or MCP-Protocol-Version header is missing or does not match the body (_meta protocolVersion)", "send Mcp-Method, Mcp-Name and MCP-Protocol-Version as the body has them"},
	{CodeUnsupportedProtocol, UnsupportedProtocol, "Unsupported protocol version", http.StatusBadRequest, "an MCP-Protocol-Version header the gateway does not speak; data: supported, requested", "speak one of the versions in data.supported"},
}

var byWord = func() map[Word]Entry {
	m := make(map[Word]Entry, len(Table))
	for _, e := range Table {
		m[e.Word] = e
	}
	return m
}()

// Layer names the boundary that authored a refusal.
type Layer string

// The two enforcement boundaries.
const (
	LayerGateway Layer = "gateway"
	LayerWrap    Layer = "wrap"
)

// Refusal is one refusal on its way to a client. Fields are the top-level
// members of error.data (as the seed shows them); the aegis marker is added
// beside them when the refusal is encoded.
type Refusal struct {
	Code    Code
	Word    Word
	Message string
	Next    string         // the next step, appended to Message on the wire; the entry's by default
	Fields  map[string]any // top-level error.data members, e.g. tier, limit
	Status  int            // HTTP status; 0 means the entry's default
}

// Error makes a Refusal usable as an error inside the gateway.
func (r *Refusal) Error() string { return fmt.Sprintf("%d %s: %s", r.Code, r.Word, r.Message) }

// HTTPStatus is the status the refusal travels with.
func (r *Refusal) HTTPStatus() int {
	if r.Status != 0 {
		return r.Status
	}
	if e, ok := byWord[r.Word]; ok {
		return e.Status
	}
	return http.StatusOK
}

// New builds a refusal for word w with the table's message, or msg when given.
func New(w Word, msg string) *Refusal {
	e, ok := byWord[w]
	if !ok {
		panic("refusal: word not in table: " + string(w))
	}
	if msg == "" {
		msg = e.Message
	}
	return &Refusal{Code: e.Code, Word: w, Message: msg, Next: e.Next}
}

// With adds a top-level data field and returns r.
func (r *Refusal) With(key string, v any) *Refusal {
	if r.Fields == nil {
		r.Fields = make(map[string]any, 4)
	}
	r.Fields[key] = v
	return r
}

// Marker is data.aegis: which layer refused and the word for the cause.
type Marker struct {
	Layer Layer `json:"layer"`
	Code  Word  `json:"code"`
}

// Object renders r as a JSON-RPC error object authored by layer, its code
// in seed 004's numbering (what /v1/invoke and MCP 2025-11-25 and earlier
// get); ObjectIn renders it in another.
func (r *Refusal) Object(layer Layer) *jsonrpc.WireError { return r.ObjectIn(layer, Seed) }

// ObjectIn renders r as a JSON-RPC error object authored by layer, for a
// client that reads codes in numbering n. The message is one sentence:
// r's message, its next step, and its word in parentheses, so that a
// client that shows only error.message still shows the cause by name and
// what to do. Standard JSON-RPC codes
// without aegis meaning (parse, invalid request) carry the marker too, so
// a client can always tell an aegis answer from an upstream one.
func (r *Refusal) ObjectIn(layer Layer, n Numbering) *jsonrpc.WireError {
	data := make(map[string]any, len(r.Fields)+1)
	for k, v := range r.Fields {
		data[k] = v
	}
	data["aegis"] = Marker{Layer: layer, Code: r.Word}
	b, err := json.Marshal(data)
	if err != nil {
		// Fields are built by this package's callers from plain values.
		panic("refusal: unencodable data: " + err.Error())
	}
	return &jsonrpc.WireError{Code: int64(n.Wire(r.Code)), Message: r.WireMessage(), Data: b}
}

// WireMessage is error.message as a client receives it: "MESSAGE; NEXT
// (WORD)", or "MESSAGE (WORD)" without a next step.
func (r *Refusal) WireMessage() string {
	msg := r.Message
	if r.Next != "" {
		msg += "; " + r.Next
	}
	return msg + " (" + string(r.Word) + ")"
}

// Frame encodes r, authored by layer, as the error response to id for a
// client that reads codes in numbering n.
func Frame(id json.RawMessage, r *Refusal, layer Layer, n Numbering) []byte {
	return jsonrpc.Error(id, r.ObjectIn(layer, n))
}

// Numbering is how a refusal's code is written for the client it goes to.
// The words (data.aegis.code) never change; the numbers follow the
// protocol the client speaks (docs/error-codes.md, "Codes per protocol
// version"). The zero value is Seed.
type Numbering int

const (
	// Seed is seed 004's numbering, the contract of the versions it was
	// written for: /v1/invoke (aegis's own API, whatever MCP version
	// exists) and MCP 2025-03-26, 2025-06-18 and 2025-11-25 on /mcp.
	// Wrap's frame is -32042.
	Seed Numbering = iota
	// MCP20260728 is MCP 2026-07-28's. That version reserves
	// -32020..-32099 for the codes it defines, forbids -32042 and -32002,
	// and retires -32000..-32019 ("SHOULD NOT use"); new application
	// codes belong outside -32768..-32000. So every aegis code in
	// -32000..-32099 that the specification does not define moves 1000
	// down, keeping its last three digits (-32061 is -33061, wrap's -32042
	// is -33042, -32000 is -33000); the five standard JSON-RPC codes and
	// the specification's own (-32020, -32022) stay.
	MCP20260728
)

// Numberings lists every numbering, for tests and docs.
var Numberings = []Numbering{Seed, MCP20260728}

// modernShift is how far MCP20260728 moves an aegis code: out of
// JSON-RPC's reserved range, last three digits kept.
const modernShift = 1000

// specDefined are the codes MCP 2026-07-28 itself defines in its reserved
// sub-range: kept, with the meaning the specification gives them.
var specDefined = map[Code]bool{CodeHeaderMismatch: true, CodeMissingCapability: true, CodeUnsupportedProtocol: true}

// Wire is c as a client reading numbering n receives it.
func (n Numbering) Wire(c Code) Code {
	if n == MCP20260728 && c >= -32099 && c <= -32000 && !specDefined[c] {
		return c - modernShift
	}
	return c
}

// String names n as docs/error-codes.md does.
func (n Numbering) String() string {
	if n == MCP20260728 {
		return "MCP 2026-07-28"
	}
	return "seed 004"
}

// Decode is the refusal for a request the JSON-RPC layer could not decode:
// its parse error (-32700) or invalid request (-32600), message kept.
func Decode(e *jsonrpc.DecodeError) *Refusal {
	w := InvalidRequest
	if e.Err.Code == jsonrpc.CodeParseError {
		w = ParseError
	}
	return New(w, e.Err.Message)
}

// --- builders for the codes that carry data (seed 004) ---

// RateLimit is -32004 with scope ("session", "tool" or "key"), limit and
// retry_after_ms; the message says when to retry, in whole seconds as
// Retry-After does.
func RateLimit(scope string, limit int, retryAfterMs int64) *Refusal {
	return New(RateLimited, fmt.Sprintf("Rate limit exceeded: %d calls per minute per %s; retry in %ds", limit, scope, retrySecs(retryAfterMs))).
		With("scope", scope).With("limit", limit).With("retry_after_ms", retryAfterMs)
}

// RateLimitTools is -32004 for a call of one more distinct tool in a
// minute in which its session has already called limit others (the tool
// windows its record keeps, session.MaxToolWindows): scope "tool".
func RateLimitTools(limit int, retryAfterMs int64) *Refusal {
	return New(RateLimited, fmt.Sprintf("Rate limit exceeded: %d distinct tools per minute per session; retry in %ds", limit, retrySecs(retryAfterMs))).
		With("scope", "tool").With("limit", limit).With("retry_after_ms", retryAfterMs)
}

// retrySecs is a wait of ms milliseconds in whole seconds, rounded up, at
// least 1.
func retrySecs(ms int64) int64 { return max(1, (ms+999)/1000) }

// RetryAfterSecs is the Retry-After header of a -32004 answer (seed 004):
// data.retry_after_ms in whole seconds, rounded up, at least 1; false for
// any other refusal.
func (r *Refusal) RetryAfterSecs() (int64, bool) {
	if r.Code != CodeRateLimited {
		return 0, false
	}
	ms, _ := r.Fields["retry_after_ms"].(int64) // RateLimit and the session ceiling store an int64
	return retrySecs(ms), true
}

// Quota is -32060 with exactly tier, limit, used and period (UTC YYYYMM).
func Quota(tier string, limit, used int64, period string) *Refusal {
	return New(QuotaExceeded, fmt.Sprintf("Monthly quota exceeded for tier %s", tier)).
		With("tier", tier).With("limit", limit).With("used", used).With("period", period)
}

// Approval statuses of -32061.
const (
	ApprovalPending     = "pending"
	ApprovalDenied      = "denied"
	ApprovalUnavailable = "unavailable"
)

// Approval is -32061 "Approval required for TOOL on SERVER" with status and,
// when there is one, approval_id; the rest of the message is the next
// step: for a pending hold, that a person must approve the approval id and
// that the identical call is then sent again.
func Approval(tool, server, approvalID, status string) *Refusal {
	next := ""
	switch status {
	case ApprovalPending:
		next = "; a person must approve approval " + approvalID + ", then send the identical call again"
	case ApprovalDenied:
		next = "; a person denied approval " + approvalID + ", so do not send this call again"
	case ApprovalUnavailable:
		next = "; the approval store could not be reached and the call did not run, so send it again later"
	}
	r := New(ApprovalRequired, fmt.Sprintf("Approval required for %s on %s%s", tool, server, next)).With("status", status)
	if approvalID != "" {
		r.With("approval_id", approvalID)
	}
	return r
}

// TimeoutGuidance is the seed's guidance text for -32064.
const TimeoutGuidance = "The upstream received this call and did not answer in time. It may have executed. Confirm the outcome before retrying; if the tool is idempotent, retry with the SAME idempotency key."

// Timeout is -32064 for a deadline of secs seconds, of the call to object
// ("echo on billing"): the seed's message, then the idempotency guidance.
func Timeout(secs int, object string) *Refusal {
	return New(UpstreamTimeout, fmt.Sprintf("Upstream error: upstream did not respond within %ds; the call may have executed, so confirm the outcome of %s before retrying, and retry only an idempotent tool, with the SAME Idempotency-Key", secs, object)).
		With("executed", "unknown").With("safe_to_retry", false).With("guidance", TimeoutGuidance)
}

// MaxUpstreamDetail caps the detail of a -32000 message.
const MaxUpstreamDetail = 300

// Upstream is -32000 "Upstream error: DETAIL", the detail capped at 300
// characters. Callers remove brokered credentials from detail first.
func Upstream(detail string) *Refusal {
	if r := []rune(detail); len(r) > MaxUpstreamDetail {
		detail = string(r[:MaxUpstreamDetail])
	}
	return New(UpstreamError, "Upstream error: "+detail)
}

// Policy is -32003 for a call a policy refuses. reason is "" for a rule's
// denial: the message says only that policy denied it, and neither it nor
// the data names the rule (the audit record does). A non-empty reason (the
// policy's "policy not loaded", while the tenant's set cannot be read) is
// put in the message and in data.reason, so that a client tells an outage
// from a denial.
func Policy(reason string) *Refusal {
	if reason == "" {
		return New(PolicyDenied, "")
	}
	r := New(PolicyDenied, "Denied by policy: "+reason).With("reason", reason)
	r.Next = "the call did not run, so send it again once the tenant's policy can be read"
	return r
}

// Capability is -32005 for a call outside the session's grant; data.reason
// is the cause, one of lifetime, idle, grant, tool_calls, steps.
func Capability(reason string) *Refusal {
	return New(CapabilityDenied, "Outside the session's grant: "+reason).With("reason", reason)
}

// Stopped is -32062 for a tool an operator stopped.
func Stopped(tool, server string) *Refusal {
	return New(ToolStopped, fmt.Sprintf("Tool %s on %s is stopped by an operator", tool, server))
}

// ServerStopped is -32062 for a call to a server an operator stopped as a
// whole (every tool on it).
func ServerStopped(server string) *Refusal {
	return New(ToolStopped, fmt.Sprintf("Server %s is stopped by an operator (every tool on it)", server))
}

// Schema is -32602 for arguments that fail the called tool's inputSchema
// (INPUT_VALIDATION=block): data carries pointer, the JSON pointer (RFC
// 6901) of the failing value within the arguments ("" is the arguments
// object itself), and keyword, the JSON Schema keyword that failed
// ("required", "type", ...). Callers build pointer from the schema's names
// and array indices only: neither the message nor the data may echo the
// caller's data.
func Schema(pointer, keyword string) *Refusal {
	at := "the arguments object"
	if pointer != "" {
		at = strconv.Quote(pointer)
	}
	return New(InvalidParams, fmt.Sprintf("Invalid params: arguments fail the tool's inputSchema: %q at %s", keyword, at)).
		With("pointer", pointer).With("keyword", keyword)
}

// Sensitive is -32052 for an answer that carries a credential, a card
// number or an SSN (PII_ACTION=block); data.kinds lists the kinds found,
// never the values.
func Sensitive(kinds []string) *Refusal {
	return New(SensitiveData, "Sensitive data in result: "+strings.Join(kinds, ", ")+"; the answer was withheld").With("kinds", kinds)
}

// Egress is -32053 for arguments that carry a credential, a card number or
// an SSN (EGRESS_ACTION=block); data.kinds lists the kinds found, never the
// values.
func Egress(kinds []string) *Refusal {
	return New(EgressBlocked, "Sensitive data in arguments: "+strings.Join(kinds, ", ")+"; the call was not sent").With("kinds", kinds)
}

// Injection is -32050 for a prompt injection found (THREAT_MODE=block) in
// the arguments (at "arguments") or in the upstream's answer (at
// "result"): data.at says where and data.rules lists the scanner's rule
// ids ("instruction-override", "unicode-tags", ...), never the text.
func Injection(at string, rules []string) *Refusal {
	return New(PromptInjection, "Prompt injection detected in the "+at+": "+strings.Join(rules, ", ")).
		With("at", at).With("rules", rules)
}

// Poisoned is -32051 for a call to a tool whose definition holds a threat
// (THREAT_MODE=block): data.server and data.tool name it, data.rule is the
// first rule id found in the definition and data.rules all of them.
func Poisoned(server, tool string, rules []string) *Refusal {
	r := New(ToolPoisoning, fmt.Sprintf("Tool definition rejected: %s on %s carries instructions (%s)", tool, server, strings.Join(rules, ", "))).
		With("server", server).With("tool", tool).With("rules", rules)
	if len(rules) > 0 {
		r.With("rule", rules[0])
	}
	return r
}

// RugPull is -32051 for a call to a tool whose definition changed since it
// was pinned: data.server and data.tool name it, data.pinned and data.new
// are the pinned and the new definition's hashes.
func RugPull(server, tool, pinned, current string) *Refusal {
	return New(ToolPoisoning, fmt.Sprintf("Tool definition rejected: %s on %s changed since it was pinned", tool, server)).
		With("server", server).With("tool", tool).With("rule", "definition-changed").With("pinned", pinned).With("new", current)
}

// Held is -32051 for a call to a tool held for an operator's review: one
// its tenant holds as new (new_tools "hold"), or one that looks like a
// pinned tool renamed (renamedFrom, "" for none). data.server and
// data.tool name it, data.rule is "held-for-review", data.reason says why,
// data.new is the held definition's hash (current: what an operator
// pins), data.renamed_from names the pinned tool it resembles.
func Held(server, tool, current, renamedFrom string) *Refusal {
	reason := "new tool awaits an operator's review before it may be called"
	if renamedFrom != "" {
		reason = "looks like " + renamedFrom + " renamed; awaits an operator's review before it may be called"
	}
	r := New(ToolPoisoning, fmt.Sprintf("Tool definition rejected: %s on %s awaits review", tool, server)).
		With("server", server).With("tool", tool).With("rule", "held-for-review").With("reason", reason).With("new", current)
	if renamedFrom != "" {
		r.With("renamed_from", renamedFrom)
	}
	return r
}

// HeldAtPinLimit is -32051 for an entry without a pin that cannot be
// pinned because its tenant's pins are at their bounds (maxPins pins or
// maxBytes bytes): held for review, as a new tool under new_tools "hold",
// until an operator makes room (deletes pins) and it is pinned.
func HeldAtPinLimit(server, tool, current string, maxPins, maxBytes int) *Refusal {
	return New(ToolPoisoning, fmt.Sprintf("Tool definition rejected: %s on %s awaits review", tool, server)).
		With("server", server).With("tool", tool).With("rule", "held-for-review").
		With("reason", fmt.Sprintf("cannot be pinned: the tenant's pins are at their limit (%d pins, %d bytes); an operator must delete unused pins", maxPins, maxBytes)).
		With("new", current)
}

// TooManyStreams is -32004 for a subscriptions/listen past the open
// streams one API key may hold on an instance (limit): scope "streams";
// retry once one of the key's streams has ended.
func TooManyStreams(limit int) *Refusal {
	return New(RateLimited, fmt.Sprintf("Too many open streams: at most %d per API key on this instance; close one first", limit)).
		With("scope", "streams").With("limit", limit).With("retry_after_ms", int64(1000))
}

// Unknown is -32601 for a method or tool this tenant does not have.
func Unknown(what string) *Refusal {
	return New(MethodNotFound, "Method not found: "+what)
}

// WrapMessage starts the message of wrap's frame (seed ADR 000).
const WrapMessage = "aegis wrap refused this tools/call"

// Wrap is the one frame `aegis wrap` may author: -32042 (in seed 004's
// numbering) with the cause w (POLICY_DENIED, PENDING_APPROVAL, ...) from
// the same table, for a call of tool ("" when the call could not be read)
// refused by rule (the policy rule or pin that decided), next being what a
// person can do about it. The message is WrapMessage, then the tool, the
// rule and next; data carries tool and rule beside the marker. Encode it
// with ObjectIn(LayerWrap, n).
func Wrap(w Word, tool, rule, next string) *Refusal {
	if _, ok := byWord[w]; !ok {
		panic("refusal: word not in table: " + string(w))
	}
	msg := WrapMessage
	if tool != "" {
		msg += " of " + strconv.Quote(tool)
	}
	r := &Refusal{Code: CodeWrapRefused, Word: w, Message: msg + " by rule " + rule + "; " + next}
	r.With("rule", rule)
	if tool != "" {
		r.With("tool", tool)
	}
	return r
}

// Connection is -32065 for a call to server that needs the caller's own
// connection, which they do not have (broken: their connection's refresh
// failed, or the upstream refused its token): the message gives url, the
// link that connects them (single use, short-lived), and says to send the
// identical call again once connected; data carries url, server and
// elicitation_id.
func Connection(server, url, elicitationID string, broken bool) *Refusal {
	why := "this caller has no connection to " + server
	if broken {
		why = "this caller's connection to " + server + " stopped working"
	}
	return New(ConnectionRequired, fmt.Sprintf("Connection required: %s; open %s to connect, then send the identical call again", why, url)).
		With("url", url).With("server", server).With("elicitation_id", elicitationID)
}

// ConnectionElicitation is what Connection becomes toward an MCP
// 2025-11-25 client that declared elicitation.url: -32042
// URLElicitationRequiredError, data.elicitations holding one URL-mode
// elicitation (mode "url", elicitationId, url, message), with the aegis
// marker beside it (layer gateway, word CONNECTION_REQUIRED). The message
// is the same sentence. Toward an MCP 2026-07-28 client that declared
// elicitation.url it is written as its InputRequired result instead.
func ConnectionElicitation(server, url, elicitationID string, broken bool) *Refusal {
	r := Connection(server, url, elicitationID, broken)
	r.Code = CodeURLElicitation
	r.Fields = map[string]any{"elicitations": []map[string]string{{
		"mode": "url", "elicitationId": elicitationID, "url": url,
		"message": "Connect your account on " + server + " to let this call through",
	}}}
	return r
}

// ConnectionInputKey is the key of a connection's URL-mode elicitation
// in an MCP 2026-07-28 input-required result's inputRequests, and so of
// the client's answer in its retry's inputResponses.
const ConnectionInputKey = "aegis.connection"

// InputRequired is r, a ConnectionElicitation, as MCP 2026-07-28 asks a
// client for input (SEP-2322): a result of resultType "input_required"
// whose inputRequests holds, under ConnectionInputKey, the one URL-mode
// elicitation/create request of r's data. It carries no requestState: the
// client's retry is a new request checked in full, and whether the caller
// has connected since is in the store, not in anything the client echoes.
// ok is false for every other refusal.
func (r *Refusal) InputRequired() (res json.RawMessage, ok bool) {
	es, _ := r.Fields["elicitations"].([]map[string]string)
	if r.Code != CodeURLElicitation || r.Word != ConnectionRequired || len(es) != 1 {
		return nil, false
	}
	b, err := json.Marshal(map[string]any{
		"resultType":    "input_required",
		"inputRequests": map[string]any{ConnectionInputKey: map[string]any{"method": "elicitation/create", "params": es[0]}},
	})
	if err != nil {
		panic("refusal: unencodable elicitation: " + err.Error())
	}
	return b, true
}

// Session is the -32603 session error.
func Session() *Refusal { return New(SessionError, "") }

// Internal is -32603 carrying only the correlation id, never err.Error().
func Internal(correlationID string) *Refusal {
	return New(InternalError, "Internal error; correlation id "+correlationID)
}
