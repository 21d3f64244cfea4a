package pipeline

import "fmt"

// Kind is what a message the gateway passes is: who sends it and whether
// it asks for an answer. Every kind has rows in Messages.
type Kind uint8

// The kinds, client-to-server then server-to-client.
const (
	ClientRequest      Kind = iota + 1 // a request of the client (one row per method)
	ClientNotification                 // a notification of the client (one row per method)
	ClientResponse                     // the client's answer to a request of a server
	ServerRequest                      // a request of a server to the client (one row per method)
	ServerNotification                 // a notification of a server (one row per method)
	ServerResult                       // a server's result of a request it was sent
	ServerError                        // a server's JSON-RPC error answering a request it was sent

	numKinds
)

var kindNames = [numKinds]string{
	ClientRequest:      "client request",
	ClientNotification: "client notification",
	ClientResponse:     "client response",
	ServerRequest:      "server request",
	ServerNotification: "server notification",
	ServerResult:       "result",
	ServerError:        "error",
}

func (k Kind) String() string {
	if k > 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ToServer reports whether a message of kind k goes from the client to a
// server (server-bound: the kill switch, the policy and the egress scan
// stand between it and the server).
func (k Kind) ToServer() bool { return k >= ClientRequest && k <= ClientResponse }

// Carry is what the gateway does with a message of a row.
type Carry uint8

const (
	// Answer: the gateway answers it itself (initialize, ping,
	// server/discover); no server sees it.
	Answer Carry = iota + 1
	// List: answered from the catalogs, filtered by the same decisions
	// as the calls (pipeline.Filter).
	List
	// Forward: sent to the one server its target routes to.
	Forward
	// Broadcast: sent to every server of the endpoint the checks let it
	// reach (not stopped, granted).
	Broadcast
	// Listen: an event stream the gateway holds (subscriptions/listen).
	Listen
	// Consume: a notification the gateway takes for itself or drops as
	// the row says; no server sees it.
	Consume
	// Return: the client's answer, sent to the server whose outstanding
	// request it answers, once.
	Return
	// Relay: a message of a server, relayed to the client (on the
	// request's event stream or the session's stream).
	Relay
	// Reply: a server's answer, written to the client as the answer of
	// its request.
	Reply

	numCarries
)

var carryNames = [numCarries]string{
	Answer: "answered by the gateway", List: "listed from the catalogs", Forward: "forwarded to its server",
	Broadcast: "sent to every server it may reach", Listen: "held as an event stream", Consume: "not forwarded",
	Return: "returned to the server that asked", Relay: "relayed to the client", Reply: "written to the client",
}

func (c Carry) String() string {
	if c > 0 && c < numCarries {
		return carryNames[c]
	}
	return fmt.Sprintf("Carry(%d)", uint8(c))
}

// Message is one row of the message table: a kind of message (and its
// method, for the kinds that have one), the scope of the stage table it
// runs under (the stages whose scope includes it run, in the order), what
// the gateway does with it, and, for a server-bound message, the members
// of its params (of the message itself, for a client response) that the
// content stage scans for egress. A server-to-client row names its
// ingress place: the "ingress" slot (MessageCheck) for notifications and
// requests, the "results" slot (ResultCheck) for results and errors.
type Message struct {
	Kind   Kind
	Method string // "" for the kinds without one (responses, results, errors)
	Scope  Scope  // 0: no stage runs (a notification the gateway consumes)
	Carry  Carry
	// Egress are the members scanned for credentials, card numbers and
	// SSNs before the message may leave (EGRESS_ACTION): params members,
	// or "result"/"error" of a client response. A dotted name is a member
	// of a member ("argument.value").
	Egress []string
	// Ingress is the slot whose check runs over a server-to-client
	// message before the client gets it (Results or Ingress); 0 for
	// client-to-server rows.
	Ingress Slot
}

// Messages is the message table: every message the gateway passes has
// exactly one row here, and a message without a row is refused (a request:
// -32601; a notification or a client response: dropped and audited),
// never forwarded by default. docs/pipeline.md ("The message table") is
// this table in prose; TestMessageTableMatchesDocs keeps them in step.
var Messages = [...]Message{
	// Client requests.
	{Kind: ClientRequest, Method: "initialize", Scope: Opening, Carry: Answer},
	{Kind: ClientRequest, Method: "ping", Scope: InSession, Carry: Answer},
	{Kind: ClientRequest, Method: "server/discover", Scope: InSession, Carry: Answer},
	{Kind: ClientRequest, Method: "tools/list", Scope: InSession, Carry: List},
	{Kind: ClientRequest, Method: "prompts/list", Scope: InSession, Carry: List},
	{Kind: ClientRequest, Method: "resources/list", Scope: InSession, Carry: List},
	{Kind: ClientRequest, Method: "resources/templates/list", Scope: InSession, Carry: List},
	{Kind: ClientRequest, Method: "tools/call", Scope: ToolCall, Carry: Forward, Egress: []string{"arguments", "_meta"}},
	{Kind: ClientRequest, Method: "resources/read", Scope: Read, Carry: Forward, Egress: []string{"uri", "_meta"}},
	{Kind: ClientRequest, Method: "prompts/get", Scope: Read, Carry: Forward, Egress: []string{"arguments", "_meta"}},
	{Kind: ClientRequest, Method: "completion/complete", Scope: Read, Carry: Forward, Egress: []string{"ref.uri", "argument", "context", "_meta"}},
	{Kind: ClientRequest, Method: "resources/subscribe", Scope: Subscription, Carry: Forward, Egress: []string{"uri", "_meta"}},
	{Kind: ClientRequest, Method: "resources/unsubscribe", Scope: Subscription, Carry: Forward, Egress: []string{"uri", "_meta"}},
	{Kind: ClientRequest, Method: "logging/setLevel", Scope: Control, Carry: Broadcast, Egress: []string{"_meta"}},
	// Each resource URI of a subscriptions/listen is checked as a
	// resources/subscribe of its own (a URI refused is not honoured).
	{Kind: ClientRequest, Method: "subscriptions/listen", Scope: InSession, Carry: Listen},

	// Client notifications: none reaches a server. The gateway has
	// already answered initialize; a cancellation would have to name the
	// upstream's request, and the upstream call ends with the client's
	// request anyway; the client's roots are asked for by a server's
	// roots/list, which is relayed.
	{Kind: ClientNotification, Method: "notifications/initialized", Carry: Consume},
	{Kind: ClientNotification, Method: "notifications/cancelled", Carry: Consume},
	{Kind: ClientNotification, Method: "notifications/progress", Carry: Consume},
	{Kind: ClientNotification, Method: "notifications/roots/list_changed", Carry: Consume},

	// The client's answer to a server's request.
	{Kind: ClientResponse, Scope: Answered, Carry: Return, Egress: []string{"result", "error"}},

	// Server requests to the client.
	{Kind: ServerRequest, Method: "sampling/createMessage", Scope: Relayed, Carry: Relay, Ingress: Ingress},
	{Kind: ServerRequest, Method: "elicitation/create", Scope: Relayed, Carry: Relay, Ingress: Ingress},
	{Kind: ServerRequest, Method: "roots/list", Scope: Relayed, Carry: Relay, Ingress: Ingress},
	{Kind: ServerRequest, Method: "ping", Scope: Relayed, Carry: Relay, Ingress: Ingress},

	// Server notifications.
	{Kind: ServerNotification, Method: "notifications/message", Carry: Relay, Ingress: Ingress},
	{Kind: ServerNotification, Method: "notifications/progress", Carry: Relay, Ingress: Ingress},
	{Kind: ServerNotification, Method: "notifications/cancelled", Carry: Relay, Ingress: Ingress},
	{Kind: ServerNotification, Method: "notifications/resources/updated", Carry: Relay, Ingress: Ingress},
	{Kind: ServerNotification, Method: "notifications/resources/list_changed", Carry: Relay, Ingress: Ingress},
	{Kind: ServerNotification, Method: "notifications/tools/list_changed", Carry: Relay, Ingress: Ingress},
	{Kind: ServerNotification, Method: "notifications/prompts/list_changed", Carry: Relay, Ingress: Ingress},
	{Kind: ServerNotification, Method: "notifications/elicitation/complete", Carry: Relay, Ingress: Ingress},
	{Kind: ServerNotification, Method: "notifications/subscriptions/acknowledged", Carry: Consume},

	// Servers' answers.
	{Kind: ServerResult, Carry: Reply, Ingress: Results},
	{Kind: ServerError, Carry: Reply, Ingress: Results},
}

// Lookup is the row of a message of kind k with method ("" for the kinds
// without one); ok is false when the table has none, and the message is
// then refused.
func Lookup(k Kind, method string) (Message, bool) {
	if k > 0 && k < numKinds {
		if i, ok := messageIndex[k][method]; ok {
			return Messages[i], true
		}
	}
	return Message{}, false
}

// messageIndex is Messages by kind, then method (a row's first place).
var messageIndex = func() (ix [numKinds]map[string]int) {
	for i, row := range Messages {
		if ix[row.Kind] == nil {
			ix[row.Kind] = map[string]int{}
		}
		if _, dup := ix[row.Kind][row.Method]; !dup {
			ix[row.Kind][row.Method] = i
		}
	}
	return ix
}()

// ScopeOf is the scope a client's request of method runs under: its row's
// (Opening, InSession, ToolCall, Read, Subscription or Control). A method
// without a row runs under InSession (the session and route stages), and
// the gateway then refuses it with -32601. A relayed message
// (Call.Relayed) runs under Relayed, a client's answer (method
// ResponseMethod) under Answered.
func ScopeOf(method string) Scope {
	if i, ok := messageIndex[ClientRequest][method]; ok {
		return Messages[i].Scope
	}
	return InSession
}

// ResponseMethod is the Call.Method of a client's answer to a server's
// request (a relayed call): its audit records' method.
const ResponseMethod = "response"
