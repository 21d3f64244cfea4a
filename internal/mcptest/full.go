//lint:file-ignore SA1019 sampling, roots and logging are deprecated as of 2026-07-28 (SEP-2577), but 2025-11-25 clients and servers use them and the gateway carries them
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Received is one message a Full server got from its client: a request
// (Method and its Params as JSON), or the client's answer to one of the
// server's own requests (Method "answer:" + the request's method, Params
// the result as JSON, or Err when the answer was an error).
type Received struct {
	Method string
	Params string
	Err    string
}

// Full is a real MCP server (the Go SDK's, stateful, Streamable HTTP on
// loopback) offering every feature the gateway carries, and recording
// every message it receives:
//
//   - tools "echo" (answers its arguments as JSON text) and "ask"
//     (argument "what": "sampling", "elicitation" or "roots"; it sends a
//     progress notification and a log message, asks the client that, and
//     answers with the client's answer as JSON text, or "error: ..." when
//     the answer was an error);
//   - prompt "greet" (argument "name"), resource "test://static", template
//     "test://item/{id}", completion of both, subscriptions, logging.
type Full struct {
	URL string

	mu       sync.Mutex
	received []Received
}

// AskTimeout bounds how long the tool "ask" waits for the client's
// answer.
const AskTimeout = 2 * time.Second

// MaxReceived bounds what a Full keeps.
const MaxReceived = 4096

func (f *Full) add(r Received) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.received) < MaxReceived {
		f.received = append(f.received, r)
	}
}

// Received is every message received so far, in order.
func (f *Full) Received() []Received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Received(nil), f.received...)
}

// Saw reports whether some received message of method (or answer:METHOD)
// holds s in its params (or error).
func (f *Full) Saw(method, s string) bool {
	for _, r := range f.Received() {
		if r.Method == method && (strings.Contains(r.Params, s) || strings.Contains(r.Err, s)) {
			return true
		}
	}
	return false
}

// Reset forgets what was received.
func (f *Full) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.received = nil
}

// StartFull starts a Full server; it stops when the test ends.
func StartFull(t testing.TB) *Full {
	t.Helper()
	f := &Full{}
	s := mcp.NewServer(&mcp.Implementation{Name: "full", Version: "1"}, &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{req.Params.Argument.Value + "-done"}}}, nil
		},
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			p, _ := json.Marshal(req.GetParams())
			f.add(Received{Method: method, Params: string(p)})
			return next(ctx, method, req)
		}
	})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Answers its arguments."},
		func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			return text(string(req.Params.Arguments)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "Asks the client."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			What string `json:"what"`
		}) (*mcp.CallToolResult, any, error) {
			ss := req.Session
			// A client that never answers (its answer was not carried)
			// must not hold the server past the test.
			ctx, cancel := context.WithTimeout(ctx, AskTimeout)
			defer cancel()
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "asking"})
			}
			_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "asking the client"})
			var res any
			var err error
			method := ""
			switch in.What {
			case "sampling":
				method = "sampling/createMessage"
				res, err = ss.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
			case "elicitation":
				method = "elicitation/create"
				res, err = ss.Elicit(ctx, &mcp.ElicitParams{Message: "your card?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"card": map[string]any{"type": "string"}}}})
			case "roots":
				method = "roots/list"
				res, err = ss.ListRoots(ctx, &mcp.ListRootsParams{})
			default:
				return nil, nil, fmt.Errorf("ask what? %q", in.What)
			}
			if err != nil {
				f.add(Received{Method: "answer:" + method, Err: err.Error()})
				return text("error: " + err.Error()), nil, nil
			}
			b, _ := json.Marshal(res)
			f.add(Received{Method: "answer:" + method, Params: string(b)})
			return text(string(b)), nil, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "name"}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["name"]}}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "test://static", Name: "static", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "static"}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://item/{id}", Name: "item", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "item"}}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	f.URL = srv.URL
	return f
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
