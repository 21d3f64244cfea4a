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
	Ingress // server-to-client: what a server sends besides its answers (notifications, requests)

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
	Ingress:    "ingress",
}

// Order is the request side's fixed order (seed 004, "Checks run in a
// fixed order"; design §2.2). Authentication and body reading come before
// it (HTTP layer); the upstream call, then ResultOrder, then the audit
// record after it.
var Order = [...]Slot{Session, Params, RateLimit, Quota, Route, KillSwitch, Policy, Content, Approval, Breaker}

// ResultOrder is the response side's order: the checks over what the
// upstream answered (Results, a ResultCheck) and over the other messages a
// server sends the client (Ingress, a MessageCheck), run after the
// brokered credential was removed (the upstream client does that inside
// every exchange, since only it holds the credential) and before the
// message (and its audit record) is written.
var ResultOrder = [...]Slot{Results, Ingress}

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

// Scope says which messages a stage applies to, as a set. Each row of the
// message table (Messages) names the one scope its message runs under.
type Scope uint16

const (
	// Opening: initialize, which opens a session and so has none to check.
	Opening Scope = 1 << iota
	// InSession: the requests the gateway answers itself or from its
	// catalogs (ping, server/discover, the lists, subscriptions/listen),
	// and unknown methods, which are then refused.
	InSession
	// ToolCall: tools/call.
	ToolCall
	// Read: the other decided requests, which name one prompt or resource
	// of one server and get its content (resources/read, prompts/get,
	// completion/complete).
	Read
	// Subscription: resources/subscribe and resources/unsubscribe, sent
	// to the server of their resource, and decided as a read of it.
	Subscription
	// Control: logging/setLevel, sent to every server of the endpoint it
	// may reach; no object of a server is named.
	Control
	// Relayed: a request of a server to the client (sampling/createMessage,
	// elicitation/create, roots/list, ping), relayed during a call or on a
	// stream.
	Relayed
	// Answered: the client's answer to a request of a server (method
	// ResponseMethod), returned to that server.
	Answered

	// Decided: the requests whose target is checked one by one
	// (tools/call and the reads).
	Decided = ToolCall | Read
	// ServerBound: every client message a server receives. The kill
	// switch and the policy stand in front of each.
	ServerBound = Decided | Subscription | Control | Answered
	// Every message that runs stages.
	Every = Opening | InSession | ServerBound | Relayed
)

// scope is the scope c runs under.
// In reports whether c's request is in scope s (a stage's Scope).
func (c *Call) In(s Scope) bool { return c.scope()&s != 0 }

func (c *Call) scope() Scope {
	switch {
	case c.Relayed && c.Method == ResponseMethod:
		return Answered
	case c.Relayed:
		return Relayed
	}
	return ScopeOf(c.Method)
}
