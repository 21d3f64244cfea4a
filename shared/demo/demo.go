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
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// LeakText is what the leak tool returns: an email address, a phone number,
// a Luhn-valid card number and an SSN, for the scanners.
const LeakText = "Customer record: jane.doe@example.com, +1 415-555-0132, card 4111 1111 1111 1111, SSN 123-45-6789."

// Server is a running demo upstream.
type Server struct {
	URL string // Streamable HTTP endpoint, e.g. http://127.0.0.1:PORT/mcp

	srv   *http.Server
	ln    net.Listener
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
	s := mcp.NewServer(&mcp.Implementation{Name: "aegis-demo-upstream", Version: "1.0.0"}, nil)
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
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil))
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

// Close stops the server.
func (d *Server) Close() error { return d.srv.Close() }
