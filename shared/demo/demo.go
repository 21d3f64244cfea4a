// Package demo is the upstream MCP server `aegis serve --demo` starts on a
// loopback port: a real MCP server (the official Go SDK) over Streamable
// HTTP, with a few tools that exercise the gateway's checks. Tests use it as
// a real upstream too.
package demo

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServerName is the name the demo upstream gives in its initialize answer
// (serverInfo.name); Running looks for it.
const ServerName = "aegis-demo-upstream"

// LeakText is what the leak tool returns: an email address, a phone number,
// a Luhn-valid card number and an SSN, for the scanners.
const LeakText = "Customer record: jane.doe@example.com, +1 415-555-0132, card 4111 1111 1111 1111, SSN 123-45-6789."

// Server is a running demo upstream.
type Server struct {
	URL string // Streamable HTTP endpoint, e.g. http://127.0.0.1:PORT/mcp

	srv   *http.Server
	ln    net.Listener
	mcp   *mcp.Server
	mu    sync.Mutex
	calls map[string]int
	total atomic.Int64
}

type echoIn struct {
	Message string `json:"message" jsonschema:"text to send back"`
}
type slowIn struct {
	Seconds float64 `json:"seconds" jsonschema:"how long to sleep before answering"`
}
type noIn struct{}
type transferIn struct {
	To     string  `json:"to" jsonschema:"destination account"`
	Amount float64 `json:"amount" jsonschema:"amount to move"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// NewMCPServer builds the demo MCP server; count is called with each tool
// name as it runs.
func NewMCPServer(count func(tool string)) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns its message argument."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			count("echo")
			return text(in.Message), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Sleeps for the given seconds, then answers."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			count("slow")
			select {
			case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return text(fmt.Sprintf("slept %gs", in.Seconds)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails (a result with isError)."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
			count("fail")
			r := text("the fail tool failed, as it always does")
			r.IsError = true
			return r, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "leak", Description: "Returns a customer record full of personal data."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
			count("leak")
			return text(LeakText), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "transfer", Description: "Moves money between accounts (needs approval)."},
		func(_ context.Context, _ *mcp.CallToolRequest, in transferIn) (*mcp.CallToolResult, any, error) {
			count("transfer")
			return text(fmt.Sprintf("transferred %.2f to %s", in.Amount, in.To)), nil, nil
		})
	return s
}

// Start runs the demo upstream on addr (e.g. "127.0.0.1:0").
func Start(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	d := &Server{ln: ln, calls: map[string]int{}}
	ms := NewMCPServer(d.count)
	mux := http.NewServeMux()
	d.mcp = ms
	// The gateway ends the upstream sessions of the gateway sessions it
	// forgets; SessionTimeout forgets the rest (a gateway killed, a
	// DynamoDB TTL deletion), so that the demo is bounded on its own.
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, &mcp.StreamableHTTPOptions{SessionTimeout: SessionIdle}))
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	d.URL = "http://" + ln.Addr().String() + "/mcp"
	go func() { _ = d.srv.Serve(ln) }()
	return d, nil
}

func (d *Server) count(tool string) {
	d.mu.Lock()
	d.calls[tool]++
	d.mu.Unlock()
	d.total.Add(1)
}

// Calls reports how many times tool has run on this upstream.
func (d *Server) Calls(tool string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[tool]
}

// SessionIdle is how long the demo upstream keeps an MCP session that
// gets no request: then it closes it, as if the client had sent DELETE. A
// gateway whose upstream session was closed so opens a new one on its
// next call (the 404 the upstream answers is the transport's signal).
const SessionIdle = 5 * time.Minute

// Sessions reports how many MCP sessions the demo upstream holds open.
func (d *Server) Sessions() int {
	n := 0
	for range d.mcp.Sessions() {
		n++
	}
	return n
}

// Close stops the server.
func (d *Server) Close() error { return d.srv.Close() }

// Running reports whether rawURL is a demo upstream that answers: it opens
// an MCP session there (initialize), checks that the server calls itself
// ServerName, and ends the session again. Only http URLs on a loopback
// address are tried, since that is where Start listens under
// `aegis serve --demo`; any other URL, or no answer before ctx ends (give
// it a deadline), is false. `aegis serve --demo --store dynamodb` calls it
// to tell a demo upstream that another process still runs from one left
// behind in the store by a process that has ended.
func Running(ctx context.Context, rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" {
		return false
	}
	if h := u.Hostname(); h != "localhost" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "aegis-serve-demo-probe", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: rawURL, HTTPClient: &http.Client{}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return false
	}
	defer cs.Close()
	r := cs.InitializeResult()
	return r != nil && r.ServerInfo != nil && r.ServerInfo.Name == ServerName
}
