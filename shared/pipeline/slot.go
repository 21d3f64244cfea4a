package pipeline

import "fmt"

// Slot names one stage of the order of checks. Slots are constants of
// their own type: a misspelt slot does not compile, and a Slot that is not
// one of the constants below (a conversion from a number) is refused by New
// and by RunUntil, never taken as "nothing to run".
type Slot uint8

// The slots, request side then response side. docs/pipeline.md describes
// each; TestDocsMatchTable (shared/gateway) keeps that page, Order and the
// gateway's stage table in step.
const (
	Session    Slot = iota + 1 // -32603 session error; mint a session when none was sent
	Params                     // -32602 tools/call params unreadable, ambiguous or misspelt
	RateLimit                  // -32004 per session and per tool
	Quota                      // -32060 monthly tier quota
	Route                      // -32601 a server or tool this tenant does not have
	KillSwitch                 // -32062 whatever the policy says
	Policy                     // -32003 RBAC/policy, -32005 session grant and budgets
	Content                    // -32602 input validation, -32050/-32051 threats, -32053 egress
	Approval                   // -32061 held for a human
	Breaker                    // -32063 circuit open or too many in flight

	Results // response side: -32052 sensitive data, -32050 injection in results

	numSlots
)

var slotNames = [numSlots]string{
	Session:    "session",
	Params:     "params",
	RateLimit:  "ratelimit",
	Quota:      "quota",
	Route:      "route",
	KillSwitch: "killswitch",
	Policy:     "policy",
	Content:    "content",
	Approval:   "approval",
	Breaker:    "breaker",
	Results:    "results",
}

// Order is the request side's fixed order (seed 004, "Checks run in a
// fixed order"; design §2.2). Authentication and body reading come before
// it (HTTP layer); the upstream call, then ResultOrder, then the audit
// record after it.
var Order = [...]Slot{Session, Params, RateLimit, Quota, Route, KillSwitch, Policy, Content, Approval, Breaker}

// ResultOrder is the response side's order: the checks over what the
// upstream answered, run after the brokered credential was removed (the
// upstream client does that inside every exchange, since only it holds the
// credential) and before the answer and its audit record are written.
var ResultOrder = [...]Slot{Results}

// String returns the slot's name as docs/pipeline.md, spans and logs write
// it.
func (s Slot) String() string {
	if s.Valid() {
		return slotNames[s]
	}
	return fmt.Sprintf("Slot(%d)", uint8(s))
}

// Valid reports whether s is one of the slot constants.
func (s Slot) Valid() bool { return s > 0 && s < numSlots }

// Response reports whether s is on the response side.
func (s Slot) Response() bool { return s >= Results && s < numSlots }

// Mode is what a stage does when its check cannot decide (its store is
// unreachable): the design's fail-open or fail-closed, declared once per
// stage. The zero value is FailClosed.
type Mode uint8

const (
	// FailClosed refuses the call (with the stage's Unavailable answer, or
	// -32603 with the correlation id).
	FailClosed Mode = iota
	// FailOpen lets the call through; the audit record lists the stage
	// under degraded.
	FailOpen
)

func (m Mode) String() string {
	if m == FailOpen {
		return "open"
	}
	return "closed"
}

// Scope says which requests a stage applies to, as a set.
type Scope uint8

const (
	// Opening: initialize, which opens a session and so has none to check.
	Opening Scope = 1 << iota
	// InSession: every other request that is not decided per call (ping,
	// the lists, logging/setLevel, resources/subscribe and unsubscribe,
	// unknown methods).
	InSession
	// ToolCall: tools/call.
	ToolCall
	// Read: the other decided requests, which name one prompt or resource
	// of one server and get its content (resources/read, prompts/get,
	// completion/complete).
	Read
	// Relayed: the messages the gateway carries between a server and the
	// client the other way round: a request of the server to the client
	// (sampling/createMessage, elicitation/create, roots/list), relayed
	// during a call or on a stream, and the client's answer to one (the
	// gateway's method "response").
	Relayed

	// Decided: the requests whose target is checked one by one
	// (tools/call and the reads).
	Decided = ToolCall | Read
	// Every request.
	Every = Opening | InSession | Decided | Relayed
)

// ScopeOf is the scope a method's request runs under: exactly one of
// Opening, InSession, ToolCall and Read. A relayed message (Call.Relayed)
// runs under Relayed whatever its method.
func ScopeOf(method string) Scope {
	switch method {
	case "initialize":
		return Opening
	case "tools/call":
		return ToolCall
	case "resources/read", "prompts/get", "completion/complete":
		return Read
	}
	return InSession
}

// scope is the scope c runs under.
func (c *Call) scope() Scope {
	if c.Relayed {
		return Relayed
	}
	return ScopeOf(c.Method)
}
