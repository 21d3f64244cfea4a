package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/connecttest"
	"github.com/aegis-gw/aegis/shared/memstore"
)

// TestConnectElicitationComplete: a Go SDK client at MCP 2025-11-25 that
// declared elicitation.url calls a tool of a server with auth: oauth and
// is answered -32042 with a URL elicitation; a person follows its link
// through the npm oidc-provider's login and consent; the session that
// was asked gets notifications/elicitation/complete with that
// elicitationId on its GET stream, on which the client sends the call
// again and it succeeds with the caller's own grant. Another session of
// the same caller, and a session of another caller, are told nothing.
// (The SDK we pin, v1.8.0, has its automatic -32042 retry only as an
// unexported middleware; the client here retries when its
// ElicitationCompleteHandler gets the notification.)
func TestConnectElicitationComplete(t *testing.T) {
	w := newConnWorld(t, memstore.New())
	urlCaps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	open := func(caller string) (*mcp.ClientSession, <-chan string) {
		t.Helper()
		got := make(chan string, 8)
		c := mcp.NewClient(&mcp.Implementation{Name: "legacy", Version: "1"}, &mcp.ClientOptions{
			Capabilities: urlCaps,
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept"}, nil
			},
			ElicitationCompleteHandler: func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
				got <- req.Params.ElicitationID
			},
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: w.gw + "/t/acme/mcp", HTTPClient: bearerClient(w.keys[caller])},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		must(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
			t.Fatalf("the client speaks %s; want 2025-11-25", v)
		}
		return cs, got
	}
	a, gotA := open("alice")
	_, gotSame := open("alice") // another session of the same caller
	bob, gotBob := open("bob")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call := func(cs *mcp.ClientSession) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.whoami", Arguments: map[string]any{}})
	}
	elicitation := func(err error) (id, link string) {
		t.Helper()
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != -32042 {
			t.Fatalf("err %v; want -32042", err)
		}
		var d struct {
			Elicitations []struct{ Mode, ElicitationID, URL string } `json:"elicitations"`
		}
		if err := json.Unmarshal(we.Data, &d); err != nil || len(d.Elicitations) != 1 || d.Elicitations[0].Mode != "url" || d.Elicitations[0].ElicitationID == "" {
			t.Fatalf("-32042 data %s", we.Data)
		}
		return d.Elicitations[0].ElicitationID, d.Elicitations[0].URL
	}
	_, err := call(a)
	idA, link := elicitation(err)
	_, err = call(bob) // bob is asked too, and stays unconnected
	idBob, _ := elicitation(err)
	if idA == idBob {
		t.Fatal("two callers were given one elicitation id")
	}
	if st, page, _ := connecttest.Consent(t, connecttest.Browser(nil), link, "alice", nil); st != http.StatusOK || !strings.Contains(page, "Connected to docs") {
		t.Fatalf("consent ended %d: %.300s", st, page)
	}
	select {
	case id := <-gotA:
		if id != idA {
			t.Fatalf("session A was told of elicitation %q; want %q", id, idA)
		}
	case <-ctx.Done():
		t.Fatal("session A was not told that its elicitation completed")
	}
	res, err := call(a) // the client's retry, on the notification
	must(t, err)
	if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "subject=alice" {
		t.Fatalf("the retry after the notification: %+v", res.Content)
	}
	// The notification is written to every stream of the session under
	// one lock; another session's would have been written by now.
	time.Sleep(200 * time.Millisecond)
	for name, got := range map[string]<-chan string{"alice's other session": gotSame, "bob's session": gotBob} {
		select {
		case id := <-got:
			t.Fatalf("%s was told of elicitation %q", name, id)
		default:
		}
	}
}
